#!/usr/bin/env bash
# Session 36's planned call J (~200 s; not run: the budget was spent): the
# review's follow-ups on the H200 — `gpu --only scale_into` (views
# misaligned on one side), the wheel's head tests (`head_scale_grads`
# refusing a short `dw_out` before writing `dx_out`), and the FP8 rows
# again with the config each ran (`time_programs --only fp8`). Carry [".device"].
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
o=$OUT/call-j; rm -rf /tmp/b /tmp/py; mkdir -p /tmp/b /tmp/py "$o"
tar xJf .device/bins.tar.xz -C /tmp/b
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1
timeout 60 scripts/device-run.sh /tmp/b/gpu --only scale_into > "$o/gpu.log" 2>&1
echo "gpu scale_into exit $? at $(el) s: $(tail -1 "$o/gpu.log")"; grep -E "FAIL|differ" "$o/gpu.log" | grep -v " 0 of " | head
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/py .device/coda_rs-*.whl > "$o/pip.log" 2>&1
(cd coda-python/tests && PYTHONPATH=/tmp/py timeout 100 python3 -m unittest -v test_head) > "$o/python-head.log" 2>&1
echo "python head exit $? at $(el) s"; grep -E "FAIL|ERROR|Ran|^OK" "$o/python-head.log" | tail -5
timeout $((585 - $(el))) scripts/device-run.sh /tmp/b/time_programs --programs-only --only fp8 > "$o/fp8.log" 2>&1
echo "fp8 exit $? at $(el) s"; grep -A12 "FP8 program" "$o/fp8.log"
tar czf "$OUT/call-j.tgz" -C "$OUT" call-j
