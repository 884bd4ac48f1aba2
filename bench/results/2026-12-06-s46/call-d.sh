#!/usr/bin/env bash
# Session 46, call D (carry [".device"], ≤ 200 s; the budget's last try).
# On an H200: call C without compare (the four programs' searches). On an
# H100: do the fused kernels hold a lower SM clock than the plain GEMM
# under sustained launches (call A: +6% / +10% time where Nsight Compute,
# one launch at a time, counted 2.6% / 4.4% fewer cycles)? `coda tune` of
# the plain `matmul` and of the SwiGLU-save at 16384 × 16384 × 2048, and
# of `matmul` and the residual + RMS at 16384 × 2048 × 8192, alternated
# twice, with nvidia-smi sampling the SM clock and the power every 50 ms.
# Prediction: the fused kernels' mean clock 3–8% below the plain GEMM's.
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader > /tmp/gpu.txt 2>&1; cat /tmp/gpu.txt
grep -q H100 /tmp/gpu.txt || exec bash bench/results/2026-12-06-s46/call-c.sh
o=$OUT/d; mkdir -p /tmp/b "$o"; tar xJf .device/bins.tar.xz -C /tmp/b
for round in 1 2; do
  for ps in "matmul 16384,16384,2048" "linear_rowscale_swiglu_save 16384,16384,2048" "matmul 16384,2048,8192" "linear_residual_rms_partial 16384,2048,8192"; do
    set -- $ps; tag="$round-$1-$2"
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 50 > "$o/smi-$tag.csv" 2>&1 & smi=$!
    echo "[]" > /tmp/cache.json
    CODA_TUNE_CACHE=/tmp/cache.json timeout 40 scripts/device-run.sh /tmp/b/coda tune --program coda-llama::$1 --shape $2 > "$o/tune-$tag.log" 2>&1
    kill $smi; wait $smi 2>/dev/null
    python3 - "$o/smi-$tag.csv" "$tag" <<'PY'
import sys
rows = [l.split(",") for l in open(sys.argv[1]) if l.count(",") == 3]
busy = [(float(c.split()[0]), float(p.split()[0])) for _, c, p, _ in rows if float(p.split()[0]) > 300]
if busy:
    print(f"{sys.argv[2]:50} samples>300W {len(busy):4d}  SM MHz mean {sum(c for c, _ in busy) / len(busy):7.1f}  W mean {sum(p for _, p in busy) / len(busy):6.1f}")
else:
    print(sys.argv[2], "no busy samples")
PY
    grep -o "swizzle.*choices)" "$o/tune-$tag.log" | sed 's/\x1b\[[0-9;]*m//g' | tail -1
  done
done | tee "$o/summary.txt"
tar czf "$OUT/d.tgz" -C "$OUT" d && rm -rf "$o"
