#!/usr/bin/env bash
# Session 43's plan for the next device call on an H200 (carry [".device"];
# ≤ 590 s). `.device` holds main's build at 1299eba (bins.tar.xz, the
# wheel: its kernels are main's since) and call C's experiment `coda`
# (.device/exp/coda.xz: the SwiGLU forwards, the RMSNorm backward and the
# LM head's saving forward each in ping-pong 128 × 128 and 128 × 192 and
# cooperative 128 × 256 and 256 × 128). This build passed `gpu --quick` on
# an H200 in session 43 (call G).
#  (The searches of 2 run first: they are short; then 3, then 1.)
#  1. compare.py of this build (~333 s in session 36): the README's suite
#     and Llama tables for issue H from today's default build (session
#     43's `coda bench --part llama` on an H200 read as session 36's run).
#  2. Call C's searches on the H200 (~60 s): no H200 search ever timed the
#     SwiGLU forwards in another tile than ping-pong 128 × 128. On the
#     H100 the cooperative 128 × 256 ran the SwiGLU-save at 16384 × 57344
#     × 8192 in 0.83× that tile's time. Prediction on the H200 (its cost
#     model): 128 × 192 ~2% ahead at wide N, the cooperative tile ~4%
#     behind; if a tile is ≥ 3% ahead at a d = 8192 block shape, ship it
#     in the H200 file (`bench/ship_tuning.py CACHE OUT --only PROGRAM...`, as the H100
#     file's four programs were) and time the block again.
# On an H100 only step 2 (an H100 record; its file already has these).
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { local l=$(( $1 - $(el) )); echo $(( l > 1 ? l : 1 )); }
o=$OUT/next; rm -rf /tmp/b /tmp/e /tmp/py; mkdir -p /tmp/b /tmp/e /tmp/py "$o"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
xz -dc .device/exp/coda.xz > /tmp/e/coda && chmod +x /tmp/e/coda
for p in linear_rowscale_swiglu_save linear_rowscale_swiglu rmsnorm_backward linear_cross_entropy_save; do
  TUNE_ONLY=$p PARTS=tune timeout 60 scripts/device-verify.sh /tmp/e "$o" >> "$o/verify-tune.txt" 2>&1
  echo "== $p searched at $(el) s"
done
grep -v "DEBUG\|^cache" "$o/tune.log" | grep " M=" | sed 's/\x1b\[[0-9;]*m//g' | tail -20
if ! grep -q H100 "$o/gpu.txt"; then
  tar xJf .device/bins.tar.xz -C /tmp/b
  cp .device/coda_rs-*.whl /tmp/b/
  # 3. Where soft-capping's 4% at d = 2048 goes on the H200 (session 43,
  #    call G: 1.041×): GPU time per kernel per variant (~20 s).
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/py /tmp/b/coda_rs-*.whl > "$o/pip.log" 2>&1
  PYTHONPATH=/tmp/py timeout 40 python3 bench/head_variants.py --hidden 2048 --profile > "$o/variants-profile.log" 2>&1
  echo "profile exit $? at $(el) s"; tail -n 20 "$o/variants-profile.log"
  PARTS=compare timeout "$(left 585)" scripts/device-verify.sh /tmp/b "$o" > "$o/verify-compare.txt" 2>&1
  echo "compare at $(el) s"; grep "^|" "$o/compare.log" | tail -40
fi
tar czf "$OUT/next.tgz" -C "$OUT" next
echo "done at $(el) s"
