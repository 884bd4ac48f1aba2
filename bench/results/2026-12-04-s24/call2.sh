#!/usr/bin/env bash
# Session 24, call 2: compare.py on this session's build (the default build's
# untuned suite and the Llama ops beside cuBLASLt and PyTorch), then the
# Llama table (`coda bench --part llama`) with session 23's binary and this
# session's once more, for the rows whose kernels changed (SwiGLU forward
# and backward, the blocks).
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf /tmp/b /tmp/o; mkdir -p /tmp/b /tmp/o && tar xJf .device/bins.tar.xz -C /tmp/b && cp .device/coda_rs-*.whl /tmp/b/
xz -dc .device/coda_old.xz > /tmp/b/coda_old && chmod +x /tmp/b/coda_old
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > /tmp/o/gpu-info.txt 2>&1
PARTS=compare timeout 360 scripts/device-verify.sh /tmp/b /tmp/o > /tmp/o/verify-compare.txt 2>&1
echo "compare done at $(el) s"
for bin in coda_old coda; do
  timeout $(( (585 - $(el)) / 2 )) scripts/device-run.sh /tmp/b/$bin bench --part llama --json /tmp/o/llama-$bin.json > /tmp/o/llama-$bin.log 2>&1
  echo "llama $bin exit $? at $(el) s"
done
tar czf "$OUT/call2.tgz" -C /tmp/o .
grep "^|" /tmp/o/compare.log | head -16
grep -E "^- M=" /tmp/o/compare.log
for bin in coda_old coda; do echo "== $bin"; grep -E "^\|" /tmp/o/llama-$bin.log | cut -c1-160 | head -20; done
