#!/usr/bin/env bash
# Runs prebuilt CODA binaries on the GPU machine (which has the driver and
# PyTorch's CUDA libraries but no cargo). Usage: scripts/device-run.sh BIN [ARGS...]
# cuBLAS (the timing baseline) is loaded at run time from PyTorch's wheels.
set -euo pipefail
site=$(python3 -c 'import site; print(site.getsitepackages()[0])' 2>/dev/null || true)
if [[ -n "$site" ]]; then
  libdirs=$(find "$site/nvidia" -name 'libcublas.so*' -printf '%h\n' 2>/dev/null | sort -u | paste -sd: -)
  export LD_LIBRARY_PATH="${libdirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
exec "$@"
