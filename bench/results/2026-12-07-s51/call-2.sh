#!/usr/bin/env bash
# Session 51, the budget's last call (~430 s left, ≤ 260 s of run). On an H200:
# issue I's items at full size, cut to what fits (~210 s on an H100 in
# session 50's call A): every FP8 program (4096³ and the ragged K), the group
# programs (qk_norm, block_amax, pair_head_norm), the block forward with
# QK-norm at 16384 and 15999 tokens, every cross-entropy program and the
# large loss-variant cases of the LM head. On an H100 (whose full set passed
# in session 50): the generated batches never run on a GPU. Carry [".device"].
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
o=$OUT/call-2; mkdir -p "$o" /tmp/b
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
if grep -q H200 "$o/gpu.txt"; then
  tar xJf .device/bins.tar.xz -C /tmp/b
  xz -dc .device/gpu.xz > /tmp/b/gpu && chmod 755 /tmp/b/gpu
  args=()
  for p in fp8 qk_norm "block forward, QK-norm" block_amax pair_head_norm cross_entropy \
      "soft-capped at 30" "z-loss 1e-4" weight_col_sums scaled_row_dot; do
    args+=(--only "$p")
  done
  timeout "${LIMIT:-200}" scripts/device-run.sh /tmp/b/gpu "${args[@]}" > "$o/gpu.log" 2>&1
  echo "gpu (issue I's items, full size) exit $? at $(el) s: $(tail -1 "$o/gpu.log")"
  grep -E "^FAIL" -A8 "$o/gpu.log" | head -30
  echo "passed: $(grep -cE "^PASS" "$o/gpu.log"); large cases:"
  grep -E "^(PASS|FAIL)" "$o/gpu.log" | grep -E "M=4096 N=4096|M=16384|M=15999|V=32768" | cut -c1-110
  xz -9 "$o/gpu.log"
else
  for f in .device/gpu_random_*.xz; do
    name=$(basename "$f" .xz)
    xz -dc "$f" > "/tmp/b/$name" && chmod 755 "/tmp/b/$name"
    timeout 90 scripts/device-run.sh "/tmp/b/$name" > "$o/$name.log" 2>&1
    echo "$name exit $? at $(el) s: $(tail -1 "$o/$name.log")"
    grep -E "^FAIL" -A8 "$o/$name.log" | head -20
  done
fi
echo "done at $(el) s"
