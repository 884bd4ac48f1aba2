#!/usr/bin/env bash
# Session 41, call A (≤ 575 s), main's build at e979ab6 (.device/bins.tar.xz;
# every kernel as session 40 left it). In order of need:
# 1. `gpu --quick`: every check of this build on a GPU (session 40's
#    accumulation, sealed `Element`, aligned `RawTensor`s among them).
# 2. Issue I: the LM-head loss variants against the plain tail on the H200
#    (`bench/head_variants.py`, d = 2048 and 4096; last timed here in session 22).
# 3. Issue H's two op rows without a profile of their own (session 36's
#    compare.py: GEMM·r + RoPE at 4096 1.003×, the LM-head forward at 4096
#    1.007×): Nsight Compute of each in its shipped config beside our plain
#    GEMM (`coda-tests::linear`, ping-pong 128×128 1×2) at the same shape.
# 4. The group programs at full size (`gpu --only qk_norm`), with what is left.
# Carry [".device"].
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { local l=$(( $1 - $(el) )); echo $(( l > 1 ? l : 1 )); }
o=$OUT/call-a; rm -rf /tmp/b /tmp/py /tmp/r; mkdir -p /tmp/b /tmp/py /tmp/r "$o"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
tar xJf .device/bins.tar.xz -C /tmp/b

timeout 170 scripts/device-run.sh /tmp/b/gpu --quick > "$o/gpu.log" 2>&1
echo "gpu --quick exit $? at $(el) s: $(tail -1 "$o/gpu.log")"
grep -E "^FAIL" -A6 "$o/gpu.log" | head -20

python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/py .device/coda_rs-*.whl > "$o/pip.log" 2>&1
for h in 2048 4096; do
  PYTHONPATH=/tmp/py timeout "$(left $(( h == 2048 ? 255 : 335 )))" python3 bench/head_variants.py --hidden $h > "$o/head-variants-$h.log" 2>&1
  echo "== head variants d=$h exit $? at $(el) s"; tail -6 "$o/head-variants-$h.log"
done

# program, shape, kernel-name regex (its config), launches to skip (the search's first ones).
for k in "coda-llama::linear_rowscale_rope 4096,12288,4096 _linear_rowscale_rope__pp_128x192_c2x1 3" \
         "coda-tests::linear 4096,12288,4096 Pingpong 3" \
         "coda-llama::linear_cross_entropy 4096,32768,4096 _linear_cross_entropy__pp_128x128_c1x2 3" \
         "coda-tests::linear 4096,32768,4096 Pingpong 3"; do
  (( $(el) > 480 )) && { echo "ncu: stopping at $(el) s"; break; }
  read -r prog shape regex skip <<< "$k"
  tag=${prog#*::}-${shape//,/x}
  CODA_TUNE_CACHE=/tmp/r/cache-$tag.json timeout 45 scripts/device-run.sh ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:$regex" \
    --launch-skip "$skip" --launch-count 1 --section SpeedOfLight --section SchedulerStats --section WarpStateStats --section InstructionStats \
    --section MemoryWorkloadAnalysis --section SourceCounters -f -o /tmp/r/$tag /tmp/b/coda tune --program $prog --shape $shape > "$o/$tag.run.log" 2>&1
  [[ -f /tmp/r/$tag.ncu-rep ]] || { echo "$tag: no report"; tail -3 "$o/$tag.run.log"; continue; }
  timeout 10 ncu --import /tmp/r/$tag.ncu-rep --page details > "$o/$tag.txt" 2>&1
  timeout 10 ncu --import /tmp/r/$tag.ncu-rep --page source --csv --print-source sass 2>/dev/null | xz > "$o/$tag.sass.csv.xz"
  echo "== $tag at $(el) s: $(grep -E '^    (Elapsed Cycles|SM Frequency|Duration|DRAM Throughput)' "$o/$tag.txt" | tr -s ' ' | paste -sd'|')"
  python3 bench/ncu_stalls.py "$o/$tag.sass.csv.xz" 2>&1 | tail -n 3
done

if (( $(el) < 500 )); then
  timeout "$(left 575)" scripts/device-run.sh /tmp/b/gpu --only qk_norm > "$o/gpu-qk.log" 2>&1
  echo "gpu --only qk_norm exit $? at $(el) s: $(tail -1 "$o/gpu-qk.log")"
  grep -E "^FAIL" -A6 "$o/gpu-qk.log" | head -20
fi
tar czf "$OUT/call-a.tgz" -C "$OUT" call-a
echo "done at $(el) s"
