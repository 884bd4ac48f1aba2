#!/usr/bin/env bash
# Session 19, call 1: the wheel's tests (the LM-head gradient op, the
# re-record counter), the CODA model under max-autotune, then Nsight Compute
# (clocks as they are) of the untuned suite's 4096³ kernels and our plain GEMM.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
mkdir -p /tmp/b /tmp/o && tar xJf .device/bins.tar.xz -C /tmp/b && cp .device/coda_rs-*.whl /tmp/b/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > /tmp/o/gpu-info.txt 2>&1
site=$(mktemp -d); python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" /tmp/b/coda_rs-*.whl > /tmp/o/pip.log 2>&1
(cd coda-python/tests && PYTHONPATH="$site" PYTHONUNBUFFERED=1 timeout 200 python3 -m unittest discover -v -p "test_*.py") > /tmp/o/python.log 2>&1
echo "python exit $? at $(el) s"
PYTHONPATH="$site" PYTHONUNBUFFERED=1 TRAIN_TIMEOUT=$(( 430 - $(el) )) bench/train/run.sh /tmp/o/train coda:max-autotune:0 > /tmp/o/train-mat.log 2>&1
echo "train done at $(el) s"
mkdir -p /tmp/o/ncu
for p in linear relu2_bias alpha_beta quick_gelu_mul swiglu_keep bias_gelu_exact softcap_lse; do
  [[ $(el) -gt 555 ]] && { echo "ncu: no time for $p"; break; }
  if [[ $p == linear ]]; then prog=relu2_bias; re="TreeVisitor"; else prog=$p; re="${p}__"; fi
  timeout 60 scripts/device-run.sh ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:$re" \
    --launch-skip 3 --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis --section SchedulerStats \
    --section WarpStateStats --section InstructionStats --section LaunchStats --section Occupancy --section SourceCounters \
    -f -o /tmp/o/ncu/$p /tmp/b/coda bench --part untuned --quick --program $prog > /tmp/o/ncu/$p.run.log 2>&1
  echo "ncu $p exit $? at $(el) s"
  if [[ -f /tmp/o/ncu/$p.ncu-rep ]]; then
    ncu --import /tmp/o/ncu/$p.ncu-rep --page details > /tmp/o/ncu/$p.txt 2>&1
    ncu --import /tmp/o/ncu/$p.ncu-rep --page raw --csv > /tmp/o/ncu/$p.raw.csv 2>&1
    ncu --import /tmp/o/ncu/$p.ncu-rep --page source --csv --print-source sass 2>/dev/null | xz > /tmp/o/ncu/$p.sass.csv.xz
    rm -f /tmp/o/ncu/$p.ncu-rep
    grep -E "^    (Duration|SM Frequency|Elapsed Cycles|Compute \(SM\) Throughput|Issue Slots Busy|Registers Per Thread)" /tmp/o/ncu/$p.txt | tr -s ' ' | paste -sd'|' | sed "s/^/$p: /"
  fi
done
tar czf "$OUT/call1.tgz" -C /tmp/o .
tail -4 /tmp/o/python.log; grep -E "^(FAIL|ERROR):" /tmp/o/python.log | head
grep -v "^$" /tmp/o/train-mat.log | tail -6
