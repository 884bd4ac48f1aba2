#!/usr/bin/env bash
# Session 22, call 6: the full set's large shapes for what this session
# changed (not in --quick): every cross-entropy program in every config at
# 4096^3 and the ragged shape, the cross-entropy loss at 4096 x 32768 x
# 4096, the LM-head tail at d = 2048, V = 32768, M = 16384 (unfused and
# fused), the row_lse programs, and the d = 2048 block forward and backward
# at 16384 and 15999 tokens (their rms and column-sum finishers).
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
mkdir -p /tmp/b /tmp/o && tar xJf .device/bins.tar.xz -C /tmp/b
for only in cross_entropy "cross-entropy loss" "LM head" lse_rows "block forward d=2048" "block backward d=2048"; do
  log="/tmp/o/gpu-${only// /_}.log"
  timeout $(( 560 - $(el) )) scripts/device-run.sh /tmp/b/gpu --only "$only" > "$log" 2>&1
  echo "gpu --only '$only' exit $? at $(el) s: $(grep -c '^PASS' "$log") PASS, $(grep -c '^FAIL' "$log") FAIL; $(tail -1 "$log")"
done
tar czf "$OUT/call6.tgz" -C /tmp/o .
grep -h "repeat" /tmp/o/gpu-*.log | sort | uniq -c | head -5
