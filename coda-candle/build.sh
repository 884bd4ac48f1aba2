#!/usr/bin/env bash
# Builds coda-candle from a fresh checkout with only the project's toolchain
# (scripts/install-toolchain.sh), then runs `cargo test --release ARGS`
# (default `--no-run`: build the test binaries and print their paths).
#   bash coda-candle/build.sh            # build; the GPU test is target/release/deps/gpu-*
#   bash coda-candle/build.sh --test gpu # build and run it (SKIPPED without a GPU)
# On the GPU machine, run the binary with coda-candle/run-gpu-test.sh.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
bash "$root/scripts/install-toolchain.sh"
# The toolchain's folder, as install-toolchain.sh computes it.
pins="$root/coda-codegen/toolchain-pins.txt"
pin() { sed -n "s/^$1==//p" "$pins"; }
cu13="${CODA_TOOLCHAIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/coda-rs/toolchain/cuda-$(pin nvidia-cuda-nvcc)-cutlass-$(pin nvidia-cutlass | cut -d. -f1-3)}/nvidia/cu13"

# candle-kernels (cudaforge) finds nvcc on PATH and cannot ask a GPU for the
# compute capability. CUDA_HOME stays unset: coda's kernel cache keys hold
# the compiler command that coda's own toolchain discovery gives.
export PATH="$cu13/bin:$PATH" CUDA_COMPUTE_CAP=90
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}" CUDAFORGE_THREADS="${CUDAFORGE_THREADS:-2}" CODA_JOBS="${CODA_JOBS:-2}"
cd "$here"

# candle-core 0.11.1 builds cudarc with `dynamic-linking`: the binary would
# link libcuda, libnvrtc, libcurand and the cuBLAS libraries at build time,
# and cudarc's `is_culib_present` probes, which coda-runtime and coda-llama
# call before loading a library, exist only under `dynamic-loading`. cudarc
# takes one mode per build, so Cargo.toml patches candle-core to a copy of
# the published crate whose one change is that feature: cudarc then loads
# the libraries at run time (from LD_LIBRARY_PATH: run-gpu-test.sh).
patched="$here/target/patched/candle-core"
if [[ ! -f "$patched/.coda-patched" ]]; then
  fetch="$here/target/patched/fetch"
  mkdir -p "$fetch/src"
  : >"$fetch/src/lib.rs"
  printf '[package]\nname = "fetch"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\ncandle-core = "=0.11.1"\n[workspace]\n' >"$fetch/Cargo.toml"
  src="$(cargo metadata --format-version 1 --manifest-path "$fetch/Cargo.toml" | python3 -c '
import json, os, sys
p = [p for p in json.load(sys.stdin)["packages"] if p["name"] == "candle-core"]
print(os.path.dirname(p[0]["manifest_path"]))')"
  rm -rf "$patched"
  cp -r "$src" "$patched"
  python3 - "$patched/Cargo.toml" <<'PY'
import sys
path = sys.argv[1]
text = open(path).read()
head, sep, tail = text.partition("[dependencies.cudarc]")
block, nxt, rest = tail.partition("\n[")
assert sep and block.count('"dynamic-linking",') == 1, "candle-core's cudarc features changed: revisit build.sh"
open(path, "w").write(head + sep + block.replace('"dynamic-linking",', '"dynamic-loading",') + nxt + rest)
PY
  touch "$patched/.coda-patched"
fi

# candle-kernels links `-lcudart`; the toolchain has only libcudart.so.13.
link="$here/target/cuda-link"
mkdir -p "$link"
ln -sf "$cu13/lib/libcudart.so.13" "$link/libcudart.so"
export RUSTFLAGS="${RUSTFLAGS:-} -L native=$link"
# libcudart.so.13, for running the tests here.
export LD_LIBRARY_PATH="$cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [[ $# -eq 0 ]]; then set -- --no-run; fi
cargo test --release --locked "$@"
