#!/usr/bin/env bash
# Session 46, call A (carry [".device"], ≤ 600 s). On an H200: session 44's
# call A (issue H's searches and compare.py run), nothing else. On an H100:
# `gpu --quick` of this session's test binary (`.device/s46/gpu.xz`: the
# aux finishers' checks and launch shared by one helper in
# coda-runtime/src/aux.rs; kernels as main's), then session 45's call D.
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader > /tmp/gpu.txt 2>&1; cat /tmp/gpu.txt
# Only the tarballs come back (at most 8 files do).
tarballs_only() { find "$OUT" -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +; ls -la "$OUT"; }
if ! grep -q H100 /tmp/gpu.txt; then bash bench/results/2026-12-06-s44/call-a.sh; tarballs_only; exit 0; fi
t0=$(date +%s)
o=$OUT/q; mkdir -p /tmp/q "$o"
xz -dc .device/s46/gpu.xz > /tmp/q/gpu && chmod +x /tmp/q/gpu
timeout 150 scripts/device-run.sh /tmp/q/gpu --quick > "$o/gpu.log" 2>&1
echo "gpu --quick exit $? at $(( $(date +%s) - t0 )) s: $(tail -1 "$o/gpu.log")"; grep -E "^FAIL" -A8 "$o/gpu.log" | head -24
tar czf "$OUT/q.tgz" -C "$OUT" q
bash bench/results/2026-12-06-s45/call-d.sh
tarballs_only
