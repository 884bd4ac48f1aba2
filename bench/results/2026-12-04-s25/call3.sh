#!/usr/bin/env bash
# Session 25, call 3: compare.py on this session's build (the README's
# tables: the untuned suite and the Llama ops and blocks beside the PyTorch
# baselines), then the Llama table (`coda bench --part llama`) with session
# 24's binary, for the rows whose kernels changed (the blocks' backward:
# linear_dswiglu).
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf /tmp/b /tmp/o; mkdir -p /tmp/b /tmp/o && tar xJf .device/bins.tar.xz -C /tmp/b && cp .device/coda_rs-*.whl /tmp/b/
xz -dc .device/coda_s24.xz > /tmp/b/coda_old && chmod +x /tmp/b/coda_old
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > /tmp/o/gpu-info.txt 2>&1
PARTS=compare timeout 460 scripts/device-verify.sh /tmp/b /tmp/o > /tmp/o/verify-compare.txt 2>&1
echo "compare exit $? at $(el) s"
timeout $(( 588 - $(el) )) scripts/device-run.sh /tmp/b/coda_old bench --part llama --json /tmp/o/llama-coda_old.json > /tmp/o/llama-coda_old.log 2>&1
echo "llama coda_old exit $? at $(el) s"
tar czf "$OUT/call3.tgz" -C /tmp/o .
grep "^|" /tmp/o/compare.log | head -24
grep -E "^- M=" /tmp/o/compare.log
