#!/usr/bin/env bash
# Session 27, call 5: Nsight Compute over the two map programs at the
# training run's shapes (rope_backward 8192 x 3072, cross_entropy_grad
# 4096 x 32000): memory-bound or issue-bound? One launch each (the search's third).
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf /tmp/o /tmp/b; mkdir -p /tmp/o /tmp/b
tar xJf .device/bins.tar.xz -C /tmp/b
for k in rope_backward:8192,3072,8 cross_entropy_grad_:4096,32000,8; do
  name=${k%%:*}; shape=${k#*:}; prog=coda-llama::${name%_}
  CODA_TUNE_CACHE=/tmp/o/ncu-$name.json timeout 120 scripts/device-run.sh ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:${name}_" \
    --launch-skip 2 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section SchedulerStats \
    --section WarpStateStats --section InstructionStats --section LaunchStats --section Occupancy \
    -f -o /tmp/o/ncu-$name /tmp/b/coda tune --program "$prog" --shape "$shape" > /tmp/o/ncu-$name.run.log 2>&1
  echo "ncu $name exit $? at $(el) s"
  [[ -f /tmp/o/ncu-$name.ncu-rep ]] || { tail -5 /tmp/o/ncu-$name.run.log; continue; }
  ncu --import /tmp/o/ncu-$name.ncu-rep --page details > /tmp/o/ncu-$name.txt 2>&1
  ncu --import /tmp/o/ncu-$name.ncu-rep --page raw --csv > /tmp/o/ncu-$name.raw.csv 2>&1
  rm -f /tmp/o/ncu-$name.ncu-rep
done
tar czf "$OUT/call5.tgz" -C /tmp/o .
python3 bench/ncu_compare.py /tmp/o/ncu-*.raw.csv 2>&1 | head -30
python3 bench/ncu_compare.py --grep 'dram__throughput.avg.pct|dram__bytes_read.sum$|dram__bytes_write.sum$|gpu__compute_memory_throughput.avg.pct|lts__t_bytes.sum$|sm__throughput.avg.pct|launch__registers|launch__grid_size|stall_(long|short|barrier|membar|sleeping|lg_throttle|drain)' /tmp/o/ncu-*.raw.csv 2>&1 | head -30
