#!/usr/bin/env bash
# One call on the GPU machine, building nothing: the GPU tests (full set,
# with the 30 s concurrency stress), the random-program batch, a fresh timed
# search at every shape of the shipped H200 tuning cache (its result is the
# new coda-llama/tuning/nvidia-h200.json), and `coda bench` with that cache.
# Usage: [PARTS="gpu random tune bench"] scripts/device-verify.sh BIN_DIR OUT_DIR
# BIN_DIR holds the release binaries `gpu`, `gpu_random` and `coda`; PARTS
# (default all four) splits the work across calls of the 10-minute limit.
# `bench` alone uses the cache OUT_DIR/tuning.json if an earlier `tune` left one there.
set -uo pipefail
bin=$1 out=$2
here=$(dirname "$0")
parts=" ${PARTS:-gpu random tune bench} "
part() { [[ "$parts" == *" $1 "* ]]; }
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu-info.txt" 2>&1
# Each part runs when its binary is in BIN_DIR.
if part gpu && [[ -x "$bin/gpu" ]]; then
  "$here/device-run.sh" "$bin/gpu" > "$out/gpu.log" 2>&1
  echo "gpu exit $?"
fi
if part random && [[ -x "$bin/gpu_random" ]]; then
  "$here/device-run.sh" "$bin/gpu_random" > "$out/random.log" 2>&1
  echo "gpu_random exit $?"
fi
[[ -x "$bin/coda" ]] || exit 0
if part tune; then
# Each shipped program at each of its shapes (programs matching a name as a
# substring are searched too; only the shipped pairs are kept afterwards).
python3 - "$here/../coda-llama/tuning/nvidia-h200.json" > "$out/tune-args.txt" <<'PY'
import json, sys
from collections import defaultdict
shapes = defaultdict(list)
for e in json.load(open(sys.argv[1])):
    shapes[e["program"].split("::")[1]].append(f"{e['m']},{e['n']},{e['k']}")
for p, s in shapes.items():
    print(p, " ".join(f"--shape {x}" for x in s))
PY
start=$(date +%s)
while read -r program args; do
  # shellcheck disable=SC2086
  CODA_TUNE_CACHE="$out/tuning.json" "$here/device-run.sh" "$bin/coda" tune --program "$program" $args >> "$out/tune.log" 2>&1
done < "$out/tune-args.txt"
echo "tune exit $? ($(( $(date +%s) - start )) s)"
fi
if part bench; then
CODA_TUNE_CACHE="$out/tuning.json" "$here/device-run.sh" "$bin/coda" bench ${BENCH_ARGS:-} --json "$out/coda.json" --svg "$out/coda.svg" \
  > "$out/bench.log" 2>&1
echo "bench exit $?"
fi
grep -E "^FAIL" "$out/gpu.log" "$out/random.log" 2>/dev/null | head -20
tail -1 "$out/gpu.log" "$out/random.log" 2>/dev/null
head -20 "$out/bench.log"
