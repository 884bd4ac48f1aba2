#!/usr/bin/env bash
# Session 40, call B (≤ 200 s: the budget left), this session's final build
# (.device/bins.tar.xz: the H100 tuning file shipped, the scheduler's
# long-K rule, `Element` sealed). On an H100: three untuned-suite programs
# searched at long-K shapes (the rule's check on programs no file covers),
# then `coda bench --part llama` in full (blocks at d = 2048 / 4096 / 8192;
# session 35, before the file: the H100's blocks at d = 4096 / 8192 ran
# 1.21–1.47× their GEMMs). On an H200: `gpu --quick` (every check of this
# build), the group programs at full size (`gpu --only qk_norm`), the
# LM-head loss variants against the plain tail (d = 2048, 4096), the
# block's QK-norm program searched over its scheduler options. Carry [".device"].
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { local l=$(( ${1:-200} - $(el) )); echo $(( l > 1 ? l : 1 )); }
o=$OUT/call-b; rm -rf /tmp/b /tmp/py; mkdir -p /tmp/b /tmp/py "$o"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
tar xJf .device/bins.tar.xz -C /tmp/b
if grep -q "H100" "$o/gpu.txt"; then
  # The long-K scheduler rule on programs no file covers: three of the
  # untuned suite searched where it applies; the log has the heuristic's time.
  for pr in relu2_bias layernorm_stats swiglu_keep; do
    CODA_LOG=debug CODA_TUNE_CACHE=$o/user-tuning.json timeout "$(left 60)" scripts/device-run.sh /tmp/b/coda tune --program coda-user-programs::$pr \
      --shape 16384,8192,28672 --shape 16384,4096,22016 --shape 8192,8192,32768 >> "$o/user-tune.log" 2>&1
    echo "user tune $pr exit $? at $(el) s"
  done
  python3 bench/heuristic_report.py "$o/user-tune.log" > "$o/user-heuristic.txt" 2>&1; cat "$o/user-heuristic.txt"
  # The new build's full Llama table (the H100 file shipped), its rows as
  # they finish (a run cut short keeps them).
  timeout "$(left)" scripts/device-run.sh /tmp/b/coda bench --part llama --json "$o/bench.json" > "$o/bench.log" 2>&1
  echo "bench exit $? at $(el) s"; grep -E "cuBLASLt$|^op |[0-9]\.[0-9]{3} " "$o/bench.log" | cut -c1-100 | head -30
  tar czf "$OUT/call-b.tgz" -C "$OUT" call-b
  echo "done at $(el) s"
  exit
fi
timeout 170 scripts/device-run.sh /tmp/b/gpu --quick > "$o/gpu.log" 2>&1
echo "gpu --quick exit $? at $(el) s: $(tail -1 "$o/gpu.log")"
grep -E "^FAIL" -A6 "$o/gpu.log" | head -20
grep -E "accumulate" "$o/gpu.log" | head -4
timeout "$(left 275)" scripts/device-run.sh /tmp/b/gpu --only qk_norm > "$o/gpu-qk.log" 2>&1
echo "gpu --only qk_norm exit $? at $(el) s: $(tail -1 "$o/gpu-qk.log")"
grep -E "^FAIL" -A6 "$o/gpu-qk.log" | head -20
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/py .device/coda_rs-*.whl > "$o/pip.log" 2>&1
for h in 2048 4096; do
  PYTHONPATH=/tmp/py timeout "$(left 278)" python3 bench/head_variants.py --hidden $h > "$o/head-variants-$h.log" 2>&1
  echo "== head variants d=$h exit $? at $(el) s"; tail -6 "$o/head-variants-$h.log"
done
for s in 16384,3072,2048 8192,3072,2048 16384,6144,4096 16384,12288,8192; do
  CODA_LOG=debug CODA_TUNE_CACHE=$o/qk-tuning.json timeout "$(left 20)" scripts/device-run.sh /tmp/b/coda tune --program coda-llama::linear_rowscale_qk_norm_rope --shape $s >> "$o/qk-tune.log" 2>&1
  echo "qk tune $s exit $? at $(el) s"
done
grep -v DEBUG "$o/qk-tune.log" | grep " M=" | cut -c1-200 | head -8
tar czf "$OUT/call-b.tgz" -C "$OUT" call-b
echo "done at $(el) s"
