#!/usr/bin/env bash
# Session 42, call D (≤ 300 s; carry [".device"]): why label smoothing and
# soft-capping cost the d = 2048 tail 4% (call C's profile: their saving
# forward kernels, ping-pong 128×128 1×2, take 0.85 ms a chunk where the
# plain one, ping-pong 128×192 2×1, takes 0.73; alone, in a search, the
# two configs are within 1.5%). An experiment build (.device/exp: `coda`
# and the wheel built with CODA_CONFIGS=pp_128x128_c2x1,pp_128x192_c2x1
# for linear_cross_entropy_save_sum and _save_softcap; not main) runs the
# variants with each config pinned by a tuning cache (swizzle 1 along M,
# .device/exp/pin-*.json); main's wheel runs the plain tail with its
# saving kernel pinned to ping-pong 128×128 1×2 (the control: is it the
# config or the program?). Each run: head_variants.py --profile.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { local l=$(( $1 - $(el) )); echo $(( l > 1 ? l : 1 )); }
o=$OUT/call-d; rm -rf /tmp/b /tmp/py /tmp/pyx; mkdir -p /tmp/b /tmp/py /tmp/pyx "$o"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
xz -dc .device/exp/coda.xz > /tmp/b/coda-exp && chmod +x /tmp/b/coda-exp
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/py .device/coda_rs-*.whl > "$o/pip.log" 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/pyx .device/exp/coda_rs-*.whl >> "$o/pip.log" 2>&1
for pr in linear_cross_entropy_save_sum linear_cross_entropy_save_softcap; do
  CODA_LOG=debug CODA_TUNE_CACHE=$o/exp-search.json timeout 60 scripts/device-run.sh /tmp/b/coda-exp tune --program coda-llama::$pr \
    --shape 4096,32768,2048 --shape 4096,32768,4096 >> "$o/exp-tune.log" 2>&1
  echo "tune $pr exit $? at $(el) s"
done
grep -v DEBUG "$o/exp-tune.log" | grep "ms (own" | sed 's/.*coda tune: //' | cut -c1-200
run() { # tag pythonpath cache
  cp "$3" "$o/cache-$1.json"
  CODA_TUNE_CACHE=$o/cache-$1.json PYTHONPATH=$2 timeout "$(left 290)" python3 bench/head_variants.py --hidden 2048 --profile > "$o/variants-$1.log" 2>&1
  echo "== $1 exit $? at $(el) s"; grep -E "^[a-z].* [0-9.]+ +[0-9.]+$|save|: total" "$o/variants-$1.log" | cut -c1-100
}
run exp-c1x2 /tmp/pyx .device/exp/pin-c1x2.json
run exp-c2x1 /tmp/pyx .device/exp/pin-c2x1.json
run exp-192 /tmp/pyx .device/exp/pin-192.json
run main-plain-c1x2 /tmp/py .device/exp/pin-plain-c1x2.json
(( $(el) < 240 )) && run exp-c1x2-again /tmp/pyx .device/exp/pin-c1x2.json
tar czf "$OUT/call-d.tgz" -C "$OUT" call-d
echo "done at $(el) s"
