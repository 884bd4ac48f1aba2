#!/usr/bin/env bash
# Session 56, call B (carry [".device"]; ≤ 560 s; after call A on the same
# card). Two generated batches never run on a GPU (seeds 0x5e560001 and
# 0x5e560002, 24 programs each, built here: .device/gpu_random_*.xz), then
# issue I's timings in one run on this card: every FP8 program beside cuBLASLt's FP8 GEMM of its mode
# and the bf16 program (`time_programs --programs-only --only fp8`), the
# QK-norm programs beside the bare qkv GEMM (`--only qk_norm`).
# Predicted: 24 of 24 each; timings as sessions 36 and 37 on an H100 (fast
# 0.97–1.02×, promoted 1.07–1.21×; QK-norm 1.16–1.87×, since session 39's
# change ~1.0–1.25× on the H200).
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { echo $(( $1 - $(el) )); }
o=$OUT/call-b; mkdir -p /tmp/b "$o"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
[[ -x /tmp/b/time_programs ]] || tar xJf .device/bins.tar.xz -C /tmp/b
for f in .device/gpu_random_*.xz; do
  name=$(basename "$f" .xz)
  xz -dc "$f" > "/tmp/b/$name" && chmod 755 "/tmp/b/$name"
  timeout 100 scripts/device-run.sh "/tmp/b/$name" > "$o/$name.log" 2>&1
  echo "$name exit $? at $(el) s: $(tail -1 "$o/$name.log")"
  grep -E "^FAIL" -A8 "$o/$name.log" | head -20
done
timeout "$(left 330)" scripts/device-run.sh /tmp/b/time_programs --programs-only --only fp8 > "$o/fp8.log" 2>&1
echo "time_programs fp8 exit $? at $(el) s"
timeout "$(left 540)" scripts/device-run.sh /tmp/b/time_programs --programs-only --only qk_norm > "$o/qk.log" 2>&1
echo "time_programs qk_norm exit $? at $(el) s"
grep -hE "ratio|fp8|qk_norm" "$o/fp8.log" "$o/qk.log" | cut -c1-150 | tail -n 40
echo "done at $(el) s"
