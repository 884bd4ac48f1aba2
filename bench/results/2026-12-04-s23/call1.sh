#!/usr/bin/env bash
# Session 23, call 1: the epilogue's load stages chosen by coda::sm90::Gemm
# (a tile input beside C no longer costs the mainloop a stage). Checks first
# (quick set, untuned suite, random programs, the wheel's tests), then
# rmsnorm_backward beside rmsnorm_backward_head at the d = 8192 block's
# 16384 x 8192 x 57344 (searched twice each, alternating), then compare.py.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf /tmp/b /tmp/o; mkdir -p /tmp/b /tmp/o && tar xJf .device/bins.tar.xz -C /tmp/b && cp .device/coda_rs-*.whl /tmp/b/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > /tmp/o/gpu-info.txt 2>&1
GPU_ARGS=--quick PARTS="gpu user random python" timeout 170 scripts/device-verify.sh /tmp/b /tmp/o > /tmp/o/verify-check.txt 2>&1
echo "checks done at $(el) s"
for i in 1 2; do
  for p in rmsnorm_backward rmsnorm_backward_head; do
    CODA_LOG=debug CODA_TUNE_CACHE=/tmp/o/tune-$p-$i.json timeout 60 scripts/device-run.sh /tmp/b/coda tune --program llama::$p --shape 16384,8192,57344 > /tmp/o/tune-$p-$i.log 2>&1
    echo "tune $p $i exit $? at $(el) s: $(grep -h INFO /tmp/o/tune-$p-$i.log | grep -o 'K=57344: .*' | tail -1)"
  done
done
PARTS=compare timeout $(( 585 - $(el) )) scripts/device-verify.sh /tmp/b /tmp/o > /tmp/o/verify-compare.txt 2>&1
echo "compare done at $(el) s"
tar czf "$OUT/call1.tgz" -C /tmp/o .
cat /tmp/o/verify-check.txt
grep "^|" /tmp/o/compare.log | head -16
grep -E "^- M=" /tmp/o/compare.log
