#!/usr/bin/env bash
# Session 34, call C (~300 s): the rest of session 33's call 1 — the main
# job, the row_lse builds old and new alternated twice (time_programs'
# LM-head programs, softcap_lse), matmul's scheduler orders in steady state
# (bench/sched_orders.py) at six shapes. Carry [".device"].
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
o=$OUT/call-c; rm -rf /tmp/b /tmp/py; mkdir -p /tmp/b /tmp/py "$o"
tar xJf .device/bins.tar.xz -C /tmp/b
cp .device/coda_rs-*.whl /tmp/b/
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
PYTHONPATH=/tmp/py timeout $((585 - $(el))) python3 bench/sched_orders.py 16384,57344,8192 16384,24576,8192 16384,8192,28672 16384,22016,4096 8192,8192,8192 4096,4096,4096 > "$o/sched.log" 2>&1
echo "sched exit $? at $(el) s"
tar czf "$OUT/call-c.tgz" -C "$OUT" call-c
for f in "$o"/ce-*.log "$o"/softcap-*.log; do echo "== $(basename "$f")"; grep -iE "cross_entropy|softcap" "$f" | tail -4; done
cat "$o/sched.log"
