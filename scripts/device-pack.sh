#!/usr/bin/env bash
# Packs this checkout's release build for the GPU machine (which has no
# cargo): the `coda` CLI, the test binaries that scripts/device-verify.sh
# runs, `time_programs` and the main job `llama-norm`, stripped, into
# .device/bins.tar.xz (flat, so `tar xJf .device/bins.tar.xz -C BIN_DIR`
# gives device-verify.sh its BIN_DIR), and the newest wheel into .device/.
# Builds nothing: run it after
#   cargo build --release -p coda-cli -p llama-norm && cargo test --release --workspace --no-run
# (and the wheel test, which builds the wheel). A test binary is cargo's
# newest `target/release/deps/<name>-<hash>`; `EXTRA="name=path ..."` adds
# other files under a name of their own. gpu_random is the batch built last
# (the batch's variables rebuild the same binary): to carry a map batch too,
# build it first (CODA_RANDOM_MAPS=1 CODA_RANDOM_PROGRAMS=8 cargo test
# --release -p coda-random-programs --no-run), copy that binary aside, build
# the default batch, and pass EXTRA="gpu_random_maps=/path/to/the/copy".
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rel=target/release
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
newest() { # the newest executable cargo test binary of this name
  find "$rel/deps" -maxdepth 1 -type f -executable -name "$1-*" ! -name '*.d' -printf '%T@ %p\n' | sort -n | tail -1 | cut -d' ' -f2-
}
for f in coda time_programs llama-norm; do
  [[ -x "$rel/$f" ]] || { echo "device-pack: $rel/$f missing; build it first" >&2; exit 1; }
  cp "$rel/$f" "$stage/$f"
done
for t in gpu gpu_user gpu_random; do
  p=$(newest "$t")
  [[ -n "$p" ]] || { echo "device-pack: no test binary $t in $rel/deps; run cargo test --release --workspace --no-run" >&2; exit 1; }
  cp "$p" "$stage/$t"
done
for e in ${EXTRA:-}; do
  cp "${e#*=}" "$stage/${e%%=*}"
done
strip "$stage"/*
mkdir -p .device
tar cJf .device/bins.tar.xz -C "$stage" .
wheel=$(ls -t target/tmp/python-wheel/dist/coda_rs-*.whl 2>/dev/null | head -1 || true)
rm -f .device/coda_rs-*.whl
[[ -n "$wheel" ]] && cp "$wheel" .device/
ls -la .device
