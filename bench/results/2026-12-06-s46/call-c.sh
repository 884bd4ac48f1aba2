#!/usr/bin/env bash
# Session 46, call C (carry [".device"]): session 44's call A cut to fit
# what device time is left. On an H100: nothing (exits, to be given back).
# On an H200: the four coda-llama programs whose H200 picks never had the
# cooperative tile, searched at every shipped shape with main's `coda`
# (≤ 150 s), printed beside the H200 file's entries; then, with COMPARE=1
# and time left under LIMIT (the run's timeout), compare.py of this build
# with that search's cache in front of the shipped file.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { local l=$(( $1 - $(el) )); echo $(( l > 1 ? l : 1 )); }
nvidia-smi --query-gpu=name --format=csv,noheader > /tmp/gpu.txt 2>&1; cat /tmp/gpu.txt
grep -q H100 /tmp/gpu.txt && { echo "an H100: nothing to do"; exit 0; }
o=$OUT/c; rm -rf /tmp/b; mkdir -p /tmp/b "$o"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1
tar xJf .device/bins.tar.xz -C /tmp/b
for p in linear_rowscale_swiglu_save linear_rowscale_swiglu rmsnorm_backward linear_cross_entropy_save; do
  TUNE_ONLY=$p PARTS=tune timeout "$(left 150)" scripts/device-verify.sh /tmp/b "$o" >> "$o/verify-tune.txt" 2>&1
  echo "== $p searched at $(el) s"
done
[[ -f $o/tuning.json ]] || echo "[]" > "$o/tuning.json"
python3 - "$o/tuning.json" coda-llama/tuning/nvidia-h200.json <<'PY' | tee "$o/search-vs-shipped.txt"
import json, sys
new = {(e["program"], e["m"], e["n"], e["k"]): e for e in json.load(open(sys.argv[1])) if "H200" in e["gpu"]}
old = {(e["program"], e["m"], e["n"], e["k"]): e for e in json.load(open(sys.argv[2]))}
for k, e in sorted(new.items()):
    s = old.get(k)
    was = f"{s['config']} s{s['swizzle']} {s['raster']} {s['ms']:.4f}" if s else "-"
    print(f"{k[0].split('::')[1]:30} {k[1]}x{k[2]}x{k[3]}: {e['config']} s{e['swizzle']} {e['raster']} {e['ms']:.4f} ms (shipped: {was})")
PY
if [[ -n ${COMPARE:-} ]] && (( ${LIMIT:-0} - $(el) > 380 )); then
  CODA_TUNE_CACHE="$o/tuning.json" PARTS=compare timeout "$(left $(( LIMIT - 15 )))" scripts/device-verify.sh /tmp/b "$o" > "$o/verify-compare.txt" 2>&1
  echo "compare at $(el) s"; grep "^|" "$o/compare.log" | tail -40; grep -E "median|^- " "$o/compare.log" | tail -16
fi
tar czf "$OUT/c.tgz" -C "$OUT" c && rm -rf "$o"
echo "done at $(el) s"
