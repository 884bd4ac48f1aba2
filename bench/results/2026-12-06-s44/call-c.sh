#!/usr/bin/env bash
# Session 44, call C (carry [".device"], ≤ 590 s): on an H200, call A
# (call-a.sh) instead. On an H100: is the LM head's input-gradient GEMM
# slower than cuBLAS's (call A's profile: +16% at d = 4096) for want of a
# config we do not compile? `.device/exp3/coda.xz` is main built with
# CODA_CONFIGS=all for `rmsnorm_backward_head` and `matmul` (24 configs
# each); both searched at the tail's dX shapes (M = 4096 rows of a chunk,
# N = d, K = V = 32768), every config × swizzle × raster logged, against
# cuBLASLt's bare GEMM of the same shape (`time_programs`-free: `coda
# bench --part llama --quick` has none at these shapes, so the plain
# `matmul` is the in-process yardstick; session 31 put our `matmul` at
# cuBLAS's on the d = 8192 block's shapes).
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { local l=$(( $1 - $(el) )); echo $(( l > 1 ? l : 1 )); }
nvidia-smi --query-gpu=name --format=csv,noheader > /tmp/gpu.txt 2>&1
if ! grep -q H100 /tmp/gpu.txt; then exec bash bench/results/2026-12-06-s44/call-a.sh; fi
o=$OUT/c; rm -rf /tmp/e; mkdir -p /tmp/e "$o"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
xz -dc .device/exp3/coda.xz > /tmp/e/coda && chmod +x /tmp/e/coda
for p in rmsnorm_backward_head matmul; do
  echo "[]" > /tmp/e/cache-$p.json
  CODA_LOG=debug CODA_TUNE_CACHE=/tmp/e/cache-$p.json timeout "$(left 560)" scripts/device-run.sh /tmp/e/coda tune \
    --program coda-llama::$p --shape 4096,4096,32768 --shape 4096,8192,32768 > "$o/tune-$p.log" 2>&1
  echo "== $p exit $? at $(el) s"; grep -v DEBUG "$o/tune-$p.log" | grep " M=" | sed 's/\x1b\[[0-9;]*m//g' | tail -3
done
PYTHONPATH=bench python3 - "$o"/tune-*.log > "$o/per-config.txt" 2>&1 <<'PY'
import math, sys
from collections import defaultdict
from tune_log import timings
best = defaultdict(dict)
for prog, m, n, k, config, _, _, ms in timings(sys.argv[1:]):
    best[(prog, m, n, k)][config] = min(ms, best[(prog, m, n, k)].get(config, math.inf))
for key, per in sorted(best.items()):
    top = sorted(per.items(), key=lambda c: c[1])
    print(*key, "|", " ".join(f"{c}={t:.4f}" for c, t in top[:8]), "| pp_128x128_c1x2", f"{per.get('pp_128x128_c1x2', math.nan):.4f}")
PY
cat "$o/per-config.txt"
tar czf "$OUT/c.tgz" -C "$OUT" c
echo "done at $(el) s"
