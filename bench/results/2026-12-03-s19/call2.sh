#!/usr/bin/env bash
# Session 19, call 2: Nsight Compute (clocks as they are) of the rest of the
# untuned suite's 4096³ kernels, to test what the first seven suggested (the
# cost follows the special-function pipe's busy time), then the plain and
# CODA models' training rows in default mode and the plain model under max-autotune.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
mkdir -p /tmp/b /tmp/o/ncu && tar xJf .device/bins.tar.xz -C /tmp/b && cp .device/coda_rs-*.whl /tmp/b/
for p in gated_rms_input softplus_bias scaled_tanh_sums dequant_sigmoid geglu layernorm_stats layer_scale_rms swiglu_backward; do
  timeout 60 scripts/device-run.sh ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:${p}__" \
    --launch-skip 3 --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis --section SchedulerStats \
    --section WarpStateStats --section InstructionStats --section LaunchStats --section Occupancy --section SourceCounters \
    -f -o /tmp/o/ncu/$p /tmp/b/coda bench --part untuned --quick --program $p > /tmp/o/ncu/$p.run.log 2>&1
  echo "ncu $p exit $? at $(el) s"
  if [[ -f /tmp/o/ncu/$p.ncu-rep ]]; then
    ncu --import /tmp/o/ncu/$p.ncu-rep --page details > /tmp/o/ncu/$p.txt 2>&1
    ncu --import /tmp/o/ncu/$p.ncu-rep --page raw --csv > /tmp/o/ncu/$p.raw.csv 2>&1
    ncu --import /tmp/o/ncu/$p.ncu-rep --page source --csv --print-source sass 2>/dev/null | xz > /tmp/o/ncu/$p.sass.csv.xz
    rm -f /tmp/o/ncu/$p.ncu-rep
    grep -E "^    (Duration|SM Frequency|Elapsed Cycles)" /tmp/o/ncu/$p.txt | tr -s ' ' | paste -sd'|' | sed "s/^/$p: /"
  fi
done
site=$(mktemp -d); python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" /tmp/b/coda_rs-*.whl > /tmp/o/pip.log 2>&1
PYTHONPATH="$site" PYTHONUNBUFFERED=1 TRAIN_TIMEOUT=75 bench/train/run.sh /tmp/o/train plain:default:0 coda:default:0 > /tmp/o/train-default.log 2>&1
echo "default rows done at $(el) s"
PYTHONPATH="$site" PYTHONUNBUFFERED=1 TRAIN_TIMEOUT=$(( 585 - $(el) )) bench/train/run.sh /tmp/o/train plain:max-autotune:0 > /tmp/o/train-mat.log 2>&1
echo "max-autotune done at $(el) s"
tar czf "$OUT/call2.tgz" -C /tmp/o .
grep -v "^$" /tmp/o/train-default.log /tmp/o/train-mat.log | tail -9
