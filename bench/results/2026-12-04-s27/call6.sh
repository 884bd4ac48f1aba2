#!/usr/bin/env bash
# Session 27, call 6: whose are the CODA model's higher early loss spikes,
# the blocks' or the LM-head tail's? Each model with the other's tail
# (train.py --model coda-plain-tail / plain-coda-tail), three seeds each,
# eager, alternated; the wheel's tests first (model.py's `tail`).
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf /tmp/o /tmp/b /tmp/site; mkdir -p /tmp/o /tmp/b /tmp/site
cp .device/coda_rs-*.whl /tmp/b/
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/coda_rs-*.whl > /tmp/o/pip.log 2>&1
PARTS=python timeout 100 scripts/device-verify.sh /tmp/b /tmp/o > /tmp/o/verify-check.txt 2>&1
echo "wheel tests done at $(el) s: $(grep -h '^Ran \|^OK\|^FAILED' /tmp/o/python.log | tr '\n' ' ')"
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
TRAIN_TIMEOUT=60 bench/train/run.sh /tmp/o/tails coda-plain-tail:none:0 plain-coda-tail:none:0 coda-plain-tail:none:1 plain-coda-tail:none:1 coda-plain-tail:none:2 plain-coda-tail:none:2 > /tmp/o/tails.log 2>&1
echo "tails done at $(el) s"; tar czf "$OUT/call6.tgz" -C /tmp/o .
grep -v "^$" /tmp/o/tails.log | tail -9
