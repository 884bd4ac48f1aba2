#!/usr/bin/env bash
# Session 36, call C (~300 s): the fast-accumulation FP8 programs checked at
# the full run's shapes (K = 4096: does the bf16 yardstick hold over a long
# tensor-core accumulation?), the main job (its printed o_proj ratio is one
# of issue H's targets) and the held-out suite timed as the untuned suite is
# (default build, CODA_TUNE unset). Carry [".device"].
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
o=$OUT/call-c; rm -rf /tmp/b; mkdir -p /tmp/b "$o"
tar xJf .device/bins.tar.xz -C /tmp/b
tar xJf .device/heldout.tar.xz -C /tmp/b
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1
timeout 60 scripts/device-run.sh /tmp/b/gpu --only fp8_fast > "$o/gpu-fp8-fast.log" 2>&1
echo "gpu fp8_fast exit $? at $(el) s: $(tail -1 "$o/gpu-fp8-fast.log")"; grep -E "M=4096" -A3 "$o/gpu-fp8-fast.log" | head -24
timeout 90 scripts/device-run.sh /tmp/b/llama-norm > "$o/llama-norm.log" 2>&1
echo "llama-norm exit $? at $(el) s"; tail -5 "$o/llama-norm.log"
timeout $((440 - $(el))) scripts/device-run.sh /tmp/b/coda-heldout bench --part heldout --json "$o/heldout.json" > "$o/heldout.log" 2>&1
echo "heldout bench exit $? at $(el) s"
tar czf "$OUT/call-c.tgz" -C "$OUT" call-c
grep -E "^\||^- " "$o/heldout.log" | tail -24
# Then, in what is left of the call, the FP8 programs beside cuBLASLt (fast and promoted).
timeout $((585 - $(el))) scripts/device-run.sh /tmp/b/time_programs --programs-only --only fp8 > "$o/fp8.log" 2>&1
echo "fp8 timing exit $? at $(el) s"
tar czf "$OUT/call-c.tgz" -C "$OUT" call-c
grep -A12 "FP8 program" "$o/fp8.log"
