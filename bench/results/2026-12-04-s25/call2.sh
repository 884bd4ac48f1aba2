#!/usr/bin/env bash
# Session 25, call 2: the build with the fallback (DoubleTile inputs staged by
# TMA where the mainloop keeps two stages, else loaded per thread) and the
# cost model without its per-thread pair term. Checks first (quick set with
# kit::pair_head_norm, whose own cooperative config takes the per-thread path
# and whose ping-pong config stages; untuned suite, random programs, the
# wheel; memcheck over pair_head_norm and the small block backward), then the
# three pair programs searched (CODA_LOG=debug: every choice timed) at the
# shapes of the cost model's data, with session 24's binary and this one.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf /tmp/b /tmp/o; mkdir -p /tmp/b /tmp/o && tar xJf .device/bins.tar.xz -C /tmp/b && cp .device/coda_rs-*.whl /tmp/b/
xz -dc .device/coda_s24.xz > /tmp/b/coda_old && chmod +x /tmp/b/coda_old
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > /tmp/o/gpu-info.txt 2>&1
GPU_ARGS=--quick PARTS="gpu user random python" timeout 200 scripts/device-verify.sh /tmp/b /tmp/o > /tmp/o/verify-check.txt 2>&1
echo "checks done at $(el) s"
cs=/usr/local/cuda/bin/compute-sanitizer
for only in pair_head_norm "block backward d=256"; do
  timeout 90 scripts/device-run.sh $cs --tool memcheck --print-limit 50 /tmp/b/gpu --sanitize --only "$only" >> /tmp/o/memcheck.log 2>&1
  echo "memcheck $only exit $? at $(el) s"
done
echo "memcheck: $(grep -c '^PASS' /tmp/o/memcheck.log) PASS, $(grep -c '^FAIL' /tmp/o/memcheck.log) FAIL; $(grep 'ERROR SUMMARY' /tmp/o/memcheck.log | tr '\n' ' ')"
held="--shape 4096,4096,4096 --shape 8192,8192,8192 --shape 1000,4096,1024 --shape 16384,2048,2048 --shape 4096,14336,4096 --shape 8192,4096,16384"
llama="--shape 1000,512,256 --shape 15999,8192,2048 --shape 16384,8192,2048 --shape 16384,11008,4096 --shape 16384,28672,8192 --shape 8192,8192,2048"
for bin in coda coda_old; do
  for prog in swiglu_backward dswiglu linear_dswiglu; do
    if [[ $prog == linear_dswiglu ]]; then shapes=$llama; else shapes=$held; fi
    # shellcheck disable=SC2086
    CODA_LOG=debug CODA_TUNE_CACHE=/tmp/o/tune-$bin.json timeout 120 scripts/device-run.sh /tmp/b/$bin tune --program $prog $shapes >> /tmp/o/tune-$bin.log 2>&1
    echo "tune $bin $prog exit $? at $(el) s"
  done
done
grep -h "INFO" /tmp/o/tune-coda.log /tmp/o/tune-coda_old.log | sed 's/.*coda tune: //'
tar czf "$OUT/call2.tgz" -C /tmp/o .
grep -h "passed, \|^Ran \|^OK\|FAILED" /tmp/o/*.log | head
cat /tmp/o/verify-check.txt
