#!/usr/bin/env bash
# Session 22, call 1: the per-row state nodes (rowstate.hpp) without
# per-element bounds tests, in every kernel of the build. The quick
# correctness set (its LM-head, loss-variant and row_lse edge cases), the
# untuned suite's checks and the random programs first, then compare.py (the
# default build's untuned suite and Llama ops beside cuBLASLt and PyTorch).
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
mkdir -p /tmp/b /tmp/o && tar xJf .device/bins.tar.xz -C /tmp/b
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > /tmp/o/gpu-info.txt 2>&1
GPU_ARGS=--quick PARTS="gpu user random" timeout 150 scripts/device-verify.sh /tmp/b /tmp/o > /tmp/o/verify-check.txt 2>&1
echo "checks done at $(el) s"
PARTS=compare timeout $(( 585 - $(el) )) scripts/device-verify.sh /tmp/b /tmp/o > /tmp/o/verify-compare.txt 2>&1
echo "compare done at $(el) s"
tar czf "$OUT/call1.tgz" -C /tmp/o .
cat /tmp/o/verify-check.txt
grep "^|" /tmp/o/compare.log | tail -42
