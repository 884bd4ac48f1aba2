#!/usr/bin/env bash
# Session 45, call B (carry [".device"], ≤ 400 s). On an H200: session 44's
# call A instead (issue H's searches and compare.py run). On an H100: where
# the d = 2048 and d = 4096 blocks' forward + backward go (session 43's
# compare.py on an H100: 1.116× and 1.073× their cuBLASLt GEMMs, against
# 1.023× and 1.029× on the H200 in session 36), kernel by kernel beside
# cuBLAS's twelve GEMMs (block_profile.py, main's wheel, 16384 tokens).
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { local l=$(( $1 - $(el) )); echo $(( l > 1 ? l : 1 )); }
nvidia-smi --query-gpu=name --format=csv,noheader > /tmp/gpu.txt 2>&1
if ! grep -q H100 /tmp/gpu.txt; then exec bash bench/results/2026-12-06-s44/call-a.sh; fi
o=$OUT/b; rm -rf /tmp/pm; mkdir -p /tmp/pm "$o"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/pm .device/coda_rs-0.1.0-*.whl > /tmp/pip.log 2>&1
for a in "--d 2048 --ffn 8192" "--d 4096 --ffn 14336"; do
  tag=$(echo "$a" | tr -d ' -')
  PYTHONPATH=/tmp/pm timeout "$(left 380)" python3 bench/block_profile.py $a --steps 5 > "$o/profile-$tag.log" 2>&1
  echo "== profile $a exit $? at $(el) s"; grep -A40 "by kernel" "$o/profile-$tag.log" | head -60
done
tar czf "$OUT/b.tgz" -C "$OUT" b
echo "done at $(el) s"
