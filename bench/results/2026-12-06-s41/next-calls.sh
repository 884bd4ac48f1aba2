#!/usr/bin/env bash
# Session 41's plan for the next device calls (main's build packed in
# .device; carry [".device"]). STEP=1 (≤ 480 s, an H200 wanted): issue H's
# "Done when": `gpu --quick`, then one compare.py run of the default build
# (333 s in session 36) for the README's tables. STEP=2 (≤ 590 s, either
# GPU): the wheel's `test_block` and `test_head` (session 41's autocast
# tests among them, not yet run), coda-candle's GPU test, then issue I's
# loss variants — their programs have no shipped search, while their
# plain siblings do (the suspect for the H100's 1.04–1.05× at
# d = 2048, session 41): search them at the siblings' shipped shapes into
# a cache of their own, time the variants with and without it; the cache
# ships with `bench/ship_tuning.py` if it brings them within 2%. Then
# Nsight Compute of the two 4096 rows without a profile (RoPE, the LM-head
# forward's GEMM) inside `coda bench --quick`, so each runs in the
# bench's own order.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { local l=$(( $1 - $(el) )); echo $(( l > 1 ? l : 1 )); }
o=$OUT/step${STEP:?STEP=1 or 2}; rm -rf /tmp/b /tmp/py /tmp/r; mkdir -p /tmp/b /tmp/py /tmp/r "$o"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
tar xJf .device/bins.tar.xz -C /tmp/b
cp .device/coda_rs-*.whl /tmp/b/
if [[ $STEP == 1 ]]; then
  timeout 120 scripts/device-run.sh /tmp/b/gpu --quick > "$o/gpu.log" 2>&1
  echo "gpu --quick exit $? at $(el) s: $(tail -1 "$o/gpu.log")"
  PARTS=compare timeout "$(left 470)" scripts/device-verify.sh /tmp/b "$o" > "$o/verify-compare.txt" 2>&1
  echo "compare at $(el) s"; grep "^|" "$o/compare.log" | tail -22
else
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/py /tmp/b/coda_rs-*.whl > "$o/pip.log" 2>&1
  # Session 41's autocast tests (and the rest of the two files), not yet run on a GPU.
  (cd coda-python/tests && PYTHONPATH=/tmp/py timeout 120 python3 -m unittest -v test_block test_head) > "$o/python.log" 2>&1
  echo "python tests exit $? at $(el) s"; grep -E "FAIL|ERROR|^Ran|^OK" "$o/python.log" | tail -5
  # coda-candle's GPU test with the named block inputs (.device/candle-gpu.xz, built at fbb55f3).
  xz -dc .device/candle-gpu.xz > /tmp/b/candle-gpu && chmod +x /tmp/b/candle-gpu
  timeout 90 coda-candle/run-gpu-test.sh /tmp/b/candle-gpu > "$o/candle.log" 2>&1
  echo "candle exit $? at $(el) s: $(grep -E "test result|passed|failed" "$o/candle.log" | tail -1)"
  for h in 2048 4096; do
    PYTHONPATH=/tmp/py timeout 60 python3 bench/head_variants.py --hidden $h > "$o/variants-$h.log" 2>&1
    echo "== variants d=$h exit $? at $(el) s"; tail -n 5 "$o/variants-$h.log"
  done
  for pr in linear_cross_entropy_save_softcap linear_cross_entropy_save_sum linear_cross_entropy_softcap linear_cross_entropy_sum \
            linear_cross_entropy_backward_softcap linear_cross_entropy_backward_terms; do
    CODA_TUNE_CACHE=$o/variants-tuning.json timeout "$(left 400)" scripts/device-run.sh /tmp/b/coda tune --program coda-llama::$pr \
      --shape 4096,32768,2048 --shape 4096,32768,4096 --shape 4096,32768,8192 >> "$o/variants-tune.log" 2>&1
  done
  for pr in cross_entropy_grad_softcap cross_entropy_grad_terms; do
    CODA_TUNE_CACHE=$o/variants-tuning.json timeout "$(left 420)" scripts/device-run.sh /tmp/b/coda tune --program coda-llama::$pr --shape 4096,32768,8 >> "$o/variants-tune.log" 2>&1
  done
  echo "variant searches at $(el) s"; grep -v DEBUG "$o/variants-tune.log" | grep -c " M="
  for h in 2048 4096; do
    CODA_TUNE_CACHE=$o/variants-tuning.json PYTHONPATH=/tmp/py timeout "$(left 500)" python3 bench/head_variants.py --hidden $h > "$o/variants-searched-$h.log" 2>&1
    echo "== variants searched d=$h exit $? at $(el) s"; tail -n 5 "$o/variants-searched-$h.log"
  done
  # The fused kernels only: `linear`'s launches in the bench interleave several rows' shapes.
  for k in "_linear_rowscale_rope__ rope" "_linear_cross_entropy__ ce"; do
    (( $(el) > 540 )) && break
    read -r regex tag <<< "$k"
    timeout 30 scripts/device-run.sh ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:$regex" --launch-skip 40 --launch-count 1 \
      --section SpeedOfLight --section WarpStateStats --section SourceCounters -f -o /tmp/r/$tag /tmp/b/coda bench --part llama --quick > "$o/$tag.run.log" 2>&1
    [[ -f /tmp/r/$tag.ncu-rep ]] || { echo "$tag: no report"; continue; }
    timeout 10 ncu --import /tmp/r/$tag.ncu-rep --page details > "$o/$tag.txt" 2>&1
    timeout 10 ncu --import /tmp/r/$tag.ncu-rep --page source --csv --print-source sass 2>/dev/null | xz > "$o/$tag.sass.csv.xz"
    echo "== $tag: $(grep -E '^    (Elapsed Cycles|SM Frequency|Duration)' "$o/$tag.txt" | tr -s ' ' | paste -sd'|')"
    python3 bench/ncu_stalls.py "$o/$tag.sass.csv.xz" 2>&1 | tail -n 3
  done
fi
tar czf "$OUT/step$STEP.tgz" -C "$OUT" "step$STEP"
echo "done at $(el) s"
