#!/usr/bin/env bash
# Session 46, call B (carry [".device"], ≤ 600 s): on an H200, session 44's
# call A (issue H's searches, then compare.py for the README's tables);
# on an H100, nothing (exits at once, to be given back).
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader > /tmp/gpu.txt 2>&1; cat /tmp/gpu.txt
grep -q H100 /tmp/gpu.txt && { echo "an H100: nothing to do"; exit 0; }
bash bench/results/2026-12-06-s44/call-a.sh
# Only the tarball comes back (at most 8 files do).
find "$OUT" -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +; ls -la "$OUT"
