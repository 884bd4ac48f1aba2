#!/usr/bin/env bash
# Session 25, call 4: Nsight Compute (scripts/device-profile.sh) over the
# 4096^3 kernels of swiglu_backward with its pairs staged by TMA (this build)
# and loaded by each thread (session 24's binary), beside our plain GEMM:
# do the mainloop's late stage fills (session 24: `long_sb` at the stage
# wait 915 against linear's 690) and its lost issue slots go with the
# per-thread loads (bench/ncu_stalls.py's region lines)?
set -uo pipefail
rm -rf /tmp/b /tmp/bo /tmp/o; mkdir -p /tmp/b /tmp/bo /tmp/o && tar xJf .device/bins.tar.xz -C /tmp/b
xz -dc .device/coda_s24.xz > /tmp/bo/coda && chmod +x /tmp/bo/coda
scripts/device-profile.sh /tmp/b /tmp/o/ncu linear swiglu_backward > /tmp/o/profile.log 2>&1
scripts/device-profile.sh /tmp/bo /tmp/o/ncu-s24 linear swiglu_backward >> /tmp/o/profile.log 2>&1
for d in ncu ncu-s24; do
  for p in linear swiglu_backward; do
    echo "== $d $p: $(grep -E '^    (Elapsed Cycles|SM Frequency)' /tmp/o/$d/$p.txt | tr -s ' ' | paste -sd'|')"
    python3 bench/ncu_stalls.py /tmp/o/$d/$p.sass.csv.xz | tail -n 3
  done
done | tee /tmp/o/regions.txt
tar czf "$OUT/call4.tgz" -C /tmp/o .
cat /tmp/o/profile.log
