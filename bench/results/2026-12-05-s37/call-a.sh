#!/usr/bin/env bash
# Session 37, call A (≤ 560 s): session 36's unrun follow-ups (planned call
# J: `gpu --only scale_into`, the wheel's head tests, `coda doctor`, the FP8
# rows with their configs), then the two issue-I targets not re-measured
# since sessions 13 and 22: the LM-head loss variants against the plain
# tail (bench/head_variants.py, d = 2048 and 4096) and QK-norm + RoPE
# against the bare qkv GEMM (time_programs --only qk_norm), and Nsight
# Compute of qk_norm_rope at 8192 × 24576 × 8192 beside our plain GEMM.
# Carry [".device"].
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
o=$OUT/call-a; rm -rf /tmp/b /tmp/py /tmp/r; mkdir -p /tmp/b /tmp/py /tmp/r "$o"
tar xJf .device/bins.tar.xz -C /tmp/b
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
timeout 60 scripts/device-run.sh /tmp/b/gpu --only scale_into > "$o/gpu.log" 2>&1
echo "gpu scale_into exit $? at $(el) s: $(tail -1 "$o/gpu.log")"; grep -E "FAIL|differ" "$o/gpu.log" | grep -v " 0 of " | head
timeout 30 scripts/device-run.sh /tmp/b/coda doctor > "$o/doctor.log" 2>&1; echo "doctor exit $?"; tail -4 "$o/doctor.log"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/py .device/coda_rs-*.whl > "$o/pip.log" 2>&1
(cd coda-python/tests && PYTHONPATH=/tmp/py timeout 100 python3 -m unittest -v test_head) > "$o/python-head.log" 2>&1
echo "python head exit $? at $(el) s"; grep -E "FAIL|ERROR|Ran|^OK" "$o/python-head.log" | tail -5
for h in 2048 4096; do
  PYTHONPATH=/tmp/py timeout 90 python3 bench/head_variants.py --hidden $h > "$o/head-variants-$h.log" 2>&1
  echo "== head variants d=$h exit $? at $(el) s"; tail -6 "$o/head-variants-$h.log"
done
# The variant programs have no shipped search (the plain ones do): search them at the tail's chunk shapes
# into a cache of their own, then time the variants again with it.
for pr in linear_cross_entropy_save_softcap linear_cross_entropy_save_sum linear_cross_entropy_softcap linear_cross_entropy_sum \
          linear_cross_entropy_backward_softcap linear_cross_entropy_backward_terms; do
  for k in 2048 4096; do
    CODA_TUNE_CACHE=$o/variants-tuning.json timeout 40 scripts/device-run.sh /tmp/b/coda tune --program coda-llama::$pr --shape 4096,32768,$k >> "$o/variants-tune.log" 2>&1
  done
done
for pr in cross_entropy_grad_softcap cross_entropy_grad_terms; do
  CODA_TUNE_CACHE=$o/variants-tuning.json timeout 40 scripts/device-run.sh /tmp/b/coda tune --program coda-llama::$pr --shape 4096,32768,8 >> "$o/variants-tune.log" 2>&1
done
echo "variant searches at $(el) s"; grep " M=" "$o/variants-tune.log" | head -20
for h in 2048 4096; do
  CODA_TUNE_CACHE=$o/variants-tuning.json PYTHONPATH=/tmp/py timeout 90 python3 bench/head_variants.py --hidden $h > "$o/head-variants-searched-$h.log" 2>&1
  echo "== head variants searched d=$h exit $? at $(el) s"; tail -6 "$o/head-variants-searched-$h.log"
done
timeout 150 scripts/device-run.sh /tmp/b/time_programs --programs-only --only qk_norm > "$o/qk.log" 2>&1
echo "qk exit $? at $(el) s"; cat "$o/qk.log"
timeout $((470 - $(el))) scripts/device-run.sh /tmp/b/time_programs --programs-only --only fp8 > "$o/fp8.log" 2>&1
echo "fp8 exit $? at $(el) s"; grep -A12 "FP8 program" "$o/fp8.log"
for k in "coda-tests::qk_norm_rope 8192,24576,8192 qk_norm_rope 3" "coda-tests::linear 8192,24576,8192 Pingpong 3"; do
  (( $(el) > 500 )) && { echo "stopping at $(el) s"; break; }
  read -r prog shape regex skip <<< "$k"
  tag=${prog#*::}
  CODA_TUNE_CACHE=/tmp/r/cache-$tag.json timeout 45 scripts/device-run.sh ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:$regex" \
    --launch-skip "$skip" --launch-count 1 --section SpeedOfLight --section SchedulerStats --section WarpStateStats --section InstructionStats \
    --section LaunchStats --section Occupancy -f -o /tmp/r/$tag /tmp/b/coda tune --program $prog --shape $shape > "$o/$tag.run.log" 2>&1
  [[ -f /tmp/r/$tag.ncu-rep ]] || { echo "$tag: no report"; tail -3 "$o/$tag.run.log"; continue; }
  timeout 10 ncu --import /tmp/r/$tag.ncu-rep --page details > "$o/$tag.txt" 2>&1
  echo "== $tag at $(el) s: $(grep -E '^    (Elapsed Cycles|Duration|Registers Per|Shared Memory Config)' "$o/$tag.txt" | tr -s ' ' | paste -sd'|')"
done
tar czf "$OUT/call-a.tgz" -C "$OUT" call-a
echo "done at $(el) s"
