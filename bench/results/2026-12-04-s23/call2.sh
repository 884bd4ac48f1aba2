#!/usr/bin/env bash
# Session 23, call 2: call 1 put the d = 8192 block forward + backward at
# 1.109x (session 22: 1.091x, 1.093x) though its one changed kernel,
# rmsnorm_backward, got faster. A/B in one call: session 22's coda binary
# (coda_old: main at bd3dd2e, its kernels from the kernel cache, keys equal
# to session 22's inspect.txt) and this session's, `coda bench --part llama`
# alternated twice; rmsnorm_backward searched at the d = 8192 block's other
# shape (16384 x 8192 x 24576, the qkv GEMM's dx; not in the shipped cache)
# with both. First memcheck over the block backward's small cases and the
# d = 2048 block backward at full size (the changed kernel in both).
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf /tmp/b /tmp/o; mkdir -p /tmp/b /tmp/o && tar xJf .device/bins.tar.xz -C /tmp/b && xz -dc .device/coda_old.xz > /tmp/b/coda_old && chmod +x /tmp/b/coda_old
cs=/usr/local/cuda/bin/compute-sanitizer
timeout 90 scripts/device-run.sh $cs --tool memcheck --print-limit 50 /tmp/b/gpu --sanitize --only "block backward d=256" > /tmp/o/memcheck-block-backward.log 2>&1
echo "memcheck exit $? at $(el) s: $(grep -c '^PASS' /tmp/o/memcheck-block-backward.log) PASS, $(grep -c '^FAIL' /tmp/o/memcheck-block-backward.log) FAIL; $(grep 'ERROR SUMMARY' /tmp/o/memcheck-block-backward.log)"
timeout 90 scripts/device-run.sh /tmp/b/gpu --only "block backward d=2048" > /tmp/o/gpu-block-backward-2048.log 2>&1
echo "gpu block backward d=2048 exit $? at $(el) s: $(grep -c '^PASS' /tmp/o/gpu-block-backward-2048.log) PASS, $(grep -c '^FAIL' /tmp/o/gpu-block-backward-2048.log) FAIL"
for bin in coda coda_old; do
  CODA_LOG=debug CODA_TUNE_CACHE=/tmp/o/tune-$bin.json timeout 60 scripts/device-run.sh /tmp/b/$bin tune --program llama::rmsnorm_backward --shape 16384,8192,24576 > /tmp/o/tune-$bin.log 2>&1
  echo "tune $bin exit $? at $(el) s: $(grep -h INFO /tmp/o/tune-$bin.log | grep -o 'K=24576: .*' | tail -1)"
done
for i in 1 2; do
  for bin in coda_old coda; do
    left=$(( 560 - $(el) )); [[ $left -lt 30 ]] && break 2
    timeout $left scripts/device-run.sh /tmp/b/$bin bench --part llama --json /tmp/o/bench-$bin-$i.json > /tmp/o/bench-$bin-$i.log 2>&1
    echo "bench $bin $i exit $? at $(el) s: $(grep -E 'block fwd\+bwd +M=16384 d=8192' /tmp/o/bench-$bin-$i.log)"
  done
done
tar czf "$OUT/call2.tgz" -C /tmp/o .
grep -hE "^block" /tmp/o/bench-*.log
