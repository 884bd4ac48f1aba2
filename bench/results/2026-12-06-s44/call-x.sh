#!/usr/bin/env bash
# Session 44, call X (carry [".device"], ≤ 590 s): on an H200, call A
# (call-a.sh) instead. On an H100: the soft-capped saving kernel in
# ping-pong 128 × 192 2 × 1 with 16-column epilogue subtiles (experiment
# wheel .device/exp/coda_rs-exp.whl, branch exp-subtile; ptxas: 68 bytes
# of spills there against 172 with the builder's 32 columns; main runs it
# in 128 × 128 1 × 2) against main's wheel: the wheel's `test_head` on
# the experiment wheel (the loss variants against PyTorch's formulas,
# forward and gradients), then head_variants.py at d = 2048, main and
# experiment alternated twice (A B A B), and once at d = 4096 each.
# Prediction: soft-capping 1.04–1.05× → 1.01–1.02× the plain tail at
# d = 2048 (session 42: the spilling 128 × 192 kernel took 3.24 ms a call
# against 3.40 at 128 × 128; the plain one at 128 × 192 2.92).
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { local l=$(( $1 - $(el) )); echo $(( l > 1 ? l : 1 )); }
nvidia-smi --query-gpu=name --format=csv,noheader > /tmp/gpu.txt 2>&1
if ! grep -q H100 /tmp/gpu.txt; then exec bash bench/results/2026-12-06-s44/call-a.sh; fi
o=$OUT/x; rm -rf /tmp/pm /tmp/pe; mkdir -p /tmp/pm /tmp/pe "$o"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/pm .device/coda_rs-0.1.0-*.whl > "$o/pip.log" 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/pe .device/exp/coda_rs-exp/coda_rs-*.whl >> "$o/pip.log" 2>&1
(cd coda-python/tests && PYTHONPATH=/tmp/pe timeout 120 python3 -m unittest -v test_head) > "$o/test-head-exp.log" 2>&1
echo "test_head (experiment) exit $? at $(el) s"; grep -E "^Ran|^OK|FAILED|Error" "$o/test-head-exp.log" | head -5
for run in 1 2; do
  for w in pm pe; do
    PYTHONPATH=/tmp/$w timeout "$(left 520)" python3 bench/head_variants.py --hidden 2048 > "$o/variants-2048-$w-$run.log" 2>&1
    echo "== $w run $run at $(el) s"; grep -E "plain|soft|smooth|z-loss|all" "$o/variants-2048-$w-$run.log" | tail -5
  done
done
for w in pm pe; do
  (( $(el) > 480 )) && break
  PYTHONPATH=/tmp/$w timeout "$(left 580)" python3 bench/head_variants.py --hidden 4096 > "$o/variants-4096-$w.log" 2>&1
  echo "== $w d=4096 at $(el) s"; grep -E "plain|soft" "$o/variants-4096-$w.log" | tail -2
done
tar czf "$OUT/x.tgz" -C "$OUT" x
echo "done at $(el) s"
