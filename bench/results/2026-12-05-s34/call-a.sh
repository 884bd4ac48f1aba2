#!/usr/bin/env bash
# Session 34, call A (~300 s): the checks of what landed since the last GPU
# run. The build on main (session 33's pack: gpu --quick with cpp_names and
# the activations' special values, gpu_user, gpu_random, and the 24-program
# batch of seed 0x5e330001), the held-out suite (.device/heldout.tar.xz:
# `coda` and `gpu_user` built with --features heldout; checked against f64,
# then timed as the untuned suite is), and coda-candle's GPU test with the
# QK-norm block (.device/candle-gpu.xz). Carry [".device"].
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
o=$OUT/call-a; rm -rf /tmp/b; mkdir -p /tmp/b "$o"
tar xJf .device/bins.tar.xz -C /tmp/b
tar xJf .device/heldout.tar.xz -C /tmp/b
cp .device/coda_rs-*.whl /tmp/b/
xz -dc .device/candle-gpu.xz > /tmp/b/candle-gpu && chmod +x /tmp/b/candle-gpu
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1
GPU_ARGS=--quick PARTS="gpu random" timeout 170 scripts/device-verify.sh /tmp/b "$o" > "$o/verify-check.txt" 2>&1
timeout 60 scripts/device-run.sh /tmp/b/gpu_random_s33 > "$o/random-s33.log" 2>&1
timeout 90 scripts/device-run.sh /tmp/b/gpu_user_heldout > "$o/user.log" 2>&1
echo "checks at $(el) s: $(tail -1 "$o/gpu.log") / random $(tail -1 "$o/random.log") / s33 $(tail -1 "$o/random-s33.log") / user+heldout $(tail -1 "$o/user.log")"
grep -hE "^FAIL" "$o/gpu.log" "$o/random.log" "$o/random-s33.log" "$o/user.log" | head -20
timeout 60 coda-candle/run-gpu-test.sh /tmp/b/candle-gpu > "$o/candle.log" 2>&1
echo "candle exit $? at $(el) s: $(grep -E 'passed' "$o/candle.log" | tail -1)"
grep -E "FAIL|^PASS" "$o/candle.log" | head -20
timeout $((585 - $(el))) scripts/device-run.sh /tmp/b/coda-heldout bench --part heldout --json "$o/heldout.json" > "$o/heldout.log" 2>&1
echo "heldout bench exit $? at $(el) s"
tar czf "$OUT/call-a.tgz" -C "$OUT" call-a
grep -A30 "Held-out suite" "$o/heldout.log"
