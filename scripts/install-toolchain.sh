#!/usr/bin/env bash
# Installs the pinned CUDA 13.0 compiler and CUTLASS 4.2 headers from PyPI wheels
# into .toolchain/cuda (git-ignored). Idempotent: a stamp records the pin set, so a
# second run returns at once. No system CUDA is needed or used.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${CODA_TOOLCHAIN_DIR:-$root/.toolchain/cuda}"
pins=(
  nvidia-cuda-nvcc==13.0.88
  nvidia-cuda-crt==13.0.88
  nvidia-nvvm==13.0.88
  nvidia-cuda-runtime==13.0.96
  nvidia-cuda-cccl==13.0.85
  nvidia-cutlass==4.2.0.0
)
stamp="$dest/.coda-pins"
if [[ -f "$stamp" && "$(cat "$stamp")" == "${pins[*]}" && -x "$dest/nvidia/cu13/bin/nvcc" ]]; then
  echo "toolchain: already installed in $dest"
  exit 0
fi
python="${PYTHON:-python3}"
command -v "$python" >/dev/null || { echo "toolchain: need python3 with pip to install the CUDA wheels" >&2; exit 1; }
rm -rf "$dest"
mkdir -p "$dest"
echo "toolchain: installing ${pins[*]} into $dest"
"$python" -m pip install --quiet --disable-pip-version-check --no-deps --target "$dest" "${pins[@]}"
# cudart's static archive is what kernels link; nvcc finds nvvm/ and crt headers beside itself.
for f in nvidia/cu13/bin/nvcc nvidia/cu13/lib/libcudart_static.a cutlass_library/source/include/cutlass/cutlass.h; do
  [[ -e "$dest/$f" ]] || { echo "toolchain: $dest/$f missing after install" >&2; exit 1; }
done
chmod +x "$dest"/nvidia/cu13/bin/* "$dest"/nvidia/cu13/nvvm/bin/* 2>/dev/null || true
echo "${pins[*]}" > "$stamp"
"$dest/nvidia/cu13/bin/nvcc" --version | tail -2
