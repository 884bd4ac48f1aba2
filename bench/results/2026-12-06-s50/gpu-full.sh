#!/usr/bin/env bash
# Session 50: `gpu`'s full set on the H200 (4096³ and the ragged 1000 × 528 ×
# 264 for every program; the blocks at M = 16384 and 15999; the LM head at
# d = 2048, V = 32768), each case run twice and compared bitwise, in two
# calls of ≤ 580 s on one warm machine. Main's kernels (1698eed;
# .device/bins.tar.xz) with session 50's `gpu` test binary (.device/gpu.xz:
# repeatable --only and --skip, the large loss-variant cases).
#   PART=a: issue I's items. FP8: every kit FP8 program (promoted, fast,
#     blockwise, requant), also at K = 112, 496, 624. Group reductions:
#     qk_norm_rope, block_amax, pair_head_norm, the block's QK-norm programs,
#     the block with QK-norm forward and backward. Loss variants: every
#     cross-entropy program (plain, soft-capped, terms), label smoothing's
#     column sums, the LM head with each variant (d = 256, every row and
#     weight; d = 2048 with a ragged last chunk, sampled rows).
#   PART=b: the rest (every other program, the plain blocks, the edge cases,
#     the refusals, the 30 s stress); the full set last ran on an H200 in
#     session 13.
# Carry [".device"].
set -uo pipefail
part=${PART:?PART=a or PART=b}
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
o=$OUT/call-$part; rm -rf /tmp/b; mkdir -p /tmp/b "$o"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
tar xJf .device/bins.tar.xz -C /tmp/b
xz -dc .device/gpu.xz > /tmp/b/gpu && chmod 755 /tmp/b/gpu
flag=$([[ $part == a ]] && echo --only || echo --skip)
args=()
for p in fp8 qk_norm QK-norm block_amax pair_head_norm cross_entropy "cross-entropy loss" "LM head" weight_col_sums scaled_row_dot; do
  args+=("$flag" "$p")
done
timeout "${LIMIT:-560}" scripts/device-run.sh /tmp/b/gpu "${args[@]}" > "$o/gpu.log" 2>&1
echo "gpu (part $part, full size) exit $? at $(el) s: $(tail -1 "$o/gpu.log")"
grep -E "^FAIL" -A8 "$o/gpu.log" | head -30
echo "passed: $(grep -cE "^PASS" "$o/gpu.log"); large cases, the last 16:"
grep -E "^(PASS|FAIL)" "$o/gpu.log" | grep -E "M=4096 N=4096|M=16384|M=15999|V=32768" | cut -c1-120 | tail -n 16
tar czf "$OUT/call-$part.tgz" -C "$OUT" "call-$part"
echo "done at $(el) s"
