#!/usr/bin/env bash
# Session 47, call B (carry [".device"], ≤ 590 s, or LIMIT + 10 with each
# step's deadline scaled to LIMIT (default 580 s); on an H200 only):
# session 44's call B on this build, without its experiment build's
# four-tile search (that build is not in .device any more), with call A's
# search (.device/s47/tuning.json) in front of the shipped file:
#  1. bench/block_profile.py: the LM-head tail's kernels (d = 4096, 4096
#     tokens; d = 8192, 8192 tokens) beside cuBLAS's three GEMMs, and the
#     d = 8192 block's twelve, GPU time per kernel (torch.profiler).
#  2. Nsight Compute (speed of light, clocks, warp states), one launch each
#     in the config the H200 runs: the tail's fused GEMMs
#     (`linear_cross_entropy_save` 4096 × 32768 × 4096,
#     `rmsnorm_backward_head` 4096 × 4096 × 32768) and its gradient map
#     (`cross_entropy_grad` 4096 × 32768), the d = 8192 block's SwiGLU-save
#     (16384 × 57344 × 8192) and RMSNorm backward (16384 × 8192 × 57344),
#     each beside our plain GEMM (`matmul`) of its shape in the same tile.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
LIMIT=${LIMIT:-580}
left() { local l=$(( $1 - $(el) )); echo $(( l > 1 ? l : 1 )); }
o=$OUT/b; rm -rf /tmp/b /tmp/py /tmp/r; mkdir -p /tmp/b /tmp/py /tmp/r "$o"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
if grep -q H100 "$o/gpu.txt"; then echo "an H100: nothing to do"; exit 0; fi
tar xJf .device/bins.tar.xz -C /tmp/b
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/py .device/coda_rs-*.whl > "$o/pip.log" 2>&1
cache=/tmp/r/cache.json; [[ -f .device/s47/tuning.json ]] && cp .device/s47/tuning.json "$cache" || echo "[]" > "$cache"
export CODA_TUNE_CACHE=$cache
# ONLY (a regex on the tags below) profiles those kernels alone, without
# the block profiles (session 49: the plain `matmul` launches).
[[ -n ${ONLY:-} ]] || for a in "--vocab 32768 --d 4096 --tokens 4096" "--vocab 32768 --d 8192 --tokens 8192" "--d 8192 --ffn 28672"; do
  (( $(el) > LIMIT * 35 / 100 )) && { echo "stopping at $(el) s"; break; }
  tag=$(echo "$a" | tr -d ' -')
  PYTHONPATH=/tmp/py timeout 80 python3 bench/block_profile.py $a --steps 3 > "$o/profile-$tag.log" 2>&1
  echo "== profile $a exit $? at $(el) s"; grep -A14 "by kernel" "$o/profile-$tag.log" | head -30
done
prof() {  # program shape kernel-regex tag
  local prog=$1 shape=$2 regex=$3 tag=$4
  [[ -n ${ONLY:-} && ! $tag =~ $ONLY ]] && return
  (( $(el) > LIMIT - 40 )) && { echo "stopping before $tag at $(el) s"; return; }
  echo "[]" > /tmp/r/c-$tag.json
  CODA_TUNE_CACHE=/tmp/r/c-$tag.json timeout "$(left $(( LIMIT - 12 )))" scripts/device-run.sh ncu --clock-control none --kernel-name-base demangled \
    --kernel-name "regex:$regex" --launch-skip 3 --launch-count 1 --section SpeedOfLight --section SchedulerStats \
    --section WarpStateStats --section Occupancy --section MemoryWorkloadAnalysis -f -o /tmp/r/$tag \
    /tmp/b/coda tune --program "$prog" --shape "$shape" > "$o/$tag.run.log" 2>&1
  [[ -f /tmp/r/$tag.ncu-rep ]] || { echo "$tag: no report"; tail -3 "$o/$tag.run.log"; return; }
  timeout 20 ncu --import /tmp/r/$tag.ncu-rep --page details > "$o/$tag.txt" 2>&1
  echo "== $tag at $(el) s: $(grep -E '^    (Duration|SM Frequency|Elapsed Cycles|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput)' "$o/$tag.txt" | tr -s ' ' | paste -sd'|')"
}
pp=pp_128x128_c1x2
# The plain `matmul` runs CUTLASS's own accumulator fetch, so its kernel's
# name holds no program name (session 49's call B matched none): match its
# schedule, cluster and tile instead.
plain() {  # config, e.g. pp_128x128_c1x2 -> a regex on the demangled name
  local c=$1; local s=${c%%_*} t=${c#*_}; t=${t%%_*}; local k=${c##*_c}
  local sched=$([[ $s == pp ]] && echo Pingpong || echo Cooperative)
  echo "cute::C<\\(int\\)${k%x*}>, cute::C<\\(int\\)${k#*x}>, cute::C<\\(int\\)1>>, cutlass::gemm::KernelTmaWarpSpecialized$sched>, cute::tuple<cute::C<\\(int\\)${t%x*}>, cute::C<\\(int\\)${t#*x}>.*coda::sm90::PassThrough"
}
prof coda-llama::linear_cross_entropy_save 4096,32768,4096 "_linear_cross_entropy_save__$pp" ce_save-4096
prof coda-llama::matmul 4096,32768,4096 "$(plain $pp)" matmul-4096x32768x4096
prof coda-llama::rmsnorm_backward_head 4096,4096,32768 "_rmsnorm_backward_head__$pp" norm_bwd_head-4096
prof coda-llama::matmul 4096,4096,32768 "$(plain $pp)" matmul-4096x4096x32768
prof coda-llama::cross_entropy_grad 4096,32768,8 "_cross_entropy_grad__coop_128x256_c1x1" ce_grad-4096
sw=$(python3 -c "import json;print(next((e['config'] for e in json.load(open('$cache')) if e['program'].endswith('::linear_rowscale_swiglu_save') and e['n']==57344 and 'H200' in e['gpu']),'$pp'))")
prof coda-llama::linear_rowscale_swiglu_save 16384,57344,8192 "_linear_rowscale_swiglu_save__$sw" swiglu_save-8192
prof coda-llama::matmul 16384,57344,8192 "$(plain $sw)" matmul-16384x57344x8192
rb=$(python3 -c "import json;print(next((e['config'] for e in json.load(open('$cache'))+json.load(open('coda-llama/tuning/nvidia-h200.json')) if e['program'].endswith('::rmsnorm_backward') and e['k']==57344 and 'H200' in e['gpu']),'$pp'))")
prof coda-llama::rmsnorm_backward 16384,8192,57344 "_rmsnorm_backward__$rb" norm_bwd-8192
prof coda-llama::matmul 16384,8192,57344 "$(plain $rb)" matmul-16384x8192x57344
tar czf "$OUT/b.tgz" -C "$OUT" b
echo "done at $(el) s"
