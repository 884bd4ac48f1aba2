#!/usr/bin/env bash
# Runs a coda-candle test binary built by build.sh on the GPU machine (the
# driver and PyTorch's CUDA wheels, no cargo). Usage: run-gpu-test.sh BIN [ARGS...]
# candle's cudarc loads libcublas, libcublasLt, libcurand and libnvrtc at run
# time (dlopen): they come from the nvidia wheels under python's site-packages.
set -euo pipefail
[[ $# -ge 1 ]] || { echo "usage: $0 BIN [ARGS...]" >&2; exit 2; }
site=$(python3 -c 'import site; print(site.getsitepackages()[0])' 2>/dev/null || true)
if [[ -n "$site" && -d "$site/nvidia" ]]; then
  libdirs=$(find "$site/nvidia" \( -name 'libcublas.so*' -o -name 'libcublasLt.so*' -o -name 'libcurand.so*' -o -name 'libnvrtc.so*' \) \
    -printf '%h\n' 2>/dev/null | sort -u | paste -sd: -)
  export LD_LIBRARY_PATH="${libdirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
exec "$@"
