#!/usr/bin/env bash
# Session 20, call 5: rmsnorm_backward with and without the accumulator fence
# in one call. coda_nofence is this session's coda binary rebuilt with only
# rmsnorm_backward's unit emitted with CUTLASS's Sm90AccFetch (a local,
# uncommitted codegen switch); the searches alternate the two binaries at
# the d = 8192 block's 16384 x 8192 x 57344 (each also searches
# rmsnorm_backward_head, fenced in both).
set -uo pipefail
mkdir -p /tmp/b /tmp/o && tar xJf .device/bins.tar.xz -C /tmp/b && xz -dc .device/coda_nofence.xz > /tmp/b/coda_nofence && chmod +x /tmp/b/coda_nofence
for i in 1 2; do
  for bin in coda coda_nofence; do
    CODA_LOG=debug CODA_TUNE_CACHE=/tmp/o/$bin-$i.json timeout 100 scripts/device-run.sh /tmp/b/$bin tune --program llama::rmsnorm_backward --shape 16384,8192,57344 > /tmp/o/tune-$bin-$i.log 2>&1
    echo "$bin $i exit $?"
    grep -h INFO /tmp/o/tune-$bin-$i.log | sed "s/.*coda tune: /$bin $i: /"
  done
done
tar czf "$OUT/call5.tgz" -C /tmp/o .
