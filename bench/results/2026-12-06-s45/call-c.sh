#!/usr/bin/env bash
# Session 45, call C (carry [".device"], ≤ 400 s). On an H200: session 44's
# call A instead. On an H100: Nsight Compute of the d = 2048 block's three
# fused GEMMs furthest over cuBLAS's in call B's profile (+19–27%), each
# beside our plain GEMM (`matmul`) of its shape in the same config (the
# H100 file's pick, ping-pong 128 × 128 1 × 2): the SwiGLU-save at 16384 ×
# 16384 × 2048, `linear_dswiglu` at 16384 × 8192 × 2048, the down
# projection's residual + RMS at 16384 × 2048 × 8192. One launch each
# (speed of light, warp states, scheduler), main's `coda` (.device/bins).
# (The plain GEMM is CUTLASS's kernel with a PassThrough epilogue, no program
# namespace: its first run's regex `_matmul__pp_…` matched nothing; the three
# matmul lines ran again with this one.)
# Prediction: the fused kernels' issue slots and warp stalls at the
# ping-pong order barrier (the other warpgroup waiting for this one's
# epilogue) above the plain GEMM's, their tensor-core throughput below it.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { local l=$(( $1 - $(el) )); echo $(( l > 1 ? l : 1 )); }
nvidia-smi --query-gpu=name --format=csv,noheader > /tmp/gpu.txt 2>&1
if ! grep -q H100 /tmp/gpu.txt; then exec bash bench/results/2026-12-06-s44/call-a.sh; fi
o=$OUT/c; rm -rf /tmp/b /tmp/r; mkdir -p /tmp/b /tmp/r "$o"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
tar xJf .device/bins.tar.xz -C /tmp/b
prof() {  # program shape kernel-regex tag
  local prog=$1 shape=$2 regex=$3 tag=$4
  (( $(el) > 340 )) && { echo "stopping before $tag at $(el) s"; return; }
  echo "[]" > /tmp/r/c-$tag.json
  CODA_TUNE_CACHE=/tmp/r/c-$tag.json timeout "$(left 380)" scripts/device-run.sh ncu --clock-control none --kernel-name-base demangled \
    --kernel-name "regex:$regex" --launch-skip 3 --launch-count 1 --section SpeedOfLight --section SchedulerStats \
    --section WarpStateStats --section ComputeWorkloadAnalysis -f -o /tmp/r/$tag \
    /tmp/b/coda tune --program "$prog" --shape "$shape" > "$o/$tag.run.log" 2>&1
  [[ -f /tmp/r/$tag.ncu-rep ]] || { echo "$tag: no report"; tail -3 "$o/$tag.run.log"; return; }
  timeout 20 ncu --import /tmp/r/$tag.ncu-rep --page details > "$o/$tag.txt" 2>&1
  echo "== $tag at $(el) s: $(grep -E '^    (Duration|SM Frequency|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|No Eligible|Warp Cycles Per Issued)' "$o/$tag.txt" | tr -s ' ' | paste -sd'|')"
}
pp=pp_128x128_c1x2
prof coda-llama::linear_rowscale_swiglu_save 16384,16384,2048 "_linear_rowscale_swiglu_save__$pp" swiglu_save
prof coda-llama::matmul 16384,16384,2048 "KernelTmaWarpSpecializedPingpong.*PassThrough" matmul-16384x16384x2048
prof coda-llama::linear_dswiglu 16384,8192,2048 "_linear_dswiglu__$pp" dswiglu
prof coda-llama::matmul 16384,8192,2048 "KernelTmaWarpSpecializedPingpong.*PassThrough" matmul-16384x8192x2048
prof coda-llama::linear_residual_rms_partial 16384,2048,8192 "_linear_residual_rms_partial__$pp" residual_rms
prof coda-llama::matmul 16384,2048,8192 "KernelTmaWarpSpecializedPingpong.*PassThrough" matmul-16384x2048x8192
tar czf "$OUT/c.tgz" -C "$OUT" c
echo "done at $(el) s"
