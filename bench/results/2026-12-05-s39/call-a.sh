#!/usr/bin/env bash
# Session 39, call A (≤ 590 s), on the build of branch `group-fused`: the
# branch `sincos-inline-far` (sin/cos's far reduction inline, group
# programs' column vectors read at use, session 38's tests) plus, in group
# programs, values used more than once or unpaired computed per column
# pair as locals of the one node that reads them (coda-codegen plan.rs
# `by_pair`; ptxas here, spill stores: qk_norm_rope 216 → 0 ping-pong,
# 92 → 0 cooperative; linear_rowscale_qk_norm_rope 464 → 0) and
# qk_norm_rope_backward's second reduction reformed (572 → 40).
# In order of need, each step only with time left: gpu --quick (every
# math function against f64 with far angles and IEEE specials, the group
# programs and the QK-norm block); the RoPE and QK-norm rows beside
# cuBLASLt; the d = 2048 blocks with and without QK-norm; session 38's
# wheel tests; the random batch and the untuned suite's programs; on an
# H200, fresh searches of the RoPE programs' shipped shapes.
# Carry [".device"].
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { local l=$(( ${1:-585} - $(el) )); echo $(( l > 1 ? l : 1 )); }
o=$OUT/call-a; rm -rf /tmp/b /tmp/py; mkdir -p /tmp/b /tmp/py "$o"
trap 'tar czf "$OUT/call-a.tgz" -C "$OUT" call-a' EXIT
tar xJf .device/bins.tar.xz -C /tmp/b
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
timeout 200 scripts/device-run.sh /tmp/b/gpu --quick > "$o/gpu.log" 2>&1
echo "gpu --quick exit $? at $(el) s: $(tail -1 "$o/gpu.log")"
grep -E "^FAIL" -A6 "$o/gpu.log" | head -20
grep -E "math functions|activations|qk_norm|group" "$o/gpu.log" | head -16
timeout "$(left 420)" scripts/device-run.sh /tmp/b/time_programs --programs-only --only rope > "$o/rope.log" 2>&1
echo "rope rows exit $? at $(el) s"; cat "$o/rope.log"
# The d = 2048 blocks with and without QK-norm (no program row matches the filter).
timeout "$(left 480)" scripts/device-run.sh /tmp/b/time_programs --quick --only no-program-row > "$o/blocks.log" 2>&1
echo "blocks exit $? at $(el) s"; tail -3 "$o/blocks.log"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/py .device/coda_rs-*.whl > "$o/pip.log" 2>&1
(cd coda-python/tests && PYTHONPATH=/tmp/py timeout "$(left 540)" python3 -m unittest -v test_head test_gpu.PoolMemory \
  test_block.BlockOp.test_from_checkpoint_refuses_a_weight_of_another_shape test_block.BlockOp.test_config_fields_of_another_type_are_refused_by_name \
  test_block.BlockOp.test_a_cast_module_keeps_f32_frequencies test_block.BlockOp.test_frozen_weights_get_no_gradient_gemm) > "$o/python.log" 2>&1
echo "python exit $? at $(el) s"; grep -E "FAIL|ERROR|^Ran|^OK" "$o/python.log" | tail -6
GPU_ARGS=--quick PARTS="random user" timeout "$(left 570)" scripts/device-verify.sh /tmp/b "$o" > "$o/verify.txt" 2>&1
echo "random / user at $(el) s: $(tail -1 "$o/random.log" 2>/dev/null) / $(tail -1 "$o/user.log" 2>/dev/null)"
if grep -q H200 "$o/gpu.txt" && (( $(left) > 60 )); then
  python3 - coda-llama/tuning/nvidia-h200.json > "$o/rope-tune-args.txt" <<'PY'
import json, sys
from collections import defaultdict
shapes = defaultdict(list)
for e in json.load(open(sys.argv[1])):
    name = e["program"].split("::")[1]
    if name in ("linear_rowscale_rope", "rope_backward"):
        shapes[name].append(f"--shape {e['m']},{e['n']},{e['k']}")
for p, s in shapes.items():
    print(p, " ".join(s))
PY
  while read -r program args; do
    # shellcheck disable=SC2086
    CODA_TUNE_CACHE="$o/rope-tuning.json" timeout "$(left)" scripts/device-run.sh /tmp/b/coda tune --program "$program" $args >> "$o/rope-tune.log" 2>&1
  done < "$o/rope-tune-args.txt"
  echo "rope searches at $(el) s: $(grep -c ' M=' "$o/rope-tune.log")"
fi
echo "done at $(el) s"
