#!/usr/bin/env bash
# Session 34, call B (310-400 s): issue H's "Done when", one bench/compare.py
# run of the default build (`coda bench` beside cuBLASLt and the PyTorch
# baselines, the shipped tuning). Carry [".device"].
set -uo pipefail
t0=$(date +%s)
o=$OUT/call-b; rm -rf /tmp/b; mkdir -p /tmp/b "$o"
tar xJf .device/bins.tar.xz -C /tmp/b
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1
PARTS=compare timeout 570 scripts/device-verify.sh /tmp/b "$o" > "$o/verify-compare.txt" 2>&1
echo "compare exit $? at $(( $(date +%s) - t0 )) s"
tar czf "$OUT/call-b.tgz" -C "$OUT" call-b
grep "^|" "$o/compare.log" 2>/dev/null | tail -60
