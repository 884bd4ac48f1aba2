#!/usr/bin/env bash
# Session 43, call E (carry [".device"]; ≤ 595 s). On an H200, call A's
# runs first (the README's tables). Then, on either card, call C's search
# for the seven other coda-llama GEMM programs of the H100 file, each with
# ping-pong 128 × 128 and 128 × 192 and cooperative 128 × 256 and
# 256 × 128 (a second experiment build's `coda`, .device/exp/coda.xz), at
# every shape of their shipped searches (43). Prediction (H100), from call
# C: ping-pong 128 × 192 5–10% faster than the shipped ping-pong 128 × 128
# at the 8192-wide and wider shapes (`linear_residual_rms_partial` at
# 8192³, `linear_dswiglu` at 16384 × 8192 × 2048, the LM head's GEMMs at
# 4096 × 32768 × 4096), as it was for the SwiGLU at 8192 × 16384 × 8192;
# no change where the pick is already cooperative or 128 × 192, and at the
# 2048-wide shapes.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
o=$OUT/call-e; rm -rf /tmp/e; mkdir -p "$o" /tmp/e
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
if ! grep -q H100 "$o/gpu.txt"; then
  bash bench/results/2026-12-06-s43/call-a.sh
fi
xz -dc .device/exp/coda.xz > /tmp/e/coda && chmod +x /tmp/e/coda
for p in rmsnorm_backward_head linear_dswiglu linear_residual_rms_partial matmul linear_rowscale_rope linear_cross_entropy linear_cross_entropy_backward; do
  (( $(el) > 540 )) && { echo "stopping at $(el) s"; break; }
  TUNE_ONLY=$p PARTS=tune timeout $(( 590 - $(el) )) scripts/device-verify.sh /tmp/e "$o" > "$o/verify-$p.txt" 2>&1
  echo "== $p at $(el) s"
done
grep -v "DEBUG\|^cache" "$o/tune.log" | tail -40
tar czf "$OUT/call-e.tgz" -C "$OUT" call-e
echo "done at $(el) s"
