#!/usr/bin/env bash
# Session 55, after the row_lse change (exp(x − max) per element; carry
# [".device"]: bins-old.tar.xz is main before it, bins.tar.xz after).
# On an H200: issue I's items at full size (session 51's call-2.sh, LIMIT s),
# then `gpu --quick`. On an H100: `gpu --quick`, the cross-entropy programs
# and the loss end to end at full size, the batch $BATCH (seed 0x5e550003,
# rebuilt: its random_012 failed call D), then `time_programs --programs-only
# --only cross_entropy --quick` of the build before and after, alternated twice.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
o=$OUT/call-e; mkdir -p "$o" /tmp/b /tmp/old
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
tar xJf .device/bins.tar.xz -C /tmp/b
xz -dc .device/gpu.xz > /tmp/b/gpu && chmod 755 /tmp/b/gpu
quick() {
  timeout "${QUICK_LIMIT:-120}" scripts/device-run.sh /tmp/b/gpu --quick > "$o/gpu-quick.log" 2>&1
  echo "gpu --quick exit $? at $(el) s: $(tail -1 "$o/gpu-quick.log")"
  grep -E "^FAIL" -A8 "$o/gpu-quick.log" | head -30
  grep -A3 "^PASS row_lse" "$o/gpu-quick.log"
}
if grep -q H200 "$o/gpu.txt"; then
  LIMIT=${LIMIT:-330} bash bench/results/2026-12-07-s51/call-2.sh | tail -n +3
  quick
  echo "done at $(el) s"; exit 0
fi
quick
timeout 150 scripts/device-run.sh /tmp/b/gpu --only linear_cross_entropy --only "cross-entropy loss" > "$o/gpu-ce.log" 2>&1
echo "gpu (cross-entropy, full size) exit $? at $(el) s: $(tail -1 "$o/gpu-ce.log")"
grep -E "^FAIL" -A8 "$o/gpu-ce.log" | head -30
xz -dc ".device/${BATCH:-gpu_random_5e550003}.xz" > /tmp/b/batch && chmod 755 /tmp/b/batch
timeout 60 scripts/device-run.sh /tmp/b/batch > "$o/batch.log" 2>&1
echo "batch exit $? at $(el) s: $(tail -1 "$o/batch.log")"
grep -E "^FAIL" -A12 "$o/batch.log" | head -20; grep "random_012" "$o/batch.log" | cut -c1-200
tar xJf .device/bins-old.tar.xz -C /tmp/old
for run in 1 2; do
  for b in old b; do
    timeout 100 scripts/device-run.sh /tmp/$b/time_programs --quick --programs-only --only cross_entropy > "$o/time-$b-$run.log" 2>&1
    echo "time_programs ($b, run $run) exit $? at $(el) s"
  done
done
for f in "$o"/time-*.log; do echo "== $(basename "$f")"; grep -E "cross_entropy" "$f" | cut -c1-160; done
echo "done at $(el) s"
