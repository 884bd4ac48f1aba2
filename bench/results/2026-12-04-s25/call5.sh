#!/usr/bin/env bash
# Session 25, call 5: where the block's forward + backward spends its GPU
# time beside its twelve bare GEMMs (bench/block_profile.py, the wheel of
# this build under torch.profiler) at d = 8192 and d = 2048, 16384 tokens.
set -uo pipefail
rm -rf /tmp/o /tmp/site; mkdir -p /tmp/o /tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/coda_rs-*.whl > /tmp/o/pip.log 2>&1
for size in "8192 28672" "2048 8192"; do
  set -- $size
  PYTHONPATH=/tmp/site timeout 200 python3 bench/block_profile.py --d $1 --ffn $2 > /tmp/o/block-profile-d$1.txt 2>&1
  echo "d=$1 exit $?"
done
tar czf "$OUT/call5.tgz" -C /tmp/o .
cat /tmp/o/block-profile-d8192.txt | head -60
