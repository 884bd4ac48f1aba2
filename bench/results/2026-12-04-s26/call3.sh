#!/usr/bin/env bash
# Session 26, call 3: HeadBackwardState's own chunk buffers poisoned (NaN)
# where it allocates them, so the head tests show any read before a write;
# the Rust checks (gpu --quick, gpu_user, gpu_random), memcheck over the
# fused LM-head cases, then the plain model's seed 1 for the training
# comparison's seed spread.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf /tmp/b /tmp/o /tmp/site; mkdir -p /tmp/b /tmp/o /tmp/site && tar xJf .device/bins.tar.xz -C /tmp/b && cp .device/coda_rs-*.whl /tmp/b/
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/coda_rs-*.whl > /tmp/o/pip.log 2>&1
GPU_ARGS=--quick PARTS="gpu user random" timeout 200 scripts/device-verify.sh /tmp/b /tmp/o > /tmp/o/verify-check.txt 2>&1
echo "checks done at $(el) s"
cs=/usr/local/cuda/bin/compute-sanitizer
timeout 150 scripts/device-run.sh $cs --tool memcheck --print-limit 50 /tmp/b/gpu --sanitize --only "LM head head_forward_backward" > /tmp/o/memcheck.log 2>&1
echo "memcheck exit $? at $(el) s: $(grep -c '^PASS' /tmp/o/memcheck.log) PASS, $(grep -c '^FAIL' /tmp/o/memcheck.log) FAIL; $(grep 'ERROR SUMMARY' /tmp/o/memcheck.log | tr '\n' ' ')"
PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 TRAIN_TIMEOUT=110 bench/train/run.sh /tmp/o/train plain:default:1 > /tmp/o/train.log 2>&1
echo "train done at $(el) s"
tar czf "$OUT/call3.tgz" -C /tmp/o .
grep -h "passed, \|FAILED" /tmp/o/*.log | tail -8
tail -4 /tmp/o/verify-check.txt
grep -v "^$" /tmp/o/train.log | tail -3
