#!/usr/bin/env bash
# Session 38's plan for an H100 (not run in session 38: no machine was lent).
# Main's `coda` (.device/main-coda.xz, packed from main's build) searches
# every shape of coda-llama's shipped searches on this GPU (`coda tune`,
# scripts/device-verify.sh's `tune` part, ~3 min on an H200 in session 8),
# into $OUT/h100/tuning.json; then `coda bench --part llama` runs twice in
# the same call, with and without that cache, so the table shows what
# shipping it gives. Back on the build machine:
#   bench/ship_tuning.py OUT/h100/tuning.json coda-llama/tuning/nvidia-h100-80gb-hbm3.json
# (coda-llama's build names the file it wants if the GPU's name differs).
# STEP=tune (≤ 560 s) or STEP=bench (≤ 560 s; needs the first step's
# tuning.json, carried back as bench/results/…/h100/tuning.json: pass its
# path as CACHE). Carry [".device"].
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
o=$OUT/h100; mkdir -p /tmp/m "$o"
xz -dc .device/main-coda.xz > /tmp/m/coda && chmod +x /tmp/m/coda
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
case "${STEP:-tune}" in
tune)
  scripts/device-run.sh /tmp/m/coda doctor > "$o/doctor.log" 2>&1; grep -E "^(note|FAIL)" "$o/doctor.log"
  PARTS=tune timeout 540 scripts/device-verify.sh /tmp/m "$o" > "$o/verify-tune.txt" 2>&1
  cat "$o/verify-tune.txt"
  echo "searches: $(grep -c 'choices' "$o/tune.log") at $(el) s"
  grep -o "M=.*" "$o/tune.log" | grep "choices" | head -80 | cut -c1-160 > "$o/tune-summary.txt"
  ;;
bench)
  cp "${CACHE:?CACHE: the tuning.json of STEP=tune}" "$o/tuning.json"
  # coda-candle's GPU test (main's, with session 38's forward-only head_loss case).
  xz -dc .device/candle-gpu.xz > /tmp/m/candle-gpu && chmod +x /tmp/m/candle-gpu
  timeout 120 coda-candle/run-gpu-test.sh /tmp/m/candle-gpu > "$o/candle.log" 2>&1; echo "candle exit $? at $(el) s"; tail -3 "$o/candle.log"
  for run in plain searched plain searched; do
    if [[ $run == searched ]]; then export CODA_TUNE_CACHE="$o/tuning.json"; else export CODA_TUNE_CACHE=/tmp/none.json; fi
    timeout $((540 - $(el))) scripts/device-run.sh /tmp/m/coda bench --part llama --quick --json "$o/bench-$run-$(el).json" > "$o/bench-$run-$(el).log" 2>&1
    echo "$run exit $? at $(el) s"
  done
  grep -h "ratio\|^|" "$o"/bench-*.log | head -60
  ;;
esac
tar czf "$OUT/h100.tgz" -C "$OUT" h100
echo "done at $(el) s"
