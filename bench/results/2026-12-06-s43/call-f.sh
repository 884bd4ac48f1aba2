#!/usr/bin/env bash
# Session 43, call F (carry [".device"]; ≤ 595 s; .device packed at
# 1299eba, the H100 file's new picks). On an H200: call A (gpu --quick,
# test_head, the loss variants, compare.py: issue H's tables). On an H100:
# compare.py alone (this build passed gpu --quick there in call D), the
# H100's full table with the new file beside PyTorch eager and
# torch.compile. Prediction (H100) against session 42's compare.py run:
# the ops and the d = 2048 / 4096 / 8192 blocks as call D's coda bench
# (d = 8192 forward + backward ~1.00×, 4096 ~1.08×); faster than
# torch.compile on 16 of 18 rows (session 42: 15; the d = 8192 block was
# 1.029 / 1.006× its compile time and is now ~13% faster).
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { local l=$(( $1 - $(el) )); echo $(( l > 1 ? l : 1 )); }
o=$OUT/call-f; rm -rf /tmp/b; mkdir -p /tmp/b "$o"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
if ! grep -q H100 "$o/gpu.txt"; then
  bash bench/results/2026-12-06-s43/call-a.sh
else
  tar xJf .device/bins.tar.xz -C /tmp/b
  cp .device/coda_rs-*.whl /tmp/b/
  PARTS=compare timeout "$(left 580)" scripts/device-verify.sh /tmp/b "$o" > "$o/verify-compare.txt" 2>&1
  echo "compare at $(el) s"; grep "^|" "$o/compare.log" | tail -40
  tar czf "$OUT/call-f.tgz" -C "$OUT" call-f
fi
echo "done at $(el) s"
