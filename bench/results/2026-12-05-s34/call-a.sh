#!/usr/bin/env bash
# Session 34, call A (~480 s): what a single lent call should give if no
# second comes. The checks of the build on main (gpu --quick with
# cpp_names and the activations' special values, gpu_user, gpu_random and
# the 24-program batch of seed 0x5e330001), then one bench/compare.py run
# (issue H's "Done when"). Carry [".device"] (session 33's pack, main's
# kernels; see bench/results/2026-12-05-s33/planned-call1.sh).
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
o=$OUT/call-a; rm -rf /tmp/b; mkdir -p /tmp/b "$o"
tar xJf .device/bins.tar.xz -C /tmp/b
cp .device/coda_rs-*.whl /tmp/b/
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1
GPU_ARGS=--quick PARTS="gpu user random" timeout 200 scripts/device-verify.sh /tmp/b "$o" > "$o/verify-check.txt" 2>&1
timeout 90 scripts/device-run.sh /tmp/b/gpu_random_s33 > "$o/random-s33.log" 2>&1
echo "checks at $(el) s: $(tail -1 "$o/gpu.log") / $(tail -1 "$o/user.log") / $(tail -1 "$o/random.log") / s33 $(tail -1 "$o/random-s33.log")"
grep -hE "^FAIL" "$o/gpu.log" "$o/user.log" "$o/random.log" "$o/random-s33.log" | head -20
PARTS=compare timeout $((590 - $(el))) scripts/device-verify.sh /tmp/b "$o" > "$o/verify-compare.txt" 2>&1
echo "compare exit $? at $(el) s"
tar czf "$OUT/call-a.tgz" -C "$OUT" call-a
grep "^|" "$o/compare.log" 2>/dev/null | tail -60
