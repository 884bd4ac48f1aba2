#!/usr/bin/env bash
# Session 50, for the next H200 (≤ 270 s; not run: no budget left): if the machine is an H200,
# the part of gpu-full.sh's PART=a that no H200 has run at full size: the
# group programs (qk_norm_rope, block_amax, pair_head_norm, the block's two
# QK-norm programs at 4096³ and ragged), the block with QK-norm at M = 16384
# and 15999, and the LM head's large loss-variant cases (new this session);
# then the generated batches built here and never run on a GPU, where .device
# has them: 24 programs of seed 0x5e500002 (gpu_random_5e500002.xz) and 12
# map programs of seed 0x5e500003 (gpu_random_maps_5e500003.xz). Carry [".device"].
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
o=$OUT/call-d; rm -rf /tmp/b; mkdir -p /tmp/b "$o"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
grep -q H200 "$o/gpu.txt" || { echo "not an H200: stopping"; exit 0; }
tar xJf .device/bins.tar.xz -C /tmp/b
xz -dc .device/gpu.xz > /tmp/b/gpu && chmod 755 /tmp/b/gpu
timeout "${LIMIT:-200}" scripts/device-run.sh /tmp/b/gpu --only qk_norm --only QK-norm --only block_amax --only pair_head_norm \
  --only "soft-capped at 30" --only "z-loss 1e-4" > "$o/gpu.log" 2>&1
echo "gpu (group programs, large loss variants) exit $? at $(el) s: $(tail -1 "$o/gpu.log")"
grep -E "^FAIL" -A8 "$o/gpu.log" | head -30
for f in .device/gpu_random_*.xz; do
  [[ -f $f ]] || continue
  name=$(basename "$f" .xz)
  xz -dc "$f" > "/tmp/b/$name" && chmod 755 "/tmp/b/$name"
  timeout 60 scripts/device-run.sh "/tmp/b/$name" > "$o/$name.log" 2>&1
  echo "$name exit $? at $(el) s: $(tail -1 "$o/$name.log")"
  grep -E "^FAIL" -A8 "$o/$name.log" | head -20
done
echo "done at $(el) s"
