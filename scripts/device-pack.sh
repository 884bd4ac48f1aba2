#!/usr/bin/env bash
# Packs this checkout's release build for the GPU machine (which has no
# cargo) into .device/, the git-ignored folder a device call carries
# (`carry: [".device"]`): the `coda` CLI, the test binaries that
# scripts/device-verify.sh runs, `time_programs` and the main job
# `llama-norm`, stripped, in .device/bins.tar.xz (flat: `tar xJf
# .device/bins.tar.xz -C BIN_DIR`), and the newest wheel beside it (copy it
# into BIN_DIR for device-verify.sh's `python` and `train` parts).
# Builds nothing: run it after
#   cargo build --release -p coda-cli -p llama-norm && cargo test --release --workspace --no-run
# (the workspace tests build the wheel). A test binary is cargo's newest
# `target/release/deps/<name>-<hash>` by time. EXTRA="name=path ..." adds
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
fail() { echo "device-pack: $*" >&2; exit 1; }
newest() { # the newest executable cargo test binary of this name
  find "$rel/deps" -maxdepth 1 -type f -executable -name "$1-*" ! -name '*.d' -printf '%T@ %p\n' | sort -n | tail -1 | cut -d' ' -f2-
}
for f in coda time_programs llama-norm; do
  [[ -x "$rel/$f" ]] || fail "$rel/$f missing; build it first"
  cp "$rel/$f" "$stage/$f"
done
for t in gpu gpu_user gpu_random; do
  p=$(newest "$t")
  [[ -n "$p" ]] || fail "no test binary $t in $rel/deps; run cargo test --release --workspace --no-run"
  cp "$p" "$stage/$t"
done
read -ra extra <<< "${EXTRA:-}"
for e in "${extra[@]}"; do
  [[ "$e" == ?*=?* ]] || fail "EXTRA entry '$e' is not name=path"
  [[ -f "${e#*=}" ]] || fail "EXTRA entry '$e': no such file"
  cp "${e#*=}" "$stage/${e%%=*}"
done
for f in "$stage"/*; do
  if [[ "$(head -c 4 "$f")" == $'\x7fELF' ]]; then # an EXTRA entry may be a script
    strip "$f"
  fi
done
chmod 755 "$stage"
mkdir -p .device
tar cJf .device/bins.tar.xz -C "$stage" .
wheel=$(ls -t target/tmp/python-wheel/dist/coda_rs-*.whl 2>/dev/null | head -1 || true)
rm -f .device/coda_rs-*.whl
if [[ -n "$wheel" ]]; then
  cp "$wheel" .device/
else
  echo "device-pack: no wheel in target/tmp/python-wheel/dist (the workspace tests build it); packed without one" >&2
fi
ls -la .device
