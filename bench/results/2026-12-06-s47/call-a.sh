#!/usr/bin/env bash
# Session 47, call A (carry [".device"], timeout 570). On an H200: issue
# H's step that has not run since session 43 — session 46's call C with
# COMPARE=1 (the four programs' searches, then compare.py of this build
# with that search in front of the shipped file), with nvidia-smi
# sampling the SM clock and power every 200 ms throughout. On an H100:
# session 46's call D (the SM clock under sustained launches of the plain
# GEMM and two fused kernels, ≤ 200 s), unless H100_EXIT is set.
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader > /tmp/gpu.txt 2>&1; cat /tmp/gpu.txt
if grep -q H100 /tmp/gpu.txt; then
  [[ -n ${H100_EXIT:-} ]] && { echo "an H100: nothing to do"; exit 0; }
  exec bash bench/results/2026-12-06-s46/call-d.sh
fi
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 200 > "$OUT/smi.csv" 2>&1 & smi=$!
COMPARE=1 LIMIT=${LIMIT:-555} bash bench/results/2026-12-06-s46/call-c.sh
kill $smi; gzip "$OUT/smi.csv"; ls -la "$OUT"
