#!/usr/bin/env bash
# Session 36, call A (~420 s), on session 36's build: the checks no H200
# has run yet (gpu --quick: fp8_delayed_scaling, the maxima finishers,
# fp8_few_stages, and the fast-accumulation FP8 programs in all their
# configs; the default random batch; the untuned and held-out suites'
# programs against f64; coda-candle's test), then the FP8 programs timed
# beside cuBLASLt's FP8 GEMM of the same scaling and accumulation and their
# bf16 programs (`time_programs --only fp8`). Carry [".device"].
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
o=$OUT/call-a; rm -rf /tmp/b; mkdir -p /tmp/b "$o"
tar xJf .device/bins.tar.xz -C /tmp/b
tar xJf .device/heldout.tar.xz -C /tmp/b
xz -dc .device/candle-gpu.xz > /tmp/b/candle-gpu && chmod +x /tmp/b/candle-gpu
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1
GPU_ARGS=--quick PARTS="gpu random" timeout 170 scripts/device-verify.sh /tmp/b "$o" > "$o/verify-check.txt" 2>&1
timeout 90 scripts/device-run.sh /tmp/b/gpu_user_heldout > "$o/user.log" 2>&1
echo "checks at $(el) s: $(tail -1 "$o/gpu.log") / random $(tail -1 "$o/random.log") / user+heldout $(tail -1 "$o/user.log")"
grep -hE "^FAIL" -A6 "$o/gpu.log" "$o/random.log" "$o/user.log" | head -30
grep -hE "fp8_fast" "$o/gpu.log" | head -12
timeout 60 coda-candle/run-gpu-test.sh /tmp/b/candle-gpu > "$o/candle.log" 2>&1
echo "candle exit $? at $(el) s: $(grep -E 'passed' "$o/candle.log" | tail -1)"
timeout $((585 - $(el))) scripts/device-run.sh /tmp/b/time_programs --programs-only --only fp8 > "$o/fp8.log" 2>&1
echo "fp8 timing exit $? at $(el) s"
tar czf "$OUT/call-a.tgz" -C "$OUT" call-a
grep -A20 "FP8 program" "$o/fp8.log"
