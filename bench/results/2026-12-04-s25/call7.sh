#!/usr/bin/env bash
# Session 25, call 7: the block op's weight matrices' gradients written in
# bf16 by the GEMMs (coda_llama::WeightGrad). Checks (gpu --quick with the
# new bf16-weight-gradient backward case; the wheel's tests), then
# bench/block_profile.py at d = 8192 and 2048 with the wheel before the
# change and after it, alternated.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf /tmp/b /tmp/o /tmp/site /tmp/site_old; mkdir -p /tmp/b /tmp/o /tmp/site /tmp/site_old && tar xJf .device/bins.tar.xz -C /tmp/b && cp .device/coda_rs-*.whl /tmp/b/
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site_old .device/old/coda_rs-*.whl > /tmp/o/pip-old.log 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/coda_rs-*.whl > /tmp/o/pip-new.log 2>&1
GPU_ARGS=--quick PARTS="gpu python" timeout 200 scripts/device-verify.sh /tmp/b /tmp/o > /tmp/o/verify-check.txt 2>&1
echo "checks done at $(el) s"
for size in "8192 28672" "2048 8192"; do
  set -- $size
  for run in 1 2; do
    for w in old new; do
      site=/tmp/site; [[ $w == old ]] && site=/tmp/site_old
      PYTHONPATH=$site timeout 100 python3 bench/block_profile.py --d $1 --ffn $2 > /tmp/o/block-profile-d$1-$w-$run.txt 2>&1
      echo "d=$1 $w $run exit $? at $(el) s: $(grep -m1 'GPU time' /tmp/o/block-profile-d$1-$w-$run.txt)"
    done
  done
done
tar czf "$OUT/call7.tgz" -C /tmp/o .
grep -h "passed, \|^Ran \|^OK\|FAILED\|bf16 weight" /tmp/o/gpu.log /tmp/o/python.log | tail -6
cat /tmp/o/verify-check.txt
