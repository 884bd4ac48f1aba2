#!/usr/bin/env bash
# Session 36, call D (≤ 470 s, what the budget leaves): this build's checks on
# the H200 (gpu --quick with the fast-accumulation programs, the random
# batch with its fast-accumulation program), then evidence for the rows of
# call B's compare.py table over issue H's targets: the LM-head tail's
# kernels beside its three GEMMs at d = 4096 and 8192 (bench/block_profile.py
# --vocab), the d = 8192 block's, and Nsight Compute on
# linear_residual_rms_partial at 4096³ beside our plain GEMM (the s30
# planned call's first two entries). Nothing starts after 420 s. Carry [".device"].
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
o=$OUT/call-d; rm -rf /tmp/b /tmp/py /tmp/r; mkdir -p /tmp/b /tmp/py /tmp/r "$o"
tar xJf .device/bins.tar.xz -C /tmp/b
cp .device/coda_rs-*.whl /tmp/b/
GPU_ARGS=--quick PARTS="gpu random" timeout 150 scripts/device-verify.sh /tmp/b "$o" > "$o/verify-check.txt" 2>&1
echo "checks at $(el) s: $(tail -1 "$o/gpu.log") / random $(tail -1 "$o/random.log")"
grep -hE "^FAIL" -A6 "$o/gpu.log" "$o/random.log" | head -20
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/py /tmp/b/coda_rs-*.whl > "$o/pip.log" 2>&1
for a in "--vocab 32768 --d 4096 --tokens 4096" "--vocab 32768 --d 8192 --tokens 8192" "--d 8192 --ffn 28672"; do
  (( $(el) > 330 )) && { echo "stopping at $(el) s"; break; }
  tag=$(echo "$a" | tr -d ' -')
  PYTHONPATH=/tmp/py timeout 80 python3 bench/block_profile.py $a --steps 3 > "$o/profile-$tag.log" 2>&1
  echo "== profile $a exit $? at $(el) s"; grep -iE "total|sum" "$o/profile-$tag.log" | tail -4
done
pp=pp_128x128_c1x2
for k in "coda-llama::linear_residual_rms_partial 4096,4096,4096 _linear_residual_rms_partial__$pp 3" \
         "coda-tests::linear 4096,4096,4096 Pingpong 3"; do
  (( $(el) > 420 )) && { echo "stopping at $(el) s"; break; }
  read -r prog shape regex skip <<< "$k"
  tag=${prog#*::}-${shape%%,*}
  CODA_TUNE_CACHE=/tmp/r/cache-$tag.json timeout 60 scripts/device-run.sh ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:$regex" \
    --launch-skip "$skip" --launch-count 1 --section SpeedOfLight --section SchedulerStats --section WarpStateStats --section InstructionStats \
    --section SourceCounters -f -o /tmp/r/$tag /tmp/b/coda tune --program $prog --shape $shape > "$o/$tag.run.log" 2>&1
  [[ -f /tmp/r/$tag.ncu-rep ]] || { echo "$tag: no report"; tail -3 "$o/$tag.run.log"; continue; }
  timeout 10 ncu --import /tmp/r/$tag.ncu-rep --page details > "$o/$tag.txt" 2>&1
  timeout 10 ncu --import /tmp/r/$tag.ncu-rep --page source --csv --print-source sass 2>/dev/null | xz > "$o/$tag.sass.csv.xz"
  echo "== $tag at $(el) s: $(grep -E '^    (Elapsed Cycles|SM Frequency|Duration)' "$o/$tag.txt" | tr -s ' ' | paste -sd'|')"
  python3 bench/ncu_stalls.py "$o/$tag.sass.csv.xz" 2>&1 | tail -n 3
done
tar czf "$OUT/call-d.tgz" -C "$OUT" call-d
echo "done at $(el) s"
