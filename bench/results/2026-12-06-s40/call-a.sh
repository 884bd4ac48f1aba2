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
if grep -q "H100" "$o/gpu.txt"; then
  # Only the cases that check this session's code: the search needs the time.
  for only in "public functions" "LM head"; do
    timeout 90 scripts/device-run.sh /tmp/b/gpu --quick --only "$only" > "$o/gpu-${only// /-}.log" 2>&1
    echo "gpu --quick --only '$only' exit $? at $(el) s: $(tail -1 "$o/gpu-${only// /-}.log")"
    grep -E "^FAIL" -A6 "$o/gpu-${only// /-}.log" | head -20; grep -m3 accumulate "$o/gpu-${only// /-}.log"
  done
  # Every shipped shape searched on this GPU (scripts/device-verify.sh's
  # `tune`, whose searches each land in the cache as they finish), then
  # `coda bench --part llama --quick` without and with that cache.
  h=$o/h100; mkdir -p "$h"
  PARTS=tune timeout "$(left 330)" scripts/device-verify.sh /tmp/b "$h" > "$h/verify-tune.txt" 2>&1
  echo "tune at $(el) s: $(grep -c choices "$h/tune.log") searches"
  # h200: the H200's shipped searches relabeled as this GPU's (would a
  # same-architecture fallback do for GPUs without a file of their own?).
  name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  python3 -c "import json,sys; e=json.load(open('coda-llama/tuning/nvidia-h200.json')); [x.update(gpu=sys.argv[1]) for x in e]; json.dump(e, open('/tmp/h200-as-this.json','w'))" "$name"
  for run in plain searched h200; do
    case $run in
      plain) export CODA_TUNE_CACHE=/tmp/none.json ;;
      searched) export CODA_TUNE_CACHE="$h/tuning.json" ;;
      h200) export CODA_TUNE_CACHE=/tmp/h200-as-this.json ;;
    esac
    (( $(left) > 60 )) || break
    timeout "$(left)" scripts/device-run.sh /tmp/b/coda bench --part llama --quick --json "$h/bench-$run.json" > "$h/bench-$run.log" 2>&1
    echo "bench $run exit $? at $(el) s"
  done
  for run in plain searched h200; do echo "== $run"; grep -E "^op |[0-9]\.[0-9]{3} " "$h/bench-$run.log" | cut -c1-82 | head -24; done
  tar czf "$OUT/call-a.tgz" -C "$OUT" call-a
  echo "done at $(el) s"
  exit
fi
timeout 170 scripts/device-run.sh /tmp/b/gpu --quick > "$o/gpu.log" 2>&1
echo "gpu --quick exit $? at $(el) s: $(tail -1 "$o/gpu.log")"
grep -E "^FAIL" -A6 "$o/gpu.log" | head -20
grep -E "accumulate" "$o/gpu.log" | head -4
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
