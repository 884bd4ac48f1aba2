#!/usr/bin/env bash
# Session 48, call C (carry [".device"], ≤ 300 s): what is left of the
# budget after call A never found a machine. On an H100: session 47's
# call C (the wheel's PyTorch tests, for the q_norm / k_norm refusals).
# On an H200: `coda bench --part untuned` of the default build (issue H's
# suite at 4096³ and 8192³ against cuBLASLt, no PyTorch side).
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader > /tmp/gpu.txt 2>&1; cat /tmp/gpu.txt
grep -q H100 /tmp/gpu.txt && exec bash bench/results/2026-12-06-s47/call-c.sh
o=$OUT/c; rm -rf /tmp/b; mkdir -p /tmp/b "$o"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1
tar xJf .device/bins.tar.xz -C /tmp/b
timeout "${LIMIT:-240}" scripts/device-run.sh /tmp/b/coda bench --part untuned --json "$o/coda.json" > "$o/bench.log" 2>&1
echo "bench exit $?"; grep -v "cuBLASLt$" "$o/bench.log" | tail -40
tar czf "$OUT/c.tgz" -C "$OUT" c
