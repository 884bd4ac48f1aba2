#!/usr/bin/env bash
# Session 18, call 2: re-search the column-sum programs' shipped shapes, then compare.py with them.
set -uo pipefail
t0=$(date +%s)
mkdir -p /tmp/b /tmp/o && tar xJf .device/bins.tar.xz -C /tmp/b
for p in rmsnorm_backward rmsnorm_backward_head; do
  PARTS=tune TUNE_ONLY=$p timeout 150 scripts/device-verify.sh /tmp/b /tmp/o
  mv /tmp/o/tune.log /tmp/o/tune-$p.log
done
echo "tune done at $(( $(date +%s) - t0 )) s"
CODA_TUNE_CACHE=/tmp/o/tuning.json PARTS=compare timeout $(( 585 - ($(date +%s) - t0) )) scripts/device-verify.sh /tmp/b /tmp/o
tar czf "$OUT/call2.tgz" -C /tmp/o .
grep -h "INFO" /tmp/o/tune-*.log | sed 's/.*coda tune: //' | head -12
tail -n 40 /tmp/o/compare/table.md 2>/dev/null | head -60
