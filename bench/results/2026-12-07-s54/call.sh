#!/usr/bin/env bash
# Session 54's call (≤ LIMIT + 40 s). On an H200: session 51's call-2.sh
# (issue I's items at full size, LIMIT s), then the generated batches
# $BATCHES. On an H100 (whose runs of all of these passed, sessions 50–54):
# the first batch alone. Default batches: seed 0x5e540002 (built this session
# for call C, never run), then 0x5e540001 and 0x5e530002 (24 of 24 on H100s).
# Carry [".device"].
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
batches=${BATCHES:-gpu_random_5e540002 gpu_random_5e540001 gpu_random_5e530002}
o=$OUT/call; mkdir -p "$o" /tmp/b
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
if grep -q H200 "$o/gpu.txt"; then
  LIMIT=${LIMIT:-200} bash bench/results/2026-12-07-s51/call-2.sh | tail -n +3
else
  batches=${batches%% *}
fi
for batch in $batches; do
  xz -dc ".device/$batch.xz" > "/tmp/b/$batch" && chmod 755 "/tmp/b/$batch"
  timeout 60 scripts/device-run.sh "/tmp/b/$batch" > "$o/$batch.log" 2>&1
  echo "$batch exit $? at $(el) s: $(tail -1 "$o/$batch.log")"
  grep -E "^FAIL" -A12 "$o/$batch.log" | head -30
done
echo "done at $(el) s"
