#!/usr/bin/env bash
# Session 43, call B (carry [".device"]; ≤ 595 s): on an H200 call A's runs
# first (gpu --quick, test_head, the loss variants, compare.py), then the
# stream-K experiment if 90 s are left; on an H100 the experiment alone.
# The experiment (streamk.cu, built here into .device/exp/streamk; ~60 s).
# Prediction (both cards have 132 SMs): where the persistent grid leaves a
# partial last wave (8192³ with 128 × 128 tiles: 4096 tiles, 31.03 waves;
# 4096 × 4096 × 32768 with 128 × 256: 512 tiles, 3.88 waves) the heuristic
# stream-K cooperative kernel runs 1–3% under its persistent twin; its
# data-parallel mode within 1% of the persistent one.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
o=$OUT/call-b; mkdir -p "$o"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
if ! grep -q H100 "$o/gpu.txt"; then
  bash bench/results/2026-12-06-s43/call-a.sh
fi
if (( $(el) < 500 )); then
  timeout $(( 590 - $(el) )) .device/exp/streamk 30 > "$o/streamk.log" 2>&1
  echo "streamk exit $? at $(el) s"; cat "$o/streamk.log"
fi
tar czf "$OUT/call-b.tgz" -C "$OUT" call-b
echo "done at $(el) s"
