#!/usr/bin/env bash
# Session 43, call G (carry [".device"]; ≤ 200 s; the budget's last ~470 s).
# Only on an H200 (on an H100 it stops at once; calls A and D ran this there):
# this build's `gpu --quick` (the new kernels, label smoothing's column
# sums, never run on an H200), the wheel's `test_head` (the loss variants
# against PyTorch's formulas), and the loss variants against the plain tail
# at d = 2048 and 4096. Predictions (H200): 183 of 183 and 11 of 11; label
# smoothing ≤ 1.01× (its kernels are the plain ones plus ~0.1 ms),
# soft-capping as session 30's 1.028×, z-loss ≤ 1.01×.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
o=$OUT/call-g; rm -rf /tmp/b /tmp/py; mkdir -p /tmp/b /tmp/py "$o"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
grep -q H100 "$o/gpu.txt" && { echo "an H100: nothing to run"; exit 0; }
tar xJf .device/bins.tar.xz -C /tmp/b
timeout 100 scripts/device-run.sh /tmp/b/gpu --quick > "$o/gpu.log" 2>&1
echo "gpu --quick exit $? at $(el) s: $(tail -1 "$o/gpu.log")"; grep -E "^FAIL" -A8 "$o/gpu.log" | head -24
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/py .device/coda_rs-*.whl > "$o/pip.log" 2>&1
(cd coda-python/tests && PYTHONPATH=/tmp/py timeout 50 python3 -m unittest test_head) > "$o/python-head.log" 2>&1
echo "test_head exit $? at $(el) s"; grep -E "FAIL|ERROR|^Ran|^OK" "$o/python-head.log" | tail -3
for h in 2048 4096; do
  PYTHONPATH=/tmp/py timeout 30 python3 bench/head_variants.py --hidden $h > "$o/variants-$h.log" 2>&1
  echo "== variants d=$h exit $? at $(el) s"; tail -n 5 "$o/variants-$h.log"
done
tar czf "$OUT/call-g.tgz" -C "$OUT" call-g
echo "done at $(el) s"
