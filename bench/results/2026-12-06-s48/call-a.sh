#!/usr/bin/env bash
# Session 48, call A (carry [".device"]). On an H100: session 47's call C
# (the wheel's PyTorch tests, for the q_norm / k_norm refusals; ~30 s).
# On an H200: with SEARCH=1, session 47's call A (the four programs'
# searches, then compare.py with clock sampling; ~560 s); otherwise
# compare.py alone of the default build with the shipped H200 file (as a
# user's build runs it; ~330 s), with nvidia-smi sampling the SM clock and
# power every 200 ms. With H100_COMPARE=1 an H100 runs call C and then
# that compare.py too, with the shipped H100 file.
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader > /tmp/gpu.txt 2>&1; cat /tmp/gpu.txt
if grep -q H100 /tmp/gpu.txt; then
  [[ ${H100_COMPARE:-0} == 1 ]] || exec bash bench/results/2026-12-06-s47/call-c.sh
  bash bench/results/2026-12-06-s47/call-c.sh; mv "$OUT/c.tgz" "$OUT/python.tgz"
fi
[[ ${SEARCH:-0} == 1 ]] && ! grep -q H100 /tmp/gpu.txt && LIMIT=${LIMIT:-545} exec bash bench/results/2026-12-06-s47/call-a.sh
o=$OUT/c; rm -rf /tmp/b; mkdir -p /tmp/b "$o"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 200 > "$o/smi.csv" 2>&1 & smi=$!
tar xJf .device/bins.tar.xz -C /tmp/b
PARTS=compare timeout "${LIMIT:-420}" scripts/device-verify.sh /tmp/b "$o" > "$o/verify-compare.txt" 2>&1
echo "compare exit $?"
kill $smi; gzip "$o/smi.csv"
grep "^|" "$o/compare.log" | tail -50; grep -E "median|^- " "$o/compare.log" | tail -16
tar czf "$OUT/c.tgz" -C "$OUT" c && rm -rf "$o"
