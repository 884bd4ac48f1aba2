#!/usr/bin/env bash
# Session 28, call 4 (issue G's open loss question): four more seeds (3-6)
# of each model in eager mode, plain and CODA alternated, 300 steps each;
# then the plain run's weights after step 47 of seed 0 (a run stopped
# there) and grad_check.py at them on step 48's batch, where the runs'
# losses spike.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf /tmp/o /tmp/site; mkdir -p /tmp/o /tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/coda_rs-*.whl > /tmp/o/pip.log 2>&1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
TRAIN_TIMEOUT=60 bench/train/run.sh /tmp/o/seeds plain:none:3 coda:none:3 plain:none:4 coda:none:4 plain:none:5 coda:none:5 plain:none:6 coda:none:6 > /tmp/o/seeds.log 2>&1
echo "seeds done at $(el) s"; tar czf "$OUT/call4.tgz" -C /tmp/o .
timeout 60 python3 bench/train/train.py --model plain --seed 0 --steps 300 --save /tmp/w47.pt --save-step 47 --out /tmp/o/save47.json > /tmp/o/save47.log 2>&1
echo "save exit $? at $(el) s"
timeout 90 python3 bench/train/grad_check.py --weights /tmp/w47.pt --step 48 > /tmp/o/grad-check-47.txt 2>&1
echo "grad_check exit $? at $(el) s"
tar czf "$OUT/call4.tgz" -C /tmp/o .
grep -v "^$" /tmp/o/seeds.log | tail -12
tail -8 /tmp/o/grad-check-47.txt
