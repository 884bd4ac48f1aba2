#!/usr/bin/env bash
# Session 31, call 1 (issue H, the d = 8192 gate_up shape's GEMM): main's
# build with `matmul` compiled in all 24 bf16 configs (CODA_CONFIGS=all
# CODA_CONFIG_PROGRAMS=matmul), searched (every config x swizzle {1,8} x
# raster {M,N}, every timing logged) at the gate_up, qkv, down_proj shapes
# of d = 8192 and at 8192^3, 4096^3; cuBLAS (torch) at the same shapes.
# Ran in session 31 (after call2.sh, in one device call); .device/s31/coda-all
# is the stripped `coda` of that build.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
o=$OUT/call1; rm -rf /tmp/b; mkdir -p /tmp/b "$o"
cp .device/s31/coda-all /tmp/b/coda; chmod +x /tmp/b/coda
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > "$o/smi.txt" 2>&1
shapes="16384,57344,8192 16384,24576,8192 16384,8192,28672 8192,8192,8192 4096,4096,4096"
args=(); for s in $shapes; do args+=(--shape "$s"); done
CODA_LOG=debug CODA_TUNE_CACHE=$o/matmul-all.json timeout 240 scripts/device-run.sh /tmp/b/coda tune --program matmul "${args[@]}" > "$o/tune.log" 2>&1
echo "tune exit $? at $(el) s"
timeout 120 python3 bench/results/2026-12-05-s31/torch_mm.py $shapes > "$o/cublas.log" 2>&1
echo "cublas exit $? at $(el) s"
tar czf "$OUT/call1.tgz" -C "$OUT" call1
cat "$o/cublas.log"
grep "INFO" "$o/tune.log" | sed 's/.*coda tune: //'
# The five fastest choices per shape, and pp 128x128 c1x2's best.
python3 - "$o/tune.log" <<'PY'
import re, sys, collections
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.search(r"coda tune: \S+ (M=\d+ N=\d+ K=\d+): (.*) ([0-9.]+) ms$", line.strip())
    if m and "DEBUG" in line:
        rows[m.group(1)].append((float(m.group(3)), m.group(2)))
for shape, r in rows.items():
    r.sort()
    print(shape, "; ".join(f"{d} {t:.4f}" for t, d in r[:5]), "| pp_128x128_c1x2 best", next((f"{d} {t:.4f}" for t, d in r if "pp_128x128_c1x2" in d), "-"))
PY
