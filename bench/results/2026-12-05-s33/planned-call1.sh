#!/usr/bin/env bash
# Session 33's plan, call 1 (~350 s): session 32's call 1 (the row_lse
# large-max build, not yet run on a GPU: its checks, its A/B against the
# build before it, matmul's scheduler orders in steady state) with session
# 33's additions: gpu --quick now also runs math_activations on every pair
# of IEEE special values, and a batch of 24 random programs drawn from a
# seed never run (CODA_RANDOM_SEED=0x5e330001; compiled here, all 24).
# Carry [".device"] holding scripts/device-pack.sh's pack of this build with
#   EXTRA="coda-old=/work/tgt-old32/release/coda time_programs-old=/work/tgt-old32/release/time_programs gpu_random_s33=/tmp/s33/gpu_random_s33"
# (gpu_random_s33: `CODA_RANDOM_PROGRAMS=24 CODA_RANDOM_SEED=$((0x5e330001))
# cargo build --release -p coda-random-programs --tests`, its test binary
# copied aside before the default batch is built again; coda-old and time_programs-old: main at 67d9ec6, the kernels before the
# row_lse change) and .device/s31/shipped-lse.json.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
o=$OUT/call1; rm -rf /tmp/b /tmp/py; mkdir -p /tmp/b /tmp/py "$o"
tar xJf .device/bins.tar.xz -C /tmp/b
cp .device/coda_rs-*.whl /tmp/b/
GPU_ARGS=--quick PARTS="gpu user random" timeout 200 scripts/device-verify.sh /tmp/b "$o" > "$o/verify-check.txt" 2>&1
echo "checks at $(el) s: $(tail -1 "$o/gpu.log") / $(tail -1 "$o/user.log") / $(tail -1 "$o/random.log")"
grep -E "^FAIL|lse of|IEEE" "$o/gpu.log" | head -20
timeout 120 scripts/device-run.sh /tmp/b/gpu_random_s33 > "$o/random-s33.log" 2>&1
echo "gpu_random_s33 exit $? at $(el) s: $(tail -1 "$o/random-s33.log")"; grep -E "^FAIL" "$o/random-s33.log" | head
timeout 90 scripts/device-run.sh /tmp/b/llama-norm > "$o/llama-norm.log" 2>&1
echo "llama-norm exit $? at $(el) s"; tail -3 "$o/llama-norm.log"
for run in 1 2; do
  for w in old new; do
    sfx=""; [[ $w == old ]] && sfx=-old
    timeout 60 scripts/device-run.sh /tmp/b/time_programs$sfx --programs-only --only cross_entropy > "$o/ce-$w-$run.log" 2>&1
    timeout 60 scripts/device-run.sh /tmp/b/coda$sfx bench --part untuned --program softcap_lse > "$o/softcap-$w-$run.log" 2>&1
    echo "ab $w $run at $(el) s"
  done
done
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/py /tmp/b/coda_rs-*.whl > "$o/pip.log" 2>&1
PYTHONPATH=/tmp/py timeout 200 python3 bench/sched_orders.py 16384,57344,8192 16384,24576,8192 16384,8192,28672 16384,22016,4096 8192,8192,8192 4096,4096,4096 > "$o/sched.log" 2>&1
echo "sched exit $? at $(el) s"
tar czf "$OUT/call1.tgz" -C "$OUT" call1
for f in "$o"/ce-*.log "$o"/softcap-*.log; do echo "== $(basename "$f")"; grep -iE "cross_entropy|softcap" "$f" | tail -4; done
cat "$o/sched.log"
