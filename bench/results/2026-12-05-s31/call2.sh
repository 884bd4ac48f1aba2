#!/usr/bin/env bash
# Session 31, call 2: branch lse-empty-rescale's build (every kernel rebuilt),
# packed by scripts/device-pack.sh into .device/bins.tar.xz with
# EXTRA="gpu_random_maps=COPY" (the gpu_random binary of a CODA_RANDOM_MAPS=1
# CODA_RANDOM_PROGRAMS=8 build, session 30's batch: random_055 failed).
# The checks: gpu --quick (the lse edge case's rows below -88 and -inf with
# one -200), gpu_user, gpu_random, the map batch; the main job.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
o=$OUT/call2; rm -rf /tmp/b2; mkdir -p /tmp/b2 "$o"
tar xJf .device/bins.tar.xz -C /tmp/b2
GPU_ARGS=--quick PARTS="gpu user random" timeout 200 scripts/device-verify.sh /tmp/b2 "$o" > "$o/verify-check.txt" 2>&1
timeout 60 scripts/device-run.sh /tmp/b2/gpu_random_maps > "$o/random-maps.log" 2>&1
echo "checks at $(el) s: $(tail -1 "$o/gpu.log") / $(tail -1 "$o/user.log") / $(tail -1 "$o/random.log") / maps $(tail -1 "$o/random-maps.log")"
grep -E "^FAIL|lse" "$o/gpu.log" "$o/random-maps.log" | head -8
timeout 120 scripts/device-run.sh /tmp/b2/llama-norm > "$o/llama-norm.log" 2>&1
echo "llama-norm exit $? at $(el) s"; tail -4 "$o/llama-norm.log"
# The row_lse programs' shipped shapes searched again (their kernels changed).
for prog in linear_cross_entropy linear_cross_entropy_save; do
  args=$(python3 -c "import json,sys; print(' '.join(f\"--shape {e['m']},{e['n']},{e['k']}\" for e in json.load(open('.device/s31/shipped-lse.json')) if e['program']=='coda-llama::'+sys.argv[1]))" $prog)
  CODA_LOG=debug CODA_TUNE_CACHE=$o/tuning-lse.json timeout 90 scripts/device-run.sh /tmp/b2/coda tune --program $prog $args >> "$o/tune-lse.log" 2>&1
  echo "tune $prog exit $? at $(el) s"
done
grep INFO "$o/tune-lse.log" | sed 's/.*coda tune: //'
tar czf "$OUT/call2.tgz" -C "$OUT" call2
