#!/usr/bin/env bash
# Session 18, call 1: correctness of the new build, then the training rows.
set -uo pipefail
t0=$(date +%s)
mkdir -p /tmp/b /tmp/o && tar xJf .device/bins.tar.xz -C /tmp/b && cp .device/coda_rs-*.whl /tmp/b/
el() { echo $(( $(date +%s) - t0 )); }
GPU_ARGS=--quick PARTS="gpu user python random" timeout 300 scripts/device-verify.sh /tmp/b /tmp/o
echo "checks done at $(el) s"
site=$(mktemp -d); python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" /tmp/b/coda_rs-*.whl
left=$(( 575 - $(el) ))
PYTHONPATH="$site" PYTHONUNBUFFERED=1 TRAIN_TIMEOUT=90 timeout $left bench/train/run.sh /tmp/o/train plain:default:0 coda:default:0 > /tmp/o/train-default.log 2>&1
echo "default rows done at $(el) s"
left=$(( 580 - $(el) ))
PYTHONPATH="$site" PYTHONUNBUFFERED=1 TRAIN_TIMEOUT=$(( left - 5 )) timeout $left bench/train/run.sh /tmp/o/train coda:max-autotune:0 > /tmp/o/train-mat.log 2>&1
echo "max-autotune done at $(el) s"
tar czf "$OUT/call1.tgz" -C /tmp/o .
for f in /tmp/o/gpu.log /tmp/o/user.log /tmp/o/python.log /tmp/o/random.log; do echo "== $f"; tail -n 2 "$f"; done
grep -h "FAIL\|Error" /tmp/o/python.log | head -5
cat /tmp/o/train-default.log /tmp/o/train-mat.log | grep -v "^$" | tail -8
