#!/usr/bin/env bash
# Session 32's plan, call 1 (~330 s): the row_lse large-max build (every
# kernel rebuilt; not yet run on a GPU). Carry [".device"] holding
# scripts/device-pack.sh's pack of this build with
#   EXTRA="coda-old=/work/tgt-old32/release/coda time_programs-old=/work/tgt-old32/release/time_programs"
# (main at 67d9ec6, the kernels before the change) and .device/s31/shipped-lse.json.
# (1) The checks: gpu --quick (the lse edge case's five new rows, and the
# row near -1000's assertion, not yet run), gpu_user, gpu_random; the main
# job. (2) What the change costs: the LM-head programs in time_programs and
# softcap_lse in coda bench, old and new builds alternated twice (ratios to
# cuBLASLt of the same run). (3) matmul's scheduler orders in steady state,
# both configs of the default set (session 31's planned call 3, part 2).
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
o=$OUT/call1; rm -rf /tmp/b /tmp/py; mkdir -p /tmp/b /tmp/py "$o"
tar xJf .device/bins.tar.xz -C /tmp/b
cp .device/coda_rs-*.whl /tmp/b/
GPU_ARGS=--quick PARTS="gpu user random" timeout 200 scripts/device-verify.sh /tmp/b "$o" > "$o/verify-check.txt" 2>&1
echo "checks at $(el) s: $(tail -1 "$o/gpu.log") / $(tail -1 "$o/user.log") / $(tail -1 "$o/random.log")"
grep -E "^FAIL|lse of" "$o/gpu.log" | head -20
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
