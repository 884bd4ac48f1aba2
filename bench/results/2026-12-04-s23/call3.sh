#!/usr/bin/env bash
# Session 23, call 3: call 2's A/B showed no gain on the d = 8192 block
# forward + backward; this times the changed kernel itself against session
# 22's build in one call: rmsnorm_backward searched at 16384 x 8192 x 57344
# with each binary, alternated twice (rmsnorm_backward_head, unchanged, once
# each as the reference).
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf /tmp/b /tmp/o; mkdir -p /tmp/b /tmp/o && tar xJf .device/bins.tar.xz -C /tmp/b && xz -dc .device/coda_old.xz > /tmp/b/coda_old && chmod +x /tmp/b/coda_old
for i in 1 2; do
  for bin in coda_old coda; do
    for p in rmsnorm_backward rmsnorm_backward_head; do
      [[ $i == 2 && $p == rmsnorm_backward_head ]] && continue
      CODA_LOG=debug CODA_TUNE_CACHE=/tmp/o/tune-$bin-$p-$i.json timeout 60 scripts/device-run.sh /tmp/b/$bin tune --program llama::$p --shape 16384,8192,57344 > /tmp/o/tune-$bin-$p-$i.log 2>&1
      echo "$bin $p $i exit $? at $(el) s: $(grep -h INFO /tmp/o/tune-$bin-$p-$i.log | grep -o 'K=57344: .*' | tail -1)"
    done
  done
done
tar czf "$OUT/call3.tgz" -C /tmp/o .
