#!/usr/bin/env bash
# Session 41, call C (≤ 420 s): main at 7c40d01 (.device/bins.tar.xz: a cost
# model per GPU, the H100's fitted to calls A/B's searches; the block's
# inputs and layout sizes by name; kernels unchanged).
# On an H100: the H100 model held out — four suite programs it never saw,
# searched at long-K and square shapes (the log's "heuristic's" time is the
# new model's choice; heuristic_report.py ranks it against each search's
# best); `gpu --quick`; the untuned suite timed (`coda bench --part
# untuned`, 4096³ and 8192³: the model now picks per GPU).
# On an H200: `gpu --quick`, the loss variants (issue I), the untuned suite.
# Carry [".device"].
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { local l=$(( $1 - $(el) )); echo $(( l > 1 ? l : 1 )); }
o=$OUT/call-c; rm -rf /tmp/b /tmp/py; mkdir -p /tmp/b /tmp/py "$o"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
tar xJf .device/bins.tar.xz -C /tmp/b
if grep -q "H100" "$o/gpu.txt"; then
  for pr in geglu dequant_sigmoid softcap_lse bias_gelu_exact; do
    CODA_LOG=debug CODA_TUNE_CACHE=$o/held-out.json timeout "$(left 140)" scripts/device-run.sh /tmp/b/coda tune --program coda-user-programs::$pr \
      --shape 16384,8192,28672 --shape 8192,4096,16384 --shape 8192,8192,8192 --shape 4096,4096,4096 >> "$o/held-out-tune.log" 2>&1
    echo "tune $pr exit $? at $(el) s"
  done
  python3 bench/heuristic_report.py "$o/held-out-tune.log" > "$o/held-out-heuristic.txt" 2>&1; cat "$o/held-out-heuristic.txt"
  timeout "$(left 230)" scripts/device-run.sh /tmp/b/gpu --quick > "$o/gpu.log" 2>&1
  echo "gpu --quick exit $? at $(el) s: $(tail -1 "$o/gpu.log")"
  grep -E "^FAIL" -A6 "$o/gpu.log" | head -20
else
  timeout 120 scripts/device-run.sh /tmp/b/gpu --quick > "$o/gpu.log" 2>&1
  echo "gpu --quick exit $? at $(el) s: $(tail -1 "$o/gpu.log")"
  grep -E "^FAIL" -A6 "$o/gpu.log" | head -20
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/py .device/coda_rs-*.whl > "$o/pip.log" 2>&1
  for h in 2048 4096; do
    PYTHONPATH=/tmp/py timeout "$(left $(( h == 2048 ? 180 : 230 )))" python3 bench/head_variants.py --hidden $h > "$o/head-variants-$h.log" 2>&1
    echo "== head variants d=$h exit $? at $(el) s"; tail -6 "$o/head-variants-$h.log"
  done
fi
timeout "$(left 410)" scripts/device-run.sh /tmp/b/coda bench --part untuned --json "$o/untuned.json" > "$o/untuned.log" 2>&1
echo "bench untuned exit $? at $(el) s"; grep -E "^- M=|programs, median" "$o/untuned.log" | head -4
grep -E "^[a-z0-9_]+ +M=" "$o/untuned.log" | cut -c1-110 | head -30
tar czf "$OUT/call-c.tgz" -C "$OUT" call-c
echo "done at $(el) s"
