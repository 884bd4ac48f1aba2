#!/usr/bin/env bash
# Session 30's planned call 3: coda-candle's GPU test, session 28's planned
# call 3, part 4, and the QK-norm programs, on the same pack as calls 1 and
# 2; logs into $OUT/call3 as it goes; no entry starts after 470 s (each ncu
# run has 70 s, its exports 10 s each; ~30 s an entry expected). Nsight Compute, one launch each inside
# a `coda tune` of one program at one shape (clocks as they are), with
# SourceCounters for bench/ncu_stalls.py: linear_residual_rms_partial and
# linear_rowscale_rope at 4096 beside our plain A·Bᵀ GEMM (`coda-tests::linear`;
# coda-llama's matmul is A·B) in the same config; then the block's QK-norm
# program (linear_rowscale_qk_norm_rope, which also stores the pre-norm z:
# 1.22x cuBLASLt at 8192 x 24576 x 8192) beside the test kit's qk_norm_rope
# (no z: 1.04-1.08x) and RoPE alone, all ping-pong 128x128 1x2: is it the
# second staged output's shared memory (4 mainloop stages against 5,
# session 13's hypothesis; the stage count is in the kernel's name) or the
# epilogue's issue slots?
# Each entry: program, shape, kernel regex, launches to skip. A program's
# kernel is named by its functor's namespace (`_<program>__<config>`); a
# plain GEMM has no functor, so `linear`'s (one config) is matched as
# CUTLASS's ping-pong kernel. The skips land each compared pair on the
# same swizzle and raster of `coda tune`'s search order (own config first,
# then sw1/M, sw1/N, sw8/M, sw8/N): the kit's qk_norm_rope, whose own config
# is cooperative, reaches ping-pong's sw1/N one launch in.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
o=$OUT/call3; rm -rf /tmp/b /tmp/r; mkdir -p /tmp/b /tmp/r "$o"
tar xJf .device/bins.tar.xz -C /tmp/b
# coda-candle's GPU test (session 30: the loss variants), packed as candle_gpu by EXTRA.
[[ -x /tmp/b/candle_gpu ]] && timeout 60 coda-candle/run-gpu-test.sh /tmp/b/candle_gpu > "$o/candle.log" 2>&1
echo "candle at $(el) s: $(tail -1 "$o/candle.log" 2>/dev/null)"
pp=pp_128x128_c1x2
for k in "coda-llama::linear_residual_rms_partial 4096,4096,4096 _linear_residual_rms_partial__$pp 3" \
         "coda-tests::linear 4096,4096,4096 Pingpong 3" \
         "coda-llama::linear_rowscale_rope 4096,12288,4096 _linear_rowscale_rope__$pp 3" \
         "coda-tests::linear 4096,12288,4096 Pingpong 3" \
         "coda-llama::linear_rowscale_qk_norm_rope 8192,24576,8192 _linear_rowscale_qk_norm_rope__$pp 3" \
         "coda-tests::qk_norm_rope 8192,24576,8192 _qk_norm_rope__$pp 1" \
         "coda-llama::linear_rowscale_rope 8192,24576,8192 _linear_rowscale_rope__$pp 3"; do
  (( $(el) > 470 )) && { echo "stopping at $(el) s"; break; }
  read -r prog shape regex skip <<< "$k"
  tag=${prog#*::}-${shape%%,*}-$(cut -d, -f2 <<< "$shape")
  CODA_TUNE_CACHE=/tmp/r/cache-$tag.json timeout 70 scripts/device-run.sh ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:$regex" \
    --launch-skip "$skip" --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis --section SchedulerStats \
    --section WarpStateStats --section InstructionStats --section LaunchStats --section Occupancy --section SourceCounters \
    -f -o /tmp/r/$tag /tmp/b/coda tune --program $prog --shape $shape > "$o/$tag.run.log" 2>&1
  [[ -f /tmp/r/$tag.ncu-rep ]] || { echo "$tag: no report"; tail -3 "$o/$tag.run.log"; continue; }
  timeout 10 ncu --import /tmp/r/$tag.ncu-rep --page details > "$o/$tag.txt" 2>&1
  timeout 10 ncu --import /tmp/r/$tag.ncu-rep --page raw --csv > "$o/$tag.raw.csv" 2>&1
  timeout 10 ncu --import /tmp/r/$tag.ncu-rep --page source --csv --print-source sass 2>/dev/null | xz > "$o/$tag.sass.csv.xz"
  mv /tmp/r/$tag.ncu-rep "$o/"
  echo "== $tag at $(el) s: $(grep -E '^    (Elapsed Cycles|SM Frequency|Duration|Dynamic Shared Memory Per Block)' "$o/$tag.txt" | tr -s ' ' | paste -sd'|')"
  echo "   mainloop: $(grep -oE 'MainloopSm90TmaGmmaWarpSpecialized[A-Za-z]*<\(int\)[0-9]+' "$o/$tag.txt" | head -1)"
  python3 bench/ncu_stalls.py "$o/$tag.sass.csv.xz" 2>&1 | tail -n 3
done 2>&1 | tee "$o/regions.txt"
echo "done at $(el) s"
