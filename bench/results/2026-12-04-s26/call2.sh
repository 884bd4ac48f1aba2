#!/usr/bin/env bash
# Session 26, call 2: the LM-head op's chunk-sized buffers from PyTorch's
# allocator (HeadBackwardState::from_parts) and its kept gradients scaled
# in one pass each. Checks (gpu --quick with the new refusals; the wheel's
# tests), then the training comparison's default-mode rows alternated
# twice (plain, CODA, plain, CODA), the first pair with kernel tables.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf /tmp/b /tmp/o /tmp/site; mkdir -p /tmp/b /tmp/o /tmp/site && tar xJf .device/bins.tar.xz -C /tmp/b && cp .device/coda_rs-*.whl /tmp/b/
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/coda_rs-*.whl > /tmp/o/pip.log 2>&1
GPU_ARGS=--quick PARTS="gpu python" timeout 240 scripts/device-verify.sh /tmp/b /tmp/o > /tmp/o/verify-check.txt 2>&1
echo "checks done at $(el) s"
PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 PROFILE=1 TRAIN_TIMEOUT=110 bench/train/run.sh /tmp/o/train plain:default:0 coda:default:0 > /tmp/o/train-1.log 2>&1
echo "train pair 1 done at $(el) s"
PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 TRAIN_TIMEOUT=110 bench/train/run.sh /tmp/o/train2 plain:default:0 coda:default:0 > /tmp/o/train-2.log 2>&1
echo "train pair 2 done at $(el) s"
tar czf "$OUT/call2.tgz" -C /tmp/o .
grep -h "passed, \|^Ran \|^OK\|FAILED\|from_parts" /tmp/o/gpu.log /tmp/o/python.log | tail -8
cat /tmp/o/verify-check.txt | tail -5
grep -v "^$" /tmp/o/train-1.log | tail -3; grep -v "^$" /tmp/o/train-2.log | tail -3
