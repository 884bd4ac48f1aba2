#!/usr/bin/env bash
# Session 20, call 1: the accumulator fence (coda::sm90::AccFetch) built into
# every kernel. compare.py first (the default build's untuned suite and Llama
# ops beside cuBLASLt and PyTorch), then the quick correctness set, the random programs and the
# untuned suite's checks on the same binaries.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
mkdir -p /tmp/b /tmp/o && tar xJf .device/bins.tar.xz -C /tmp/b
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > /tmp/o/gpu-info.txt 2>&1
PARTS=compare timeout 400 scripts/device-verify.sh /tmp/b /tmp/o > /tmp/o/verify-compare.txt 2>&1
echo "compare done at $(el) s"
GPU_ARGS=--quick PARTS="gpu user random" timeout $(( 580 - $(el) )) scripts/device-verify.sh /tmp/b /tmp/o > /tmp/o/verify-check.txt 2>&1
echo "checks done at $(el) s"
tar czf "$OUT/call1.tgz" -C /tmp/o .
cat /tmp/o/verify-check.txt
grep "^|" /tmp/o/compare.log | tail -42
grep -E "^- M=" /tmp/o/compare/table.md /tmp/o/compare.log 2>/dev/null | head -4
