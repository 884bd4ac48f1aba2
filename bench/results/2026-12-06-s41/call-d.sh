#!/usr/bin/env bash
# Session 41, call D (≤ 330 s), the build of call C (.device at 7c40d01).
# On an H200: `gpu --quick` and the group programs at full size
# (`gpu --only qk_norm`) on this build, the loss variants against the plain
# tail (issue I's H200 timing), the untuned suite (`coda bench --part
# untuned`: the H200 keeps its constants, so as session 36's).
# On an H100: the loss variants again (call A: soft-capping 1.046× at
# d = 2048, session 37's H100 run 1.018×), then the block's QK-norm program
# searched over its configs and scheduler options. Carry [".device"].
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { local l=$(( $1 - $(el) )); echo $(( l > 1 ? l : 1 )); }
o=$OUT/call-d; rm -rf /tmp/b /tmp/py; mkdir -p /tmp/b /tmp/py "$o"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
tar xJf .device/bins.tar.xz -C /tmp/b
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/py .device/coda_rs-*.whl > "$o/pip.log" 2>&1
variants() {  # d, deadline (s)
  PYTHONPATH=/tmp/py timeout "$(left "$2")" python3 bench/head_variants.py --hidden "$1" > "$o/head-variants-$1-$(el).log" 2>&1
  echo "== head variants d=$1 exit $? at $(el) s"; tail -5 "$(ls -t "$o"/head-variants-"$1"-*.log | head -1)"
}
if grep -q "H100" "$o/gpu.txt"; then
  variants 2048 60; variants 2048 100; variants 4096 140
  for s in 16384,3072,2048 16384,6144,4096 8192,24576,8192; do
    CODA_LOG=debug CODA_TUNE_CACHE=$o/qk-tuning.json timeout "$(left 320)" scripts/device-run.sh /tmp/b/coda tune --program coda-llama::linear_rowscale_qk_norm_rope --shape $s >> "$o/qk-tune.log" 2>&1
    echo "qk tune $s exit $? at $(el) s"
  done
  grep -v DEBUG "$o/qk-tune.log" | grep " M=" | cut -c1-220
else
  timeout 110 scripts/device-run.sh /tmp/b/gpu --quick > "$o/gpu.log" 2>&1
  echo "gpu --quick exit $? at $(el) s: $(tail -1 "$o/gpu.log")"
  grep -E "^FAIL" -A6 "$o/gpu.log" | head -20
  timeout "$(left 150)" scripts/device-run.sh /tmp/b/gpu --only qk_norm > "$o/gpu-qk.log" 2>&1
  echo "gpu --only qk_norm exit $? at $(el) s: $(tail -1 "$o/gpu-qk.log")"
  variants 2048 180; variants 4096 210
  timeout "$(left 325)" scripts/device-run.sh /tmp/b/coda bench --part untuned --json "$o/untuned.json" > "$o/untuned.log" 2>&1
  echo "bench untuned exit $? at $(el) s"; grep -E "programs, median" "$o/untuned.log"
fi
tar czf "$OUT/call-d.tgz" -C "$OUT" call-d
echo "done at $(el) s"
