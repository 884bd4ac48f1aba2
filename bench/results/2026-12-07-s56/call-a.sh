#!/usr/bin/env bash
# Session 56, call A (carry [".device"], main's build at fbac254; ≤ 560 s).
# Issue I's items at full size on whatever card comes (session 50's
# gpu-full.sh PART=a list): every FP8 program at 4096³ in each config and at
# the ragged 1000 × 528 with K = 112, 272, 496, 624; the group programs; the
# block with QK-norm at 16384 and 15999 tokens; every cross-entropy program;
# the LM head plain and with each loss variant at d = 256 (every row and
# weight) and d = 2048, V = 32768 (16384 and 15999 tokens) — the first run of
# the large heads with session 55's row_lse change — plus the row_lse edge
# case with fbac254's restored asserts. Then the wheel's test_head (the loss
# variants' forward and gradients against PyTorch's formulas) and the loss
# variants against the plain tail at d = 2048 and 4096.
# Predicted: all pass, ~320 s for gpu (153 + 1 cases), ~100 s for the rest.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
o=$OUT/call-a; rm -rf /tmp/b /tmp/py; mkdir -p /tmp/b /tmp/py "$o"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
tar xJf .device/bins.tar.xz -C /tmp/b
args=()
for p in fp8 qk_norm QK-norm block_amax pair_head_norm cross_entropy "cross-entropy loss" "LM head" weight_col_sums scaled_row_dot row_lse; do
  args+=(--only "$p")
done
timeout "${LIMIT:-400}" scripts/device-run.sh /tmp/b/gpu "${args[@]}" > "$o/gpu.log" 2>&1
echo "gpu (issue I's items, full size) exit $? at $(el) s: $(tail -1 "$o/gpu.log")"
grep -E "^FAIL" -A10 "$o/gpu.log" | head -40
echo "passed: $(grep -cE "^PASS" "$o/gpu.log"), failed: $(grep -cE "^FAIL" "$o/gpu.log"); repeat bitwise false: $(grep -c "repeat bitwise false" "$o/gpu.log")"
grep -E "^(PASS|FAIL)" "$o/gpu.log" | grep -E "M=4096 N=4096|M=16384|M=15999|V=32768|row_lse" | cut -c1-120 | tail -n 14
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/py .device/coda_rs-*.whl > "$o/pip.log" 2>&1
(cd coda-python/tests && PYTHONPATH=/tmp/py timeout 60 python3 -m unittest -v test_head) > "$o/python-head.log" 2>&1
echo "test_head exit $? at $(el) s"; grep -E "FAIL|ERROR|^Ran|^OK" "$o/python-head.log" | tail -4
for h in 2048 4096; do
  PYTHONPATH=/tmp/py timeout 40 python3 bench/head_variants.py --hidden $h > "$o/variants-$h.log" 2>&1
  echo "== variants d=$h exit $? at $(el) s"; tail -n 6 "$o/variants-$h.log"
done
xz -9 "$o/gpu.log"
echo "done at $(el) s"
