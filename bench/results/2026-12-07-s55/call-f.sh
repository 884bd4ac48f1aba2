#!/usr/bin/env bash
# Session 55's last call (carry [".device"], main at the row_lse change).
# On an H200: issue I's items at full size (session 51's call-2.sh, LIMIT
# s). On an H100: the LM head at d = 2048, V = 32768, 16384 and 15999
# tokens, plain and with the large loss variants (their saving kernels sum
# the log-sum-exp the new way; call E ran them only at small shapes).
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
o=$OUT/call-f; mkdir -p "$o" /tmp/b
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
if grep -q H200 "$o/gpu.txt"; then
  LIMIT=${LIMIT:-300} bash bench/results/2026-12-07-s51/call-2.sh | tail -n +3
else
  xz -dc .device/gpu.xz > /tmp/b/gpu && chmod 755 /tmp/b/gpu
  timeout 200 scripts/device-run.sh /tmp/b/gpu --only "d=2048 V=32768" > "$o/gpu-heads.log" 2>&1
  echo "gpu (large LM heads) exit $? at $(el) s: $(tail -1 "$o/gpu-heads.log")"
  grep -E "^FAIL" -A12 "$o/gpu-heads.log" | head -30
  grep -E "^(PASS|FAIL)" "$o/gpu-heads.log" | cut -c1-130
fi
echo "done at $(el) s"
