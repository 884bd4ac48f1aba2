#!/usr/bin/env bash
# Session 56, calls C and D as they ran (each given inline, on the machine
# warm from calls A and B, /tmp/b unpacked by them; carry [".device"]).
# PART=c: `gpu --quick` and `gpu_user` on this build. PART=d: the rest of
# the full set (call A's --only list as --skip), cut at 330 s by the budget.
set -uo pipefail
t0=$(date +%s)
case ${PART:?PART=c or PART=d} in
c)
  o=$OUT/call-c; mkdir -p $o /tmp/b; [[ -x /tmp/b/gpu ]] || tar xJf .device/bins.tar.xz -C /tmp/b
  nvidia-smi --query-gpu=name --format=csv,noheader
  timeout 240 scripts/device-run.sh /tmp/b/gpu --quick > $o/gpu-quick.log 2>&1
  echo "gpu --quick exit $? at $(( $(date +%s)-t0 )) s: $(tail -1 $o/gpu-quick.log)"; grep -E "^FAIL" -A8 $o/gpu-quick.log | head -20
  echo "repeat bitwise false: $(grep -c 'repeat bitwise false' $o/gpu-quick.log); undetermined: $(grep -ci undetermined $o/gpu-quick.log)"
  timeout 120 scripts/device-run.sh /tmp/b/gpu_user > $o/gpu-user.log 2>&1
  echo "gpu_user exit $? at $(( $(date +%s)-t0 )) s: $(tail -1 $o/gpu-user.log)"; grep -E "^FAIL" -A8 $o/gpu-user.log | head
  ;;
d)
  o=$OUT/call-d; mkdir -p $o; args=()
  for p in fp8 qk_norm QK-norm block_amax pair_head_norm cross_entropy "cross-entropy loss" "LM head" weight_col_sums scaled_row_dot row_lse; do args+=(--skip "$p"); done
  timeout 330 scripts/device-run.sh /tmp/b/gpu "${args[@]}" > $o/gpu-rest.log 2>&1
  echo "gpu (the rest of the full set) exit $? at $(( $(date +%s)-t0 )) s: $(tail -1 $o/gpu-rest.log)"; grep -E "^FAIL" -A8 $o/gpu-rest.log | head -20
  echo "repeat bitwise false: $(grep -c 'repeat bitwise false' $o/gpu-rest.log)"; xz -9 $o/gpu-rest.log
  ;;
esac
