#!/usr/bin/env bash
# Session 22, call 3: where the LM-head forward op's time goes beside its
# GEMM (call 2: the fused kernel alone 0.955x our plain GEMM at 4096 x 32768
# x 4096; the op 1.060x cuBLASLt in call 1). Nsight Compute's duration of
# each kernel of the first head_forward calls in `coda bench --part llama
# --quick` (the rms_input map program, the finishers, the fused GEMM), the
# L2 left as it is between kernels (--cache-control none), clocks as they are.
set -uo pipefail
mkdir -p /tmp/b /tmp/o && tar xJf .device/bins.tar.xz -C /tmp/b
timeout 300 scripts/device-run.sh ncu --clock-control none --cache-control none --kernel-name-base demangled \
  --kernel-name "regex:rms_input__|rms_finish|lse_finish|cross_entropy_finish|_linear_cross_entropy__" \
  --launch-count 25 --metrics gpu__time_duration.sum,gpc__cycles_elapsed.max --csv \
  /tmp/b/coda bench --part llama --quick > /tmp/o/ncu-head.csv 2> /tmp/o/ncu-head.err
echo "ncu exit $?"
tar czf "$OUT/call3.tgz" -C /tmp/o .
grep -E "gpu__time_duration" /tmp/o/ncu-head.csv | awk -F'","' '{print $5 " | " $(NF)}' | sed 's/(.*//' | cut -c1-150 | head -30
