#!/usr/bin/env bash
# Nsight Compute on the GPU machine, building nothing: for each program
# named, one launch of its kernel (after 3 warm ones) inside `coda bench
# --part untuned --quick` (4096³), with the sections that say what bounds a
# GEMM with an epilogue (speed of light, compute and memory workload, warp
# stall reasons, launch and occupancy); the report and its text per program.
# Clocks are left as they are (METHOD.md). `_linear` is our plain GEMM.
# Usage: scripts/device-profile.sh BIN_DIR OUT_DIR PROGRAM...
set -uo pipefail
bin=$1 out=$2
shift 2
here=$(dirname "$0")
ncu=${NCU:-ncu}
mkdir -p "$out"
for p in "$@"; do
  "$here/device-run.sh" "$ncu" --clock-control none --kernel-name-base demangled --kernel-name "regex:${p}__" \
    --launch-skip 3 --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats --section Occupancy \
    -f -o "$out/${p#_}" "$bin/coda" bench --part untuned --quick > "$out/${p#_}.run.log" 2>&1
  echo "$p: ncu exit $?"
  "$ncu" --import "$out/${p#_}.ncu-rep" --page details > "$out/${p#_}.txt" 2>&1
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per Thread|Achieved Occupancy" "$out/${p#_}.txt" | head -8
done
