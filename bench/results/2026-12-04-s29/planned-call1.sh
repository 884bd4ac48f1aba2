#!/usr/bin/env bash
# Session 29's planned call (no machine was lent in session 29), carried
# with `carry: [".device"]`: branch fp8-pipelined-promotion's build, packed
# by scripts/device-pack.sh with EXTRA="gpu_random_maps=COPY", COPY the
# gpu_random binary of a CODA_RANDOM_MAPS=1 CODA_RANDOM_PROGRAMS=8 build.
# (1) The checks: gpu --quick (every FP8 program at 1, 3, 4 and 5 k-tiles
# against f64, twice bitwise), gpu_user, gpu_random (CI's two programs) and
# the map batch. (2) The FP8 table (time_programs --only fp8: each FP8
# program beside cuBLASLt's FP8 GEMM of its scaling and the bf16 program,
# interleaved, at 4096^3 and 8192^3). (3) Nsight Compute at 8192^3 over our
# two FP8 SwiGLUs and cuBLASLt's per-tensor FP8 GEMM, one launch each
# (session 12's ncu-*.txt: 72% / 77% / 91% SM throughput).
# Logs go straight to $OUT, so a run cut by the call's limit keeps them.
# Session 28's planned-call3.sh (issue H's evidence) is a call of its own.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
o=$OUT/call1; rm -rf /tmp/b; mkdir -p /tmp/b "$o"
tar xJf .device/bins.tar.xz -C /tmp/b
GPU_ARGS=--quick PARTS="gpu user random" timeout 200 scripts/device-verify.sh /tmp/b "$o" > "$o/verify-check.txt" 2>&1
timeout 45 scripts/device-run.sh /tmp/b/gpu_random_maps > "$o/random-maps.log" 2>&1
echo "checks at $(el) s: $(tail -1 "$o/gpu.log") / $(tail -1 "$o/user.log") / $(tail -1 "$o/random.log") / maps $(tail -1 "$o/random-maps.log")"
grep -E "^FAIL" "$o/gpu.log" "$o/random-maps.log" | head -5
PARTS=fp8 timeout 120 scripts/device-verify.sh /tmp/b "$o" > "$o/verify-fp8.txt" 2>&1
echo "fp8 table at $(el) s"
# One launch each: the time_programs row interleaves 10 launches of a kernel at a time.
for run in "ours-plain:fp8_swiglu 8192:PipelinedFp8Promotion" "ours-blockwise:fp8_blockwise_swiglu 8192:PipelinedFp8Promotion" \
           "cublaslt-plain:fp8_swiglu 8192:nvjet"; do
  IFS=: read -r tag only kernel <<< "$run"
  timeout 60 scripts/device-run.sh ncu --kernel-name-base demangled --kernel-name "regex:$kernel" --launch-count 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section InstructionStats \
    /tmp/b/time_programs --programs-only --only "$only" > "$o/ncu-$tag.txt" 2>&1
  echo "ncu $tag exit $? at $(el) s"
done
grep -E "^    (Duration|SM Throughput|Elapsed Cycles|Executed Ipc Active|Executed Instructions  )" "$o"/ncu-*.txt | cut -c1-150
cat "$o/fp8.log"
