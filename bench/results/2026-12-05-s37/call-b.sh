#!/usr/bin/env bash
# Session 37, call B (~150 s): why QK-norm + RoPE runs 1.16–1.87× its GEMM
# (call A, time_programs --only qk_norm): Nsight Compute of the kit's
# qk_norm_rope beside coda-llama's linear_rowscale_rope (RoPE alone) in the
# same two configs at the training run's qkv GEMM (8192 × 3072 × 2048) and
# at 8192 × 24576 × 8192, one launch each after warm-up, with the SASS
# source page for the stall samples. Carry [".device"].
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
o=$OUT/call-b; rm -rf /tmp/b /tmp/r; mkdir -p /tmp/b /tmp/r "$o"
tar xJf .device/bins.tar.xz -C /tmp/b
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
for k in "qk_norm_rope pp_128x128_c1x2 8192,3072,2048|qk_norm_rope" "llama rowscale_rope pp_128x128_c1x2 8192,3072,2048|linear_rowscale_rope" \
         "qk_norm_rope coop_128x256_c1x1 8192,3072,2048|qk_norm_rope" "llama rowscale_rope coop_128x256_c1x1 8192,3072,2048|linear_rowscale_rope" \
         "qk_norm_rope pp_128x128_c1x2 8192,24576,8192|qk_norm_rope" "llama rowscale_rope pp_128x128_c1x2 8192,24576,8192|linear_rowscale_rope"; do
  (( $(el) > 420 )) && { echo "stopping at $(el) s"; break; }
  row=${k%%|*}; regex=${k##*|}; tag=$(echo "$row" | tr ' ,' '__')
  timeout 60 scripts/device-run.sh ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:$regex" \
    --launch-skip 40 --launch-count 1 --section SpeedOfLight --section SchedulerStats --section WarpStateStats --section InstructionStats \
    --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis --section SourceCounters -f -o /tmp/r/$tag \
    /tmp/b/time_programs --programs-only --quick --only "$row" > "$o/$tag.run.log" 2>&1
  [[ -f /tmp/r/$tag.ncu-rep ]] || { echo "$tag: no report"; tail -3 "$o/$tag.run.log"; continue; }
  timeout 20 ncu --import /tmp/r/$tag.ncu-rep --page details > "$o/$tag.txt" 2>&1
  timeout 20 ncu --import /tmp/r/$tag.ncu-rep --page source --csv --print-source sass 2>/dev/null | xz > "$o/$tag.sass.csv.xz"
  echo "== $tag at $(el) s: $(grep -E '^    (Elapsed Cycles|Duration|SM Frequency|Dynamic Shared Memory Per Block|Issue Slots Busy|No Eligible)' "$o/$tag.txt" | tr -s ' ' | paste -sd'|')"
  python3 bench/ncu_stalls.py "$o/$tag.sass.csv.xz" 2>&1 | tail -n 14
done
tar czf "$OUT/call-b.tgz" -C "$OUT" call-b
echo "done at $(el) s"
