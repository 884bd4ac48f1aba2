#!/usr/bin/env bash
# Session 27, call 4: every weight's gradient at the training run's shape,
# CODA and plain bf16 against plain f64 (bench/train/grad_check.py), at the
# initial weights and after 60 steps of the plain model (lr at its peak).
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf /tmp/o /tmp/site; mkdir -p /tmp/o /tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/coda_rs-*.whl > /tmp/o/pip.log 2>&1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
timeout 100 python3 bench/train/grad_check.py > /tmp/o/grad-init.txt 2>&1
echo "init exit $? at $(el) s"; tar czf "$OUT/call4.tgz" -C /tmp/o .
timeout 60 python3 bench/train/train.py --model plain --steps 60 --out /tmp/o/plain-60.json --save /tmp/w60.pt > /tmp/o/plain-60.log 2>&1
echo "60 steps exit $? at $(el) s"
timeout 100 python3 bench/train/grad_check.py --weights /tmp/w60.pt --step 60 > /tmp/o/grad-60.txt 2>&1
echo "step 60 exit $? at $(el) s"; tar czf "$OUT/call4.tgz" -C /tmp/o .
cat /tmp/o/grad-init.txt | tail -3; cat /tmp/o/grad-60.txt
