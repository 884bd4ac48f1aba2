#!/usr/bin/env bash
# Session 45, call A (carry [".device"], ≤ 590 s). On an H200: session 44's
# call A (issue H's searches and compare.py run, main's build in
# .device/bins.tar.xz) instead. On an H100: the soft-capped tail storing the
# capped logits `y` (.device/s45: this checkout's build). Its saving kernel
# now runs ping-pong 128 × 192 2 × 1 (20 bytes of spills, as the plain
# one's) without the row sums, which the gradient map takes from `y`
# (main: 128 × 128, storing the pre-cap logits).
#  1. The GPU tests of the changed programs against the interpreter
#     (`--only softcap`) and the tail's cases (`--only "LM head"`: the loss
#     variants, every row and weight, fused and not), the launch counts.
#  2. The wheel's test_head (the variants against PyTorch's formulas).
#  3. head_variants.py at d = 2048, main's wheel and this one alternated
#     twice, the second run with --profile (GPU time per kernel); d = 4096
#     once each. Prediction (session 42's H100 profile: soft-capping 10.81
#     ms of GPU time against the plain tail's 10.20, the saving kernel 3.40
#     against 2.92, the map 0.99 against 0.87): soft-capping 1.04× → ~1.01×
#     the plain tail at d = 2048; the map ~0.1 ms slower (a log and a
#     division more an element), the saving kernel as the plain one's
#     plus tanh.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { local l=$(( $1 - $(el) )); echo $(( l > 1 ? l : 1 )); }
nvidia-smi --query-gpu=name --format=csv,noheader > /tmp/gpu.txt 2>&1
if ! grep -q H100 /tmp/gpu.txt; then exec bash bench/results/2026-12-06-s44/call-a.sh; fi
o=$OUT/a; rm -rf /tmp/n /tmp/pm /tmp/pe; mkdir -p /tmp/n /tmp/pm /tmp/pe "$o"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
tar xJf .device/s45/bins.tar.xz -C /tmp/n
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/pm .device/coda_rs-0.1.0-*.whl > "$o/pip.log" 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/pe .device/s45/coda_rs-*.whl >> "$o/pip.log" 2>&1
for f in softcap "LM head" "launches per op"; do
  timeout "$(left 200)" scripts/device-run.sh /tmp/n/gpu --only "$f" > "$o/gpu-$(echo $f | tr ' ' _).log" 2>&1
  echo "gpu --only '$f' exit $? at $(el) s"; grep -E "passed|FAIL" "$o/gpu-$(echo $f | tr ' ' _).log" | tail -4
done
(cd coda-python/tests && PYTHONPATH=/tmp/pe timeout "$(left 280)" python3 -m unittest -v test_head) > "$o/test-head.log" 2>&1
echo "test_head exit $? at $(el) s"; grep -E "^Ran|^OK|FAILED|Error" "$o/test-head.log" | head -5
for run in 1 2; do
  for w in pm pe; do
    (( $(el) > 470 )) && break
    extra=""; [[ $run == 2 ]] && extra="--profile"
    PYTHONPATH=/tmp/$w timeout "$(left 540)" python3 bench/head_variants.py --hidden 2048 $extra > "$o/variants-2048-$w-$run.log" 2>&1
    echo "== $w run $run at $(el) s"; grep -E "^(plain|soft|z-loss|label|all)" "$o/variants-2048-$w-$run.log" | head -5
  done
done
grep -A6 "^soft-capped" "$o/variants-2048-pe-2.log" 2>/dev/null | head -7
for w in pm pe; do
  (( $(el) > 500 )) && break
  PYTHONPATH=/tmp/$w timeout "$(left 580)" python3 bench/head_variants.py --hidden 4096 > "$o/variants-4096-$w.log" 2>&1
  echo "== $w d=4096 at $(el) s"; grep -E "^(plain|soft)" "$o/variants-4096-$w.log" | tail -2
done
tar czf "$OUT/a.tgz" -C "$OUT" a
echo "done at $(el) s"
