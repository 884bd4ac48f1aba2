#!/usr/bin/env bash
# Session 18, call 3: why the CODA model runs 148 ms a step under max-autotune (CUDA graph logs, kernel table, trace).
set -uo pipefail
mkdir -p /tmp/o/diag
site=$(mktemp -d); python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" .device/coda_rs-*.whl
PYTHONPATH="$site" PYTHONUNBUFFERED=1 TORCH_LOGS="perf_hints,cudagraphs" PROFILE=1 TRACE=1 TRAIN_ARGS="--steps 40" TRAIN_TIMEOUT=400 \
  timeout 420 bench/train/run.sh /tmp/o/diag coda:max-autotune:0 > /tmp/o/diag/run.log 2>&1
python3 bench/train/gaps.py /tmp/o/diag/coda-max-autotune-0.trace.json.gz > /tmp/o/diag/gaps.txt 2>&1
tar czf "$OUT/call3.tgz" -C /tmp/o diag
tail -3 /tmp/o/diag/run.log; head -25 /tmp/o/diag/coda-max-autotune-0.prof.txt; tail -15 /tmp/o/diag/gaps.txt
grep -i "cudagraph\|skipping\|re-record\|static input" /tmp/o/diag/coda-max-autotune-0.log | sort | uniq -c | sort -rn | head -20
