#!/usr/bin/env bash
# Session 20, call 2: where the d = 8192 block lost time in call 1. A fresh
# search (coda tune: every compiled config, swizzle and raster) of the block's
# fused programs at its d = 8192 shapes, into a cache of its own, beside the
# shipped entries' timings of session 8-18's builds; then the wheel's tests
# and the LM-head loss variants (bench/head_variants.py) on this build.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
mkdir -p /tmp/b /tmp/o && tar xJf .device/bins.tar.xz -C /tmp/b && cp .device/coda_rs-*.whl /tmp/b/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > /tmp/o/gpu-info.txt 2>&1
tune() { CODA_LOG=debug CODA_TUNE_CACHE=/tmp/o/tune-d8192.json timeout 75 scripts/device-run.sh /tmp/b/coda tune --program "$@" >> /tmp/o/tune.log 2>&1; echo "tune $1 exit $? at $(el) s"; }
tune linear_rowscale_rope --shape 16384,12288,8192
tune linear_rowscale_swiglu_save --shape 16384,57344,8192
tune linear_residual_rms_partial --shape 16384,8192,28672 --shape 16384,8192,8192
tune linear_dswiglu --shape 16384,28672,8192
tune llama::rmsnorm_backward --shape 16384,8192,57344
tune matmul --shape 16384,8192,8192
site=$(mktemp -d); python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" /tmp/b/coda_rs-*.whl > /tmp/o/pip.log 2>&1
(cd coda-python/tests && PYTHONPATH="$site" PYTHONUNBUFFERED=1 timeout $(( 470 - $(el) )) python3 -m unittest discover -v -p "test_*.py") > /tmp/o/python.log 2>&1
echo "python exit $? at $(el) s"
PYTHONPATH="$site" PYTHONUNBUFFERED=1 timeout $(( 575 - $(el) )) python3 bench/head_variants.py > /tmp/o/head-variants.txt 2>&1
echo "head_variants exit $? at $(el) s"
tar czf "$OUT/call2.tgz" -C /tmp/o .
grep INFO /tmp/o/tune.log | sed 's/.*coda tune: //'
tail -n 4 /tmp/o/python.log
cat /tmp/o/head-variants.txt | tail -n 12
