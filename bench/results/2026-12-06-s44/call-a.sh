#!/usr/bin/env bash
# Session 44, call A (carry [".device"], ≤ 590 s; on an H100 only the
# LM-head tail's profile, below). `.device` is main's build at
# 1299eba (kernels as main's since; `gpu --quick` 183 of 183 on an H200 in
# session 43, call G).
#  1. The four coda-llama programs that compiled no cooperative tile before
#     session 43 (the SwiGLU forwards, the RMSNorm backward, the LM head's
#     saving forward) searched on the H200 at every shipped shape with
#     main's `coda` (so only configs main compiles: since session 43 the
#     cooperative 128 × 256 for three of them, ping-pong 128 × 192 for the
#     SwiGLU forwards). The H200 file's picks for them came from searches
#     that had ping-pong 128 × 128 (and 128 × 192) alone. On an H100 the
#     cooperative tile ran the SwiGLU-save at 16384 × 57344 × 8192 0.83×
#     and the RMSNorm backward at 16384 × 8192 × 57344 0.65× of ping-pong
#     128 × 128. Prediction for the H200 (its cost model, session 43):
#     128 × 192 ~2% ahead at wide N, the cooperative tile ~4% behind.
#  2. compare.py of this build with that search's cache in front of the
#     shipped file (CODA_TUNE_CACHE; the cache holds only these four
#     programs, so every other choice is the shipped file's or the
#     heuristic's): issue H's README tables. Its entries for the four
#     programs are then shipped as they are, so that the table is the
#     shipped state's.
#  3. Time left: the loss variants' GPU time per kernel at d = 2048.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { local l=$(( $1 - $(el) )); echo $(( l > 1 ? l : 1 )); }
o=$OUT/a; rm -rf /tmp/b /tmp/py; mkdir -p /tmp/b /tmp/py "$o"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
if grep -q H100 "$o/gpu.txt" && [[ -n ${H100_EXIT:-} ]]; then echo "an H100: nothing to do (H100_EXIT)"; exit 0; fi
if grep -q H100 "$o/gpu.txt"; then
  # On an H100: where the LM-head tail's forward + backward goes there
  # (session 43's compare.py on an H100: 1.143× its GEMMs at d = 4096,
  # 1.043× at 8192, against 1.062× / 1.023× on the H200 in session 36).
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/py .device/coda_rs-0.1.0-*.whl > "$o/pip.log" 2>&1
  for a in "--vocab 32768 --d 4096 --tokens 4096" "--vocab 32768 --d 8192 --tokens 8192"; do
    tag=$(echo "$a" | tr -d ' -')
    PYTHONPATH=/tmp/py timeout 80 python3 bench/block_profile.py $a --steps 3 > "$o/profile-$tag.log" 2>&1
    echo "== profile $a exit $? at $(el) s"; grep -A12 "by kernel" "$o/profile-$tag.log" | head -40
  done
  exit 0
fi
tar xJf .device/bins.tar.xz -C /tmp/b
cp .device/coda_rs-*.whl /tmp/b/
for p in ${SEARCH-linear_rowscale_swiglu_save linear_rowscale_swiglu rmsnorm_backward linear_cross_entropy_save}; do
  TUNE_ONLY=$p PARTS=tune timeout "$(left 120)" scripts/device-verify.sh /tmp/b "$o" >> "$o/verify-tune.txt" 2>&1
  echo "== $p searched at $(el) s"
done
[[ -f $o/tuning.json ]] || echo "[]" > "$o/tuning.json"
python3 - "$o/tuning.json" coda-llama/tuning/nvidia-h200.json <<'PY'
import json, sys
new = {(e["program"], e["m"], e["n"], e["k"]): e for e in json.load(open(sys.argv[1])) if "H200" in e["gpu"]}
old = {(e["program"], e["m"], e["n"], e["k"]): e for e in json.load(open(sys.argv[2]))}
for k, e in sorted(new.items()):
    s = old.get(k)
    was = f"{s['config']} s{s['swizzle']} {s['raster']} {s['ms']:.4f}" if s else "-"
    print(f"{k[0].split('::')[1]:30} {k[1]}x{k[2]}x{k[3]}: {e['config']} s{e['swizzle']} {e['raster']} {e['ms']:.4f} ms (shipped: {was})")
PY
CODA_TUNE_CACHE="$o/tuning.json" PARTS=compare timeout "$(left 555)" scripts/device-verify.sh /tmp/b "$o" > "$o/verify-compare.txt" 2>&1
echo "compare at $(el) s"; grep "^|" "$o/compare.log" | tail -40; grep -E "median|^- " "$o/compare.log" | tail -16
if (( $(el) < 545 )); then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/py /tmp/b/coda_rs-*.whl > "$o/pip.log" 2>&1
  PYTHONPATH=/tmp/py CODA_TUNE_CACHE="$o/tuning.json" timeout "$(left 585)" python3 bench/head_variants.py --hidden 2048 --profile > "$o/variants-profile.log" 2>&1
  echo "variants profile exit $? at $(el) s"; tail -n 30 "$o/variants-profile.log"
fi
tar czf "$OUT/a.tgz" -C "$OUT" a
echo "done at $(el) s"
