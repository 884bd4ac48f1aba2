#!/usr/bin/env bash
# Session 52, call B (≤ LIMIT + 30 s). On an H200: session 51's call-2.sh
# (issue I's items at full size, cut to what fits: every FP8 program, the
# group programs, the QK-norm block forward, the cross-entropy programs, the
# large loss-variant cases). On either card, then: 24 generated programs of
# seed 0x5e520001 (built this session, never run). Carry [".device"].
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
o=$OUT/call-b; mkdir -p "$o" /tmp/b
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
if grep -q H200 "$o/gpu.txt"; then
  LIMIT=${LIMIT:-200} bash bench/results/2026-12-07-s51/call-2.sh | tail -n +3
fi
xz -dc .device/gpu_random_5e520001.xz > /tmp/b/gpu_random_5e520001 && chmod 755 /tmp/b/gpu_random_5e520001
timeout 60 scripts/device-run.sh /tmp/b/gpu_random_5e520001 > "$o/gpu_random_5e520001.log" 2>&1
echo "gpu_random_5e520001 exit $? at $(el) s: $(tail -1 "$o/gpu_random_5e520001.log")"
grep -E "^FAIL" -A12 "$o/gpu_random_5e520001.log" | head -30
echo "done at $(el) s"
