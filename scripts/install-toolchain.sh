#!/usr/bin/env bash
# Installs the pinned CUDA 13.0 compiler and CUTLASS 4.2 headers from PyPI wheels
# into the per-user location where coda-codegen looks for them:
#   ${CODA_TOOLCHAIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/coda-rs/toolchain/<pin id>}
# The pins are coda-codegen/toolchain-pins.txt, which coda-codegen embeds too.
# Idempotent: a stamp records the pin set, so a second run returns at once.
# No system CUDA is needed or used. `coda toolchain install` does the same.
set -euo pipefail
pins_file="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/coda-codegen/toolchain-pins.txt"
mapfile -t pins < <(grep -v '^[[:space:]]*$' "$pins_file")
pin() { sed -n "s/^$1==//p" "$pins_file"; }
# Same as coda_codegen::toolchain::pin_id: cuda-<nvcc>-cutlass-<first three parts of CUTLASS's version>.
pin_id="cuda-$(pin nvidia-cuda-nvcc)-cutlass-$(pin nvidia-cutlass | cut -d. -f1-3)"
dest="${CODA_TOOLCHAIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/coda-rs/toolchain/$pin_id}"
stamp="$dest/.coda-pins"
if [[ -f "$stamp" && "$(cat "$stamp")" == "${pins[*]}" && -x "$dest/nvidia/cu13/bin/nvcc" ]]; then
  echo "toolchain: already installed in $dest"
  exit 0
fi
# Only ever delete a folder an earlier install made (an interrupted one leaves
# .coda-installing, removed once the stamp is written).
installing="$dest/.coda-installing"
if [[ -d "$dest" && ! -f "$stamp" && ! -f "$installing" && -n "$(ls -A "$dest")" ]]; then
  echo "toolchain: $dest is not empty and holds no earlier toolchain install; set CODA_TOOLCHAIN_DIR to another folder" >&2
  exit 1
fi
python="${PYTHON:-python3}"
command -v "$python" >/dev/null || { echo "toolchain: need python3 with pip to install the CUDA wheels" >&2; exit 1; }
rm -rf "$dest"
mkdir -p "$dest"
: > "$installing"
echo "toolchain: installing ${pins[*]} into $dest"
"$python" -m pip install --quiet --disable-pip-version-check --no-deps --target "$dest" "${pins[@]}"
# cudart's static archive is what kernels link; nvcc finds nvvm/ and crt headers beside itself.
for f in nvidia/cu13/bin/nvcc nvidia/cu13/lib/libcudart_static.a cutlass_library/source/include/cutlass/cutlass.h; do
  [[ -e "$dest/$f" ]] || { echo "toolchain: $dest/$f missing after install" >&2; exit 1; }
done
chmod +x "$dest"/nvidia/cu13/bin/* "$dest"/nvidia/cu13/nvvm/bin/* 2>/dev/null || true
echo "${pins[*]}" > "$stamp"
rm -f "$installing"
"$dest/nvidia/cu13/bin/nvcc" --version | tail -2
echo "toolchain: installed in $dest"
