#!/usr/bin/env bash
# Session 27, call 3: the wheel built optimised (maturin --release). Its GPU
# tests; the default-mode pair with it and the CODA model with session 26's
# unoptimised wheel beside; the loss over three seeds of each model in eager
# mode (plain and CODA alternated).
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf /tmp/o /tmp/b /tmp/site /tmp/site_dbg; mkdir -p /tmp/o /tmp/b /tmp/site /tmp/site_dbg
cp .device/coda_rs-*.whl /tmp/b/
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/coda_rs-*.whl > /tmp/o/pip.log 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site_dbg .device/old/dbg/coda_rs-*.whl >> /tmp/o/pip.log 2>&1
PARTS=python timeout 150 scripts/device-verify.sh /tmp/b /tmp/o > /tmp/o/verify-check.txt 2>&1
echo "wheel tests done at $(el) s: $(grep -h '^Ran \|^OK\|^FAILED' /tmp/o/python.log | tr '\n' ' ')"
export PYTHONUNBUFFERED=1
PYTHONPATH=/tmp/site TRAIN_TIMEOUT=110 bench/train/run.sh /tmp/o/train plain:default:0 coda:default:0 > /tmp/o/train.log 2>&1
PYTHONPATH=/tmp/site_dbg TRAIN_TIMEOUT=110 bench/train/run.sh /tmp/o/train-dbg coda:default:0 > /tmp/o/train-dbg.log 2>&1
echo "compiled runs done at $(el) s"; tar czf "$OUT/call3.tgz" -C /tmp/o .
PYTHONPATH=/tmp/site TRAIN_TIMEOUT=60 bench/train/run.sh /tmp/o/seeds plain:none:0 coda:none:0 plain:none:1 coda:none:1 plain:none:2 coda:none:2 > /tmp/o/seeds.log 2>&1
echo "seeds done at $(el) s"; tar czf "$OUT/call3.tgz" -C /tmp/o .
grep -v "^$" /tmp/o/train.log | tail -3
grep -v "^$" /tmp/o/train-dbg.log | tail -1
grep -v "^$" /tmp/o/seeds.log | tail -9
