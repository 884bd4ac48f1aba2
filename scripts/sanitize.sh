#!/usr/bin/env bash
# compute-sanitizer over every kernel the default build compiles, on the GPU
# machine, building nothing: the GPU test binary in `--sanitize` mode (every
# program × compiled config at a small ragged shape, swizzle 8 and clusters,
# the aux finishers, the Llama block forward/backward and LM-head tail at
# small shapes, the numeric edge cases), the random batch (`gpu_random
# --sanitize`) and the untuned suite's programs (`gpu_user --sanitize`),
# under each tool, all runs at once. Reports are attributed to
# our kernels or to vendor (cuBLAS) kernels by scripts/sanitize_summary.py.
# Usage: [SANITIZE_BINARIES="gpu gpu_random gpu_user"] scripts/sanitize.sh BIN_DIR OUT_DIR [TOOL...]
#   (tools: memcheck racecheck synccheck initcheck, the default all four)
set -uo pipefail
bin=$1 out=$2
shift 2
tools=${*:-memcheck racecheck synccheck initcheck}
cs=${COMPUTE_SANITIZER:-/usr/local/cuda/bin/compute-sanitizer}
limit=${SANITIZE_TIMEOUT:-540}
here=$(dirname "$0")
mkdir -p "$out"
for tool in $tools; do
  for target in ${SANITIZE_BINARIES:-gpu gpu_random gpu_user}; do
    (
      start=$(date +%s)
      timeout "$limit" "$here/device-run.sh" "$cs" --tool "$tool" --print-limit 200 \
        "$bin/$target" --sanitize > "$out/$tool-$target.log" 2>&1
      echo "$? $(( $(date +%s) - start ))" > "$out/$tool-$target.rc"
    ) &
  done
done
wait
python3 "$here/sanitize_summary.py" "$out"
