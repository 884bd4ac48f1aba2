#!/usr/bin/env bash
# Session 43, call C (carry [".device"]; ≤ 595 s). On an H200, call A's
# runs first (the README's tables). Then, on either card, the searches of
# the four coda-llama programs that compile no cooperative tile (the
# SwiGLU forwards, the RMSNorm backward, the LM head's saving forward) with
# the cooperative 128 × 256 and 256 × 128 tiles and ping-pong 128 × 192
# beside their own (an experiment build's `coda`, .device/exp/coda.xz:
# CODA_CONFIGS / CODA_CONFIG_PROGRAMS), at every shape of their shipped
# searches. Why: call B's plain GEMMs ran the cooperative 128 × 256 at
# 0.72–0.90× ping-pong 128 × 128's time on the H100 at long K and wide N,
# and the H100's file (session 40) searched these programs in ping-pong
# alone. Prediction (H100): at 16384 × 57344 × 8192 (SwiGLU-save, 25.2 ms
# searched) and 16384 × 8192 × 57344 (RMSNorm backward, 30.3 ms) the
# cooperative tiles 10–25% faster; at the 2048-wide shapes no change.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
o=$OUT/call-c; rm -rf /tmp/e; mkdir -p "$o" /tmp/e
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
if ! grep -q H100 "$o/gpu.txt"; then
  bash bench/results/2026-12-06-s43/call-a.sh
fi
xz -dc .device/exp/coda.xz > /tmp/e/coda && chmod +x /tmp/e/coda
for p in linear_rowscale_swiglu_save rmsnorm_backward linear_rowscale_swiglu linear_cross_entropy_save; do
  (( $(el) > 540 )) && { echo "stopping at $(el) s"; break; }
  TUNE_ONLY=$p PARTS=tune timeout $(( 590 - $(el) )) scripts/device-verify.sh /tmp/e "$o" > "$o/verify-$p.txt" 2>&1
  echo "== $p at $(el) s"
done
grep -v "DEBUG\|^cache" "$o/tune.log" | tail -40
tar czf "$OUT/call-c.tgz" -C "$OUT" call-c
echo "done at $(el) s"
