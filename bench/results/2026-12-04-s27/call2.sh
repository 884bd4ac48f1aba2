#!/usr/bin/env bash
# Session 27, call 2: why the CODA model's eager runs did not finish in 60 s
# (call 1): 40 steps of each model in eager mode; after 35 s Python's
# faulthandler prints every thread's stack and exits.
set -uo pipefail
rm -rf /tmp/o /tmp/site /tmp/dbg; mkdir -p /tmp/o /tmp/site /tmp/dbg
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/coda_rs-*.whl > /tmp/o/pip.log 2>&1
echo 'import faulthandler, sys; faulthandler.dump_traceback_later(35, exit=True, file=sys.stderr)' > /tmp/dbg/sitecustomize.py
export PYTHONPATH=/tmp/dbg:/tmp/site PYTHONUNBUFFERED=1
for m in coda plain; do
  s=$(date +%s.%N)
  timeout 50 python3 bench/train/train.py --model $m --compile none --steps 40 --warmup 5 --out /tmp/o/$m.json > /tmp/o/$m.log 2>&1
  echo "$m exit $? in $(python3 -c "import time; print(round(time.time() - $s, 1))") s"
  tail -40 /tmp/o/$m.log
done
nvidia-smi > /tmp/o/smi.txt 2>&1
tar czf "$OUT/call2.tgz" -C /tmp/o .
