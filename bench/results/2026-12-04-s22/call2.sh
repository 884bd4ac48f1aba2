#!/usr/bin/env bash
# Session 22, call 2: memcheck over the programs whose nodes changed (every
# cross-entropy program in every compiled config at small ragged shapes, the
# LM-head tail and its loss variants, the row_lse edge rows; `gpu --sanitize
# --only ...`); the LM-head forward's kernels and our plain GEMM searched
# at 4096 x 32768 x 4096 and 8192 x 32768 x 8192 (kernel-level times, every
# compiled choice), and one launch of each of the two under Nsight Compute;
# then the wheel's tests on PyTorch tensors and the LM-head loss variants
# (bench/head_variants.py) on this build.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
mkdir -p /tmp/b /tmp/o && tar xJf .device/bins.tar.xz -C /tmp/b && cp .device/coda_rs-*.whl /tmp/b/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > /tmp/o/gpu-info.txt 2>&1
cs=/usr/local/cuda/bin/compute-sanitizer
for only in cross_entropy "LM head" row_lse; do
  timeout 100 scripts/device-run.sh $cs --tool memcheck --print-limit 50 /tmp/b/gpu --sanitize --only "$only" > "/tmp/o/memcheck-${only// /_}.log" 2>&1
  echo "memcheck --only '$only' exit $? at $(el) s: $(grep -c '^PASS' "/tmp/o/memcheck-${only// /_}.log") PASS, $(grep -c '^FAIL' "/tmp/o/memcheck-${only// /_}.log") FAIL; $(grep 'ERROR SUMMARY' "/tmp/o/memcheck-${only// /_}.log")"
done
tune() { CODA_LOG=debug CODA_TUNE_CACHE=/tmp/o/tune-head.json timeout 90 scripts/device-run.sh /tmp/b/coda tune --program "$@" >> /tmp/o/tune.log 2>&1; echo "tune $1 exit $? at $(el) s"; }
tune coda-llama::linear_cross_entropy --shape 4096,32768,4096 --shape 8192,32768,8192
tune coda-tests::linear --shape 4096,32768,4096 --shape 8192,32768,8192
# One launch of each under ncu (the search's third launch of that kernel), caches of their own so that they search.
for k in _linear_cross_entropy__pp_128x128:coda-llama::linear_cross_entropy _linear__pp_128x128:coda-tests::linear; do
  name=${k%%:*}; prog=${k#*:}
  CODA_TUNE_CACHE=/tmp/o/ncu-$name.json timeout 90 scripts/device-run.sh ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:$name" \
    --launch-skip 2 --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis --section SchedulerStats \
    --section WarpStateStats --section InstructionStats --section LaunchStats --section Occupancy \
    -f -o /tmp/o/ncu$name /tmp/b/coda tune --program "$prog" --shape 4096,32768,4096 > /tmp/o/ncu$name.run.log 2>&1
  echo "ncu $name exit $? at $(el) s"
  [[ -f /tmp/o/ncu$name.ncu-rep ]] || continue
  ncu --import /tmp/o/ncu$name.ncu-rep --page details > /tmp/o/ncu$name.txt 2>&1
  ncu --import /tmp/o/ncu$name.ncu-rep --page raw --csv > /tmp/o/ncu$name.raw.csv 2>&1
  rm -f /tmp/o/ncu$name.ncu-rep
done
site=$(mktemp -d); python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" /tmp/b/coda_rs-*.whl > /tmp/o/pip.log 2>&1
(cd coda-python/tests && PYTHONPATH="$site" PYTHONUNBUFFERED=1 timeout $(( 470 - $(el) )) python3 -m unittest discover -v -p "test_*.py") > /tmp/o/python.log 2>&1
echo "python exit $? at $(el) s"
PYTHONPATH="$site" PYTHONUNBUFFERED=1 timeout $(( 575 - $(el) )) python3 bench/head_variants.py > /tmp/o/head-variants.txt 2>&1
echo "head_variants exit $? at $(el) s"
tar czf "$OUT/call2.tgz" -C /tmp/o .
grep INFO /tmp/o/tune.log | sed 's/.*coda tune: //'
python3 bench/ncu_compare.py /tmp/o/ncu_linear_cross_entropy__pp_128x128.raw.csv /tmp/o/ncu_linear__pp_128x128.raw.csv 2>&1 | head -40
tail -n 4 /tmp/o/python.log
tail -n 12 /tmp/o/head-variants.txt
