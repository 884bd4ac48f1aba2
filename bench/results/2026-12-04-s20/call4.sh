#!/usr/bin/env bash
# Session 20, call 4: rmsnorm_backward against its twin rmsnorm_backward_head
# (the same kn mainloop, one Tile input fewer) at the d = 8192 block's
# 16384 x 8192 x 57344: `coda tune --program llama::rmsnorm_backward`
# searches both, one after the other; twice, in one call.
set -uo pipefail
mkdir -p /tmp/b /tmp/o && tar xJf .device/bins.tar.xz -C /tmp/b
for i in 1 2; do
  CODA_LOG=debug CODA_TUNE_CACHE=/tmp/o/t$i.json timeout 120 scripts/device-run.sh /tmp/b/coda tune --program llama::rmsnorm_backward --shape 16384,8192,57344 > /tmp/o/tune-$i.log 2>&1
  echo "search $i exit $?"
done
tar czf "$OUT/call4.tgz" -C /tmp/o .
grep -h INFO /tmp/o/tune-*.log | sed 's/.*coda tune: //'
