#!/usr/bin/env bash
# Session 40, call A (≤ 580 s), this session's build (.device/bins.tar.xz:
# the weight gradients' accumulate mode, the object keys with the host
# compiler; every CUTLASS kernel is main's at e0cdb3e). First, on any GPU,
# `gpu --quick` (its block refusal case now checks `BlockGrads::accumulate`,
# every LM-head case `HeadGrads::accumulate`). Then on an H100: session
# 38's H100 search (call-h100.sh STEP=tune, cut short by the time left),
# for coda-llama's H100 tuning file. On an H200: the group programs at full
# size (`gpu --only qk_norm`, not yet run on this build); the LM-head loss
# variants against the plain tail at d = 2048 and 4096 (issue I, last timed
# on an H200 in session 22); the block's QK-norm program searched over its
# scheduler options at the block's shapes (keys changed in session 39;
# nothing shipped for it). Carry [".device"].
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { local l=$(( ${1:-575} - $(el) )); echo $(( l > 1 ? l : 1 )); }
o=$OUT/call-a; rm -rf /tmp/b /tmp/py; mkdir -p /tmp/b /tmp/py "$o"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
tar xJf .device/bins.tar.xz -C /tmp/b
timeout 170 scripts/device-run.sh /tmp/b/gpu --quick > "$o/gpu.log" 2>&1
echo "gpu --quick exit $? at $(el) s: $(tail -1 "$o/gpu.log")"
grep -E "^FAIL" -A6 "$o/gpu.log" | head -20
grep -E "accumulate" "$o/gpu.log" | head -4
if grep -q "H100" "$o/gpu.txt"; then
  tar czf "$OUT/call-a.tgz" -C "$OUT" call-a
  sed -i "s/timeout 540 scripts/timeout $(left 560) scripts/" bench/results/2026-12-05-s38/call-h100.sh
  STEP=tune bash bench/results/2026-12-05-s38/call-h100.sh
  exit
fi
timeout 200 scripts/device-run.sh /tmp/b/gpu --only qk_norm > "$o/gpu-qk.log" 2>&1
echo "gpu --only qk_norm exit $? at $(el) s: $(tail -1 "$o/gpu-qk.log")"
grep -E "^FAIL" -A6 "$o/gpu-qk.log" | head -20
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/py .device/coda_rs-*.whl > "$o/pip.log" 2>&1
for h in 2048 4096; do
  PYTHONPATH=/tmp/py timeout "$(left 420)" python3 bench/head_variants.py --hidden $h > "$o/head-variants-$h.log" 2>&1
  echo "== head variants d=$h exit $? at $(el) s"; tail -6 "$o/head-variants-$h.log"
done
for s in 16384,3072,2048 8192,3072,2048 16384,6144,4096 16384,12288,8192; do
  CODA_TUNE_CACHE=$o/qk-tuning.json timeout "$(left 40)" scripts/device-run.sh /tmp/b/coda tune --program coda-llama::linear_rowscale_qk_norm_rope --shape $s >> "$o/qk-tune.log" 2>&1
  echo "qk tune $s exit $? at $(el) s"
done
grep " M=" "$o/qk-tune.log" | cut -c1-200 | head -20
tar czf "$OUT/call-a.tgz" -C "$OUT" call-a
echo "done at $(el) s"
