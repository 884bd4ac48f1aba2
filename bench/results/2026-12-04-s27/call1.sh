#!/usr/bin/env bash
# Session 27, call 1 (issue G): coda-candle's GPU test on this build; the
# training comparison's default-mode pair with 7287ba8's kernels; the loss
# over three seeds of each model in eager mode (plain and CODA alternated).
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf /tmp/o /tmp/site; mkdir -p /tmp/o /tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/coda_rs-*.whl > /tmp/o/pip.log 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > /tmp/o/gpu-info.txt 2>&1
xz -dc .device/candle_gpu.xz > /tmp/candle_gpu && chmod +x /tmp/candle_gpu
timeout 120 coda-candle/run-gpu-test.sh /tmp/candle_gpu --test-threads 1 > /tmp/o/candle.log 2>&1
echo "candle exit $? at $(el) s"
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
TRAIN_TIMEOUT=110 bench/train/run.sh /tmp/o/train plain:default:0 coda:default:0 > /tmp/o/train.log 2>&1
echo "compiled pair done at $(el) s"; tar czf "$OUT/call1.tgz" -C /tmp/o .
TRAIN_TIMEOUT=60 bench/train/run.sh /tmp/o/seeds plain:none:0 coda:none:0 plain:none:1 coda:none:1 plain:none:2 coda:none:2 > /tmp/o/seeds.log 2>&1
echo "seeds done at $(el) s"; tar czf "$OUT/call1.tgz" -C /tmp/o .
grep -E "passed|failed|test result" /tmp/o/candle.log | tail -3
grep -v "^$" /tmp/o/train.log | tail -4
grep -v "^$" /tmp/o/seeds.log | tail -12
