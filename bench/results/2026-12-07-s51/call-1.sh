#!/usr/bin/env bash
# Session 51, first call (≤ 580 s). Main's kernels (1698eed, .device/bins.tar.xz;
# later commits change no kernel) with session 50's `gpu` binary (.device/gpu.xz).
# On an H200: PART=a of session 50's gpu-full.sh (issue I's items at full size:
# FP8, group reductions, loss variants; ~300 s on an H100), then the generated
# batches. On an H100 (whose PART=a passed 153/153 in session 50): the
# generated batches alone, never run on a GPU: 24 programs of seed 0x5e500002
# and 12 map programs of seed 0x5e500003. Carry [".device"].
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
mkdir -p "$OUT/batches"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$OUT/batches/gpu.txt" 2>&1
cat "$OUT/batches/gpu.txt"
if grep -q H200 "$OUT/batches/gpu.txt"; then
  PART=a LIMIT=${LIMIT:-420} bash bench/results/2026-12-06-s50/gpu-full.sh
fi
mkdir -p /tmp/r
for f in .device/gpu_random_*.xz; do
  name=$(basename "$f" .xz)
  xz -dc "$f" > "/tmp/r/$name" && chmod 755 "/tmp/r/$name"
  timeout 90 scripts/device-run.sh "/tmp/r/$name" > "$OUT/batches/$name.log" 2>&1
  echo "$name exit $? at $(el) s: $(tail -1 "$OUT/batches/$name.log")"
  grep -E "^FAIL" -A8 "$OUT/batches/$name.log" | head -20
done
echo "done at $(el) s"
