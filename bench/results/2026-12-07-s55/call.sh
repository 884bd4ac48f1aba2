#!/usr/bin/env bash
# Session 55's call (carry [".device"]). On an H200: session 51's call-2.sh
# (issue I's items at full size, LIMIT s). On either card, then: the cases of
# the full `gpu` set that no run has taken under session 54's harness (the
# large LM heads and their loss variants, the edge cases, the refusals,
# stress; REST_LIMIT s; REST=0 skips them), then the generated batches $BATCHES (built here,
# never run on a GPU); with QUICK=1, `gpu --quick` last.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
o=$OUT/call; mkdir -p "$o" /tmp/b
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
if grep -q H200 "$o/gpu.txt"; then
  LIMIT=${LIMIT:-250} bash bench/results/2026-12-07-s51/call-2.sh | tail -n +3
fi
if [ "${REST:-1}" = 1 ]; then
tar xJf .device/bins.tar.xz -C /tmp/b
xz -dc .device/gpu.xz > /tmp/b/gpu && chmod 755 /tmp/b/gpu
args=()
for p in "LM head" "functions over wide" "functions on IEEE" "activations over" "activations on IEEE" row_lse \
    "every target ignored" "TMA descriptor" "bad K" "public functions" stress "second stream" \
    "partials written" row_maxes scale_into "borrowed memory" "launches per op"; do
  args+=(--only "$p")
done
timeout "${REST_LIMIT:-240}" scripts/device-run.sh /tmp/b/gpu "${args[@]}" > "$o/gpu-rest.log" 2>&1
echo "gpu (the rest) exit $? at $(el) s: $(tail -1 "$o/gpu-rest.log")"
grep -E "^FAIL" -A8 "$o/gpu-rest.log" | head -30
grep -E "^(PASS|FAIL)" "$o/gpu-rest.log" | cut -c1-120
fi
for batch in ${BATCHES:-}; do
  xz -dc ".device/$batch.xz" > "/tmp/b/$batch" && chmod 755 "/tmp/b/$batch"
  timeout 60 scripts/device-run.sh "/tmp/b/$batch" > "$o/$batch.log" 2>&1
  echo "$batch exit $? at $(el) s: $(tail -1 "$o/$batch.log")"
  grep -E "^FAIL" -A12 "$o/$batch.log" | head -30
done
if [ -n "${QUICK:-}" ]; then
  tar xJf .device/bins.tar.xz -C /tmp/b
  xz -dc .device/gpu.xz > /tmp/b/gpu && chmod 755 /tmp/b/gpu
  timeout "${QUICK_LIMIT:-150}" scripts/device-run.sh /tmp/b/gpu --quick > "$o/gpu-quick.log" 2>&1
  echo "gpu --quick exit $? at $(el) s: $(tail -1 "$o/gpu-quick.log")"
  grep -E "^FAIL" -A8 "$o/gpu-quick.log" | head -30
fi
echo "done at $(el) s"
