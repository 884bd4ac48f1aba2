#!/usr/bin/env bash
# Session 20, call 3: the Llama ops and blocks again (coda bench --part llama,
# the same binary as call 1), a second sample of the d = 8192 block rows whose
# ratio moved in call 1 while the fused kernels' searches (call 2) did not.
set -uo pipefail
mkdir -p /tmp/b /tmp/o && tar xJf .device/bins.tar.xz -C /tmp/b
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > /tmp/o/gpu-info.txt 2>&1
timeout 560 scripts/device-run.sh /tmp/b/coda bench --part llama --json /tmp/o/coda-llama.json > /tmp/o/bench-llama.log 2>&1
echo "bench exit $?"
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv >> /tmp/o/gpu-info.txt 2>&1
tar czf "$OUT/call3.tgz" -C /tmp/o .
grep -v "cuBLASLt$" /tmp/o/bench-llama.log | tail -n 30
