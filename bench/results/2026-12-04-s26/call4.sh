#!/usr/bin/env bash
# Session 26, call 4: sin and cos of one angle computed once (math.hpp's
# sin_cos: the reduction and polynomials before the far branch; every
# kernel rebuilt). Checks (gpu --quick, gpu_user, gpu_random, the wheel),
# then the RoPE programs against cuBLASLt with the build before the change
# and after it, alternated twice (time_programs --quick --only rope), the
# training shape's block profile with both wheels alternated, and the
# training comparison's default-mode pair with the new wheel.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf /tmp/b /tmp/bo /tmp/o /tmp/site /tmp/site_old; mkdir -p /tmp/b /tmp/bo /tmp/o /tmp/site /tmp/site_old
tar xJf .device/bins.tar.xz -C /tmp/b && tar xJf .device/old/bins-s25.tar.xz -C /tmp/bo && cp .device/coda_rs-*.whl /tmp/b/
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/coda_rs-*.whl > /tmp/o/pip.log 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site_old .device/old/coda_rs-*.whl >> /tmp/o/pip.log 2>&1
GPU_ARGS=--quick PARTS="gpu user random python" timeout 240 scripts/device-verify.sh /tmp/b /tmp/o > /tmp/o/verify-check.txt 2>&1
echo "checks done at $(el) s"
for run in 1 2; do
  for w in old new; do
    bin=/tmp/b; [[ $w == old ]] && bin=/tmp/bo
    timeout 120 scripts/device-run.sh $bin/time_programs --quick --programs-only --only rope > /tmp/o/rope-$w-$run.txt 2>&1
    echo "time_programs rope $w $run exit $? at $(el) s"
  done
done
for run in 1 2; do
  for w in old new; do
    site=/tmp/site; [[ $w == old ]] && site=/tmp/site_old
    PYTHONPATH=$site timeout 60 python3 bench/block_profile.py --d 2048 --ffn 8192 --tokens 8192 > /tmp/o/block-profile-train-$w-$run.txt 2>&1
    echo "block profile $w $run exit $? at $(el) s: $(grep -m1 'GPU time' /tmp/o/block-profile-train-$w-$run.txt)"
  done
done
PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 TRAIN_TIMEOUT=110 bench/train/run.sh /tmp/o/train plain:default:0 coda:default:0 > /tmp/o/train.log 2>&1
echo "train done at $(el) s"
tar czf "$OUT/call4.tgz" -C /tmp/o .
grep -h "passed, \|^Ran \|^OK\|FAILED" /tmp/o/gpu.log /tmp/o/user.log /tmp/o/random.log /tmp/o/python.log 2>/dev/null | tail -8
tail -5 /tmp/o/verify-check.txt
paste <(grep rope /tmp/o/rope-old-2.txt | awk '{print $1, $2, $3, $4, $NF}') <(grep rope /tmp/o/rope-new-2.txt | awk '{print $4, $NF}')
grep -h "rope" /tmp/o/block-profile-train-*-2.txt | grep "ms " | head -8
grep -v "^$" /tmp/o/train.log | tail -3
