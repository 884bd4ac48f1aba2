#!/usr/bin/env bash
# Session 28, call 1: map programs' 64-column epilogue subtiles (branch
# map-wide-subtile). The checks (gpu --quick, gpu_user, gpu_random) on the
# branch's build; the three changed maps searched at their shapes with main's
# build (old) and the branch's (new), alternated twice, each into an empty
# cache; the shipped searches of those three maps re-run on the branch's
# build; Nsight Compute over the new rope_backward / cross_entropy_grad at
# the training shapes (session 27's call 5 profiled the old ones).
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf /tmp/b /tmp/bo /tmp/o; mkdir -p /tmp/b /tmp/bo /tmp/o
tar xJf .device/bins.tar.xz -C /tmp/b && tar xJf .device/old/bins-main.tar.xz -C /tmp/bo
GPU_ARGS=--quick PARTS="gpu user random" timeout 200 scripts/device-verify.sh /tmp/b /tmp/o > /tmp/o/verify-check.txt 2>&1
echo "checks done at $(el) s"
ab() { # $1 build dir, $2 log
  for p in "rope_backward --shape 8192,3072,8 --shape 16384,3072,8" \
           "cross_entropy_grad --shape 4096,32000,8 --shape 4096,32768,8" \
           "rms_input --shape 16384,2048,8 --shape 8192,8192,8"; do
    # shellcheck disable=SC2086
    CODA_TUNE_CACHE=/tmp/o/ab-cache-$RANDOM.json timeout 60 scripts/device-run.sh $1/coda tune --program coda-llama::$p >> $2 2>&1
  done
}
for run in 1 2; do
  for w in old new; do
    bin=/tmp/b; [[ $w == old ]] && bin=/tmp/bo
    ab $bin /tmp/o/ab-$w-$run.log; echo "ab $w $run at $(el) s"
  done
done
mkdir -p /tmp/o/tune
for p in rope_backward cross_entropy_grad rms_input; do
  TUNE_ONLY=$p PARTS=tune timeout 120 scripts/device-verify.sh /tmp/b /tmp/o/tune > /tmp/o/tune/verify-$p.txt 2>&1
done
echo "re-search done at $(el) s"
for k in rope_backward:8192,3072,8 cross_entropy_grad_:4096,32000,8; do
  name=${k%%:*}; shape=${k#*:}; prog=coda-llama::${name%_}
  CODA_TUNE_CACHE=/tmp/o/ncu-$name.json timeout 120 scripts/device-run.sh ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:${name}_" \
    --launch-skip 2 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section SchedulerStats \
    --section WarpStateStats --section InstructionStats --section LaunchStats --section Occupancy \
    -f -o /tmp/o/ncu-$name /tmp/b/coda tune --program "$prog" --shape "$shape" > /tmp/o/ncu-$name.run.log 2>&1
  [[ -f /tmp/o/ncu-$name.ncu-rep ]] || { tail -5 /tmp/o/ncu-$name.run.log; continue; }
  ncu --import /tmp/o/ncu-$name.ncu-rep --page raw --csv > /tmp/o/ncu-$name.raw.csv 2>&1
  ncu --import /tmp/o/ncu-$name.ncu-rep --page details > /tmp/o/ncu-$name.txt 2>&1
  rm -f /tmp/o/ncu-$name.ncu-rep
done
echo "ncu done at $(el) s"
tar czf "$OUT/call1.tgz" -C /tmp/o .
grep -h "passed, \|FAILED" /tmp/o/gpu.log /tmp/o/user.log /tmp/o/random.log 2>/dev/null | tail -6
tail -4 /tmp/o/verify-check.txt
for f in /tmp/o/ab-*.log; do echo "== $f"; grep -o "coda-llama::[a-z_]* M=.*choices)" $f; done
grep -ho "coda-llama::[a-z_]* M=.*choices)" /tmp/o/tune/tune.log
python3 bench/ncu_compare.py --grep 'gpu__time_duration.sum|dram__throughput.avg.pct|sm__inst_issued.avg.pct_of_peak_sustained_active|smsp__warps_active.avg.per_cycle_active|smsp__warps_eligible.avg.per_cycle_active|launch__registers|launch__shared_mem_per_block_dynamic' /tmp/o/ncu-*.raw.csv 2>&1 | head -20
