#!/usr/bin/env bash
# Session 54's call (≤ LIMIT + 60 s on an H200, ≤ 280 s on an H100). On an
# H200: session 51's call-2.sh (issue I's items at full size, LIMIT s). On
# either card, then: the generated batches $BATCHES with main's harness (the
# FP8 yardstick now spans its bound; default: seed 0x5e540004, whose
# random_012 failed call E under the old one, and 0x5e530001, random_011's).
# On an H100 also the FP8 programs of `gpu` at full size (call-2.sh runs them
# on an H200; NO_FP8=1 skips them). Carry [".device"].
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
batches=${BATCHES:-gpu_random_5e540004 gpu_random_5e530001}
o=$OUT/call; mkdir -p "$o" /tmp/b
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
if grep -q H200 "$o/gpu.txt"; then
  LIMIT=${LIMIT:-200} bash bench/results/2026-12-07-s51/call-2.sh | tail -n +3
fi
for batch in $batches; do
  xz -dc ".device/$batch.xz" > "/tmp/b/$batch" && chmod 755 "/tmp/b/$batch"
  timeout 60 scripts/device-run.sh "/tmp/b/$batch" > "$o/$batch.log" 2>&1
  echo "$batch exit $? at $(el) s: $(tail -1 "$o/$batch.log")"
  grep -E "^FAIL" -A12 "$o/$batch.log" | head -30
done
if ! grep -q H200 "$o/gpu.txt" && [ -z "${NO_FP8:-}" ]; then
  tar xJf .device/bins.tar.xz -C /tmp/b
  xz -dc .device/gpu.xz > /tmp/b/gpu && chmod 755 /tmp/b/gpu
  timeout 150 scripts/device-run.sh /tmp/b/gpu --only fp8 > "$o/gpu-fp8.log" 2>&1
  echo "gpu --only fp8 exit $? at $(el) s: $(tail -1 "$o/gpu-fp8.log")"
  grep -E "^FAIL" -A8 "$o/gpu-fp8.log" | head -30
fi
echo "done at $(el) s"
