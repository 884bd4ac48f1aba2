#!/usr/bin/env bash
# One call on the GPU machine, building nothing: the GPU tests, then
# `coda bench` beside the PyTorch baselines (bench/compare.py), both with the
# timed config search (CODA_TUNE=search, its cache kept with the logs).
# Usage: scripts/device-bench.sh BIN_DIR OUT_DIR [tests|bench|all]
# BIN_DIR holds the release binaries `gpu` (the GPU test binary) and `coda`,
# and optionally a `tuning.json` from an earlier call to start from.
set -uo pipefail
bin=$1 out=$2 part=${3:-all}
mkdir -p "$out"
export CODA_TUNE=search CODA_TUNE_CACHE="$out/tuning.json"
if [[ -f "$bin/tuning.json" && ! -f "$out/tuning.json" ]]; then
  cp "$bin/tuning.json" "$out/tuning.json"
fi
here=$(dirname "$0")
if [[ $part == all || $part == tests ]]; then
  "$here/device-run.sh" "$bin/gpu" > "$out/gpu.log" 2> "$out/gpu.err"
  echo "gpu tests exit $?"
fi
if [[ $part == all || $part == bench ]]; then
  "$here/device-run.sh" python3 "$here/../bench/compare.py" --coda "$bin/coda" --out "$out" > "$out/compare.log" 2> "$out/compare.err"
  echo "compare exit $?"
fi
grep -E "^FAIL" "$out/gpu.log" 2>/dev/null | head -20
tail -1 "$out/gpu.log" 2>/dev/null
cat "$out/table.md" 2>/dev/null
