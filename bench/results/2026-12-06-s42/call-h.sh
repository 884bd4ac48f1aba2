#!/usr/bin/env bash
# Session 42, call H (≤ 150 s; carry [".device"]): the final build (the
# scheduler's down_proj branch only for configs without a cluster along N;
# the head's launch counts per loss, counted on the stream for label
# smoothing with and without the cap; `row_sum` poisoned with the state).
# `gpu --quick`, the wheel's `test_head`, the variants at d = 2048.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { local l=$(( $1 - $(el) )); echo $(( l > 1 ? l : 1 )); }
o=$OUT/call-h; rm -rf /tmp/b /tmp/py; mkdir -p /tmp/b /tmp/py "$o"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
tar xJf .device/bins.tar.xz -C /tmp/b
timeout 110 scripts/device-run.sh /tmp/b/gpu --quick > "$o/gpu.log" 2>&1
echo "gpu --quick exit $? at $(el) s: $(tail -1 "$o/gpu.log")"; grep -E "^FAIL" -A8 "$o/gpu.log" | head -24
grep -A12 "launches per op" "$o/gpu.log" | head -14
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/py .device/coda_rs-*.whl > "$o/pip.log" 2>&1
(cd coda-python/tests && PYTHONPATH=/tmp/py timeout 60 python3 -m unittest test_head) > "$o/python.log" 2>&1
echo "test_head exit $? at $(el) s"; grep -E "FAIL|ERROR|^Ran|^OK" "$o/python.log" | tail -3
PYTHONPATH=/tmp/py timeout "$(left 145)" python3 bench/head_variants.py --hidden 2048 > "$o/variants-2048.log" 2>&1
echo "== d=2048 exit $? at $(el) s"; tail -6 "$o/variants-2048.log"
tar czf "$OUT/call-h.tgz" -C "$OUT" call-h
echo "done at $(el) s"
