#!/usr/bin/env bash
# Session 26, call 1: the training comparison's default-mode rows with
# session 25's wheel (bf16 weight gradients, staged pairs), each run's
# kernel table after it (PROFILE=1), then bench/block_profile.py at the
# training run's block shape (8192 tokens, d = 2048, ffn 8192), twice.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf /tmp/o /tmp/site; mkdir -p /tmp/o /tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/coda_rs-*.whl > /tmp/o/pip.log 2>&1
PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 PROFILE=1 TRAIN_TIMEOUT=110 bench/train/run.sh /tmp/o/train plain:default:0 coda:default:0 > /tmp/o/train-default.log 2>&1
echo "train done at $(el) s"
for run in 1 2; do
  PYTHONPATH=/tmp/site timeout 60 python3 bench/block_profile.py --d 2048 --ffn 8192 --tokens 8192 > /tmp/o/block-profile-train-$run.txt 2>&1
  echo "block profile $run exit $? at $(el) s: $(grep -m1 'GPU time' /tmp/o/block-profile-train-$run.txt)"
done
tar czf "$OUT/call1.tgz" -C /tmp/o .
grep -v "^$" /tmp/o/train-default.log | tail -5
