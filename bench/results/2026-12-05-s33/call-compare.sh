#!/usr/bin/env bash
# Issue H's "Done when": one bench/compare.py run of the default build
# (`coda bench` beside cuBLASLt and the PyTorch baselines, the shipped
# tuning), alone in a call (it takes 310-400 s). Carry [".device"].
set -uo pipefail
t0=$(date +%s)
o=$OUT/compare-call; rm -rf /tmp/b; mkdir -p /tmp/b "$o"
tar xJf .device/bins.tar.xz -C /tmp/b
cp .device/coda_rs-*.whl /tmp/b/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1
PARTS=compare timeout 570 scripts/device-verify.sh /tmp/b "$o" > "$o/verify-compare.txt" 2>&1
echo "compare exit $? at $(( $(date +%s) - t0 )) s"
tar czf "$OUT/compare-call.tgz" -C "$OUT" compare-call
grep "^|" "$o/compare.log" 2>/dev/null | tail -60
