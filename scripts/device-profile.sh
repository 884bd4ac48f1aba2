#!/usr/bin/env bash
# Nsight Compute on the GPU machine, building nothing: for each untuned-suite
# program named, one launch of its kernel (after 3 warm ones) inside `coda
# bench --part untuned --quick --program P` (4096³), with the sections that
# say what bounds a GEMM with an epilogue (speed of light, compute workload,
# scheduler and warp-stall statistics, instruction mix, launch, occupancy,
# per-SASS-instruction samples). Per program: the details page (P.txt), the
# raw metrics (P.raw.csv, for bench/ncu_compare.py) and the SASS source page
# (P.sass.csv.xz, for bench/ncu_stalls.py). `linear` is our plain GEMM, the
# one kernel of its run whose epilogue is a plain tree (CUTLASS's
# Sm90TreeVisitor). Clocks are left as they are (METHOD.md).
# Usage: scripts/device-profile.sh BIN_DIR OUT_DIR PROGRAM...
set -uo pipefail
bin=$1 out=$2
shift 2
here=$(dirname "$0")
ncu=${NCU:-ncu}
mkdir -p "$out"
for p in "$@"; do
  if [[ $p == linear ]]; then program=relu2_bias kernel=TreeVisitor; else program=$p kernel="${p}__"; fi
  timeout 60 "$here/device-run.sh" "$ncu" --clock-control none --kernel-name-base demangled --kernel-name "regex:$kernel" \
    --launch-skip 3 --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis --section SchedulerStats \
    --section WarpStateStats --section InstructionStats --section LaunchStats --section Occupancy --section SourceCounters \
    -f -o "$out/$p" "$bin/coda" bench --part untuned --quick --program "$program" > "$out/$p.run.log" 2>&1
  echo "$p: ncu exit $?"
  [[ -f $out/$p.ncu-rep ]] || continue
  "$ncu" --import "$out/$p.ncu-rep" --page details > "$out/$p.txt" 2>&1
  "$ncu" --import "$out/$p.ncu-rep" --page raw --csv > "$out/$p.raw.csv" 2>&1
  "$ncu" --import "$out/$p.ncu-rep" --page source --csv --print-source sass 2>/dev/null | xz > "$out/$p.sass.csv.xz"
  rm -f "$out/$p.ncu-rep"
  grep -E "^    (Duration|SM Frequency|Elapsed Cycles)" "$out/$p.txt" | tr -s ' ' | paste -sd'|'
done
