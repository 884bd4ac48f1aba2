#!/usr/bin/env bash
# Session 54's call (≤ LIMIT + QUICK_LIMIT + 60 s on an H200, ≤ QUICK_LIMIT + 70 s on an H100). On an
# H200: session 51's call-2.sh (issue I's items at full size, LIMIT s). On
# either card, then: the generated batches $BATCHES with main's harness (every
# yardstick now spans its GEMM's bound; default: seed 0x5e540005, whose bf16
# random_010 failed call H under the f32 sum alone, and 0x5e540004, whose FP8
# random_012 failed call E). Then `gpu --quick` (every program of the suite at
# its small shapes, QUICK_LIMIT s; NO_GPU=1 skips it). Carry [".device"].
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
batches=${BATCHES:-gpu_random_5e540005 gpu_random_5e540004}
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
if [ -z "${NO_GPU:-}" ]; then
  tar xJf .device/bins.tar.xz -C /tmp/b
  xz -dc .device/gpu.xz > /tmp/b/gpu && chmod 755 /tmp/b/gpu
  timeout "${QUICK_LIMIT:-300}" scripts/device-run.sh /tmp/b/gpu --quick > "$o/gpu-quick.log" 2>&1
  echo "gpu --quick exit $? at $(el) s: $(tail -1 "$o/gpu-quick.log")"
  grep -E "^FAIL" -A8 "$o/gpu-quick.log" | head -30
fi
echo "done at $(el) s"
