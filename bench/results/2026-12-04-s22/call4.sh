#!/usr/bin/env bash
# Session 22, call 4: the row and column finishers (coda-runtime's
# finishers.cu) with the tiles split over a block's warps, on top of call 1's
# kernels. Checks first (quick set, untuned suite, random programs; memcheck
# over the LM-head tail, the row_lse edge rows and the small block backward;
# the wheel's tests), then compare.py, the LM-head forward's kernel durations
# under Nsight Compute as in call 3, and the loss variants.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
mkdir -p /tmp/b /tmp/o && tar xJf .device/bins.tar.xz -C /tmp/b && cp .device/coda_rs-*.whl /tmp/b/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > /tmp/o/gpu-info.txt 2>&1
GPU_ARGS=--quick PARTS="gpu user random python" timeout 150 scripts/device-verify.sh /tmp/b /tmp/o > /tmp/o/verify-check.txt 2>&1
echo "checks done at $(el) s"
cs=/usr/local/cuda/bin/compute-sanitizer
for only in "LM head" row_lse "block backward d=256"; do
  log="/tmp/o/memcheck-${only// /_}.log"
  timeout 60 scripts/device-run.sh $cs --tool memcheck --print-limit 50 /tmp/b/gpu --sanitize --only "$only" > "$log" 2>&1
  echo "memcheck --only '$only' exit $? at $(el) s: $(grep -c '^PASS' "$log") PASS, $(grep -c '^FAIL' "$log") FAIL; $(grep 'ERROR SUMMARY' "$log")"
done
PARTS=compare timeout $(( 540 - $(el) )) scripts/device-verify.sh /tmp/b /tmp/o > /tmp/o/verify-compare.txt 2>&1
echo "compare done at $(el) s"
timeout $(( 575 - $(el) )) scripts/device-run.sh ncu --clock-control none --cache-control none --kernel-name-base demangled \
  --kernel-name "regex:rms_input__|rms_finish|lse_finish|cross_entropy_finish|_linear_cross_entropy__" \
  --launch-count 25 --metrics gpu__time_duration.sum,gpc__cycles_elapsed.max --csv \
  /tmp/b/coda bench --part llama --quick > /tmp/o/ncu-head.csv 2> /tmp/o/ncu-head.err
echo "ncu exit $? at $(el) s"
site=$(mktemp -d); python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" /tmp/b/coda_rs-*.whl > /tmp/o/pip.log 2>&1
PYTHONPATH="$site" PYTHONUNBUFFERED=1 timeout $(( 590 - $(el) )) python3 bench/head_variants.py > /tmp/o/head-variants.txt 2>&1
echo "head_variants exit $? at $(el) s"
tar czf "$OUT/call4.tgz" -C /tmp/o .
cat /tmp/o/verify-check.txt
grep "^|" /tmp/o/compare.log | head -16
grep -E "^- M=" /tmp/o/compare.log
tail -n 6 /tmp/o/head-variants.txt
