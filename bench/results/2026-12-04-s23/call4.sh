#!/usr/bin/env bash
# Session 23, call 4: the final build (maps keep the deepest load pipeline
# that leaves two mainloop stages; every kernel rebuilt for the header
# change): quick set, untuned suite, random programs, the wheel's tests, and
# memcheck over the small block backward (rmsnorm_backward, the kernel the
# load-stage choice changes).
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf /tmp/b /tmp/o; mkdir -p /tmp/b /tmp/o && tar xJf .device/bins.tar.xz -C /tmp/b && cp .device/coda_rs-*.whl /tmp/b/
GPU_ARGS=--quick PARTS="gpu user random python" timeout 200 scripts/device-verify.sh /tmp/b /tmp/o > /tmp/o/verify-check.txt 2>&1
echo "checks done at $(el) s"
timeout 90 scripts/device-run.sh /usr/local/cuda/bin/compute-sanitizer --tool memcheck --print-limit 50 /tmp/b/gpu --sanitize --only "block backward d=256" > /tmp/o/memcheck-block-backward.log 2>&1
echo "memcheck exit $? at $(el) s: $(grep -c '^PASS' /tmp/o/memcheck-block-backward.log) PASS, $(grep -c '^FAIL' /tmp/o/memcheck-block-backward.log) FAIL; $(grep 'ERROR SUMMARY' /tmp/o/memcheck-block-backward.log)"
tar czf "$OUT/call4.tgz" -C /tmp/o .
cat /tmp/o/verify-check.txt
tail -n 1 /tmp/o/gpu.log /tmp/o/user.log /tmp/o/random.log; tail -n 3 /tmp/o/python.log
