#!/usr/bin/env bash
# Session 24, call 4: Nsight Compute (scripts/device-profile.sh) over this
# build's 4096^3 kernels of the two suite programs still over 1.02x
# (bias_gelu_exact, swiglu_backward), softplus_bias (the same structure as
# bias_gelu_exact: a column bias, a transcendental, an f32 tile) and our plain
# GEMM, to see whether their mainloop warps still lose issue slots to the
# epilogue (bench/ncu_stalls.py's region lines).
set -uo pipefail
rm -rf /tmp/b /tmp/o; mkdir -p /tmp/b /tmp/o && tar xJf .device/bins.tar.xz -C /tmp/b
scripts/device-profile.sh /tmp/b /tmp/o/ncu linear bias_gelu_exact swiglu_backward softplus_bias > /tmp/o/profile.log 2>&1
for p in linear bias_gelu_exact swiglu_backward softplus_bias; do
  echo "== $p: $(grep -E '^    (Elapsed Cycles|SM Frequency)' /tmp/o/ncu/$p.txt | tr -s ' ' | paste -sd'|')"
  python3 bench/ncu_stalls.py /tmp/o/ncu/$p.sass.csv.xz | tail -n 3
done | tee /tmp/o/regions.txt
tar czf "$OUT/call4.tgz" -C /tmp/o .
cat /tmp/o/profile.log
