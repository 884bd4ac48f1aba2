#!/usr/bin/env bash
# Session 29's planned call (no machine was lent in session 29): branch
# fp8-pipelined-promotion's build. (1) The checks: gpu --quick (every FP8
# program at K = 112, 272, 624 against f64, twice bitwise), gpu_user,
# gpu_random (a batch of map programs: built with CODA_RANDOM_MAPS=1
# CODA_RANDOM_PROGRAMS=8, as `gpu_random_maps`, beside CI's two). (2) The
# FP8 table (time_programs --only fp8: each FP8 program beside cuBLASLt's
# FP8 GEMM of its scaling and the bf16 program, interleaved). (3) Nsight
# Compute over the two FP8 SwiGLUs at 8192^3 beside cuBLASLt's per-tensor
# FP8 GEMM (session 12's ncu-*.txt: 72% / 77% / 91% SM throughput).
# (4) Session 28's planned evidence for issue H (planned-call3.sh), from
# its second step on.
# The binaries: scripts/device-pack.sh with EXTRA="gpu_random_maps=COPY",
# COPY the gpu_random binary of a CODA_RANDOM_MAPS=1 CODA_RANDOM_PROGRAMS=8
# build (see the script).
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf /tmp/b /tmp/o; mkdir -p /tmp/b /tmp/o
tar xJf .device/bins.tar.xz -C /tmp/b
GPU_ARGS=--quick PARTS="gpu user random" timeout 240 scripts/device-verify.sh /tmp/b /tmp/o > /tmp/o/verify-check.txt 2>&1
timeout 60 scripts/device-run.sh /tmp/b/gpu_random_maps > /tmp/o/random-maps.log 2>&1
echo "checks at $(el) s: $(tail -1 /tmp/o/gpu.log) / $(tail -1 /tmp/o/user.log) / $(tail -1 /tmp/o/random.log) / maps $(tail -1 /tmp/o/random-maps.log)"
grep -E "^FAIL" /tmp/o/gpu.log /tmp/o/random-maps.log | head -5
grep -c "fp8" /tmp/o/gpu.log
PARTS=fp8 timeout 150 scripts/device-verify.sh /tmp/b /tmp/o > /tmp/o/verify-fp8.txt 2>&1
echo "fp8 table at $(el) s"
for only in "fp8_swiglu 8192" "fp8_blockwise_swiglu 8192"; do
  tag=${only%% *}
  # The first two matching launches: ours (the fused row's warm-up), then cuBLASLt's FP8 GEMM.
  timeout 120 scripts/device-run.sh ncu --kernel-name-base demangled --kernel-name "regex:PipelinedFp8Promotion|nvjet" \
    --launch-count 2 --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
    --section InstructionStats \
    /tmp/b/time_programs --programs-only --only "$only" > /tmp/o/ncu-$tag.txt 2>&1
  echo "ncu $tag exit $? at $(el) s"
done
tar czf "$OUT/call1.tgz" -C /tmp/o .
grep -E "^    (Duration|SM Throughput|Elapsed Cycles|Executed Ipc Active|Executed Instructions  )|^  void|^  nvjet" /tmp/o/ncu-fp8_*.txt | cut -c1-150
cat /tmp/o/fp8.log
