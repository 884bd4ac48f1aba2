#!/usr/bin/env bash
# Session 45, call D (carry [".device"], ≤ 400 s). On an H200: session 44's
# call A instead. On an H100: call C found the d = 2048 block's fused
# GEMMs no slower than our plain GEMM in their tile (ping-pong 128 × 128
# 1 × 2), all bound by the L2, and cuBLAS in larger tiles. Is there a
# config we do not compile in which our plain GEMM reaches cuBLAS's at
# the block's shapes (16384 tokens, d = 2048, ffn = 8192: gate/up, the
# SwiGLU backward, down)?
# `.device/s45/exp-all/coda.xz`: main built with CODA_CONFIGS=all for
# `matmul` (24 configs), each config × swizzle × raster timed by `coda
# tune`; then cuBLAS's bare GEMM at the same shapes in the same call
# (cublas_shapes.py: torch.matmul, rotated inputs, events).
# Prediction: a 2 × 2 cluster (operand tiles multicast to four CTAs)
# or a 256 × 128 cooperative tile a few % ahead of ping-pong 128 × 128
# 1 × 2 at K = 2048, still short of cuBLAS's.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { local l=$(( $1 - $(el) )); echo $(( l > 1 ? l : 1 )); }
nvidia-smi --query-gpu=name --format=csv,noheader > /tmp/gpu.txt 2>&1
# ANY_GPU=1: run here on an H200 too (when too little device time is left for call A).
if ! grep -q H100 /tmp/gpu.txt && [[ -z ${ANY_GPU:-} ]]; then exec bash bench/results/2026-12-06-s44/call-a.sh; fi
o=$OUT/d; rm -rf /tmp/e; mkdir -p /tmp/e "$o"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
if [[ -z ${CLUSTERS_ONLY:-} ]]; then  # CLUSTERS_ONLY=1: the second part alone
xz -dc .device/s45/exp-all/coda.xz > /tmp/e/coda && chmod +x /tmp/e/coda
shapes="16384,16384,2048 16384,8192,2048 16384,2048,8192"
args=""; for s in $shapes; do args="$args --shape $s"; done
echo "[]" > /tmp/e/cache.json
CODA_LOG=debug CODA_TUNE_CACHE=/tmp/e/cache.json timeout "$(left 130)" scripts/device-run.sh /tmp/e/coda tune \
  --program coda-llama::matmul $args > "$o/tune-matmul.log" 2>&1
echo "== matmul exit $? at $(el) s"; grep -v DEBUG "$o/tune-matmul.log" | grep " M=" | sed 's/\x1b\[[0-9;]*m//g' | tail -6
timeout "$(left 170)" python3 bench/results/2026-12-06-s45/cublas_shapes.py $shapes > "$o/cublas.txt" 2>&1
echo "== cuBLAS at $(el) s"; cat "$o/cublas.txt"
PYTHONPATH=bench python3 - "$o"/tune-matmul.log > "$o/per-config.txt" 2>&1 <<'PY'
import math, sys
from collections import defaultdict
from tune_log import timings
best = defaultdict(dict)
for prog, m, n, k, config, _, _, ms in timings(sys.argv[1:]):
    best[(m, n, k)][config] = min(ms, best[(m, n, k)].get(config, math.inf))
for key, per in sorted(best.items()):
    top = sorted(per.items(), key=lambda c: c[1])
    print("x".join(map(str, key)), "|", " ".join(f"{c}={t:.4f}" for c, t in top[:8]), "| pp_128x128_c1x2", f"{per.get('pp_128x128_c1x2', math.nan):.4f}")
PY
cat "$o/per-config.txt"
fi
# The block's fused programs at their d = 2048 shapes in ping-pong 128 × 128
# with clusters 1 × 2 (the H100 file's pick), 2 × 1 and 2 × 2
# (`.device/s45/exp-clusters/coda.xz`: main with those three for them).
xz -dc .device/s45/exp-clusters/coda.xz > /tmp/e/coda-cl && chmod +x /tmp/e/coda-cl
echo "[]" > /tmp/e/cache-cl.json
for ps in "linear_rowscale_swiglu_save 16384,16384,2048" "linear_residual_rms_partial 16384,2048,8192 16384,2048,2048" \
          "linear_rowscale_rope 16384,3072,2048" "linear_dswiglu 16384,8192,2048" "rmsnorm_backward 16384,2048,16384 16384,2048,3072"; do
  set -- $ps; p=$1; shift; a=""; for s in "$@"; do a="$a --shape $s"; done
  (( $(el) > 370 )) && { echo "stopping before $p at $(el) s"; break; }
  CODA_LOG=debug CODA_TUNE_CACHE=/tmp/e/cache-cl.json timeout "$(left 390)" scripts/device-run.sh /tmp/e/coda-cl tune \
    --program coda-llama::$p $a >> "$o/tune-clusters.log" 2>&1
  echo "== $p at $(el) s"
done
PYTHONPATH=bench python3 - "$o"/tune-clusters.log > "$o/per-config-clusters.txt" 2>&1 <<'PY'
import math, sys
from collections import defaultdict
from tune_log import timings
best = defaultdict(dict)
for prog, m, n, k, config, _, _, ms in timings(sys.argv[1:]):
    best[(prog.split("::")[1], m, n, k)][config] = min(ms, best[(prog.split("::")[1], m, n, k)].get(config, math.inf))
for key, per in sorted(best.items()):
    top = sorted(per.items(), key=lambda c: c[1])
    print(*key, "|", " ".join(f"{c}={t:.4f}" for c, t in top), "| best/c1x2", f"{top[0][1] / per.get('pp_128x128_c1x2', math.nan):.3f}")
PY
cat "$o/per-config-clusters.txt"
tar czf "$OUT/d.tgz" -C "$OUT" d
echo "done at $(el) s"
