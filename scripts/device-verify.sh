#!/usr/bin/env bash
# One call on the GPU machine, building nothing: the GPU tests (full set,
# with the 30 s concurrency stress), the untuned suite's programs checked
# (`gpu_user`), the Python wheel's tests on PyTorch tensors (`python`: the
# wheel in BIN_DIR installed with pip), the random-program batch, a fresh timed
# search at every shape of coda-llama's shipped searches, those of any GPU
# (`bench/ship_tuning.py` makes its result this GPU's file in
# coda-llama/tuning/), a search of the untuned suite
# against the heuristic's choices (`heuristic`), `coda bench` with that cache, and
# the training comparison (`train`: bench/train/run.sh with the wheel, its
# variants TRAIN_VARIANTS, its arguments TRAIN_ARGS).
# `programs` times the test programs beside cuBLASLt (`time_programs --quick --programs-only`);
# `fp8` only the FP8 programs, beside cuBLASLt's FP8 GEMM and their bf16 programs, at full samples.
# `compare` runs bench/compare.py (`coda bench` beside the PyTorch baselines; not in the default PARTS).
# Usage: [PARTS="gpu user python random programs fp8 tune heuristic bench train"] scripts/device-verify.sh BIN_DIR OUT_DIR
# Narrower runs: GPU_ARGS (e.g. "--quick", "--only dswiglu --only rope", "--skip stress") for `gpu`,
# PROGRAMS_ARGS for `time_programs` (default "--quick --programs-only"),
# TUNE_ONLY (a program name) to search only that program's shipped shapes.
# BIN_DIR holds the release binaries `gpu`, `gpu_user`, `gpu_random`,
# `time_programs` and `coda`, and the wheel `coda_rs-*.whl` (scripts/device-pack.sh
# packs them into .device/ on the build machine); PARTS (default
# all ten) splits the work across calls of the 10-minute limit.
# `bench` alone uses the cache OUT_DIR/tuning.json if an earlier `tune` left one there.
set -uo pipefail
bin=$1 out=$2
here=$(dirname "$0")
parts=" ${PARTS:-gpu user python random programs fp8 tune heuristic bench train} "
part() { [[ "$parts" == *" $1 "* ]]; }
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/gpu-info.txt" 2>&1
# Each part runs when its binary is in BIN_DIR.
if part gpu && [[ -x "$bin/gpu" ]]; then
  # shellcheck disable=SC2086  # a list of arguments
  "$here/device-run.sh" "$bin/gpu" ${GPU_ARGS:-} > "$out/gpu.log" 2>&1
  echo "gpu exit $?"
fi
if part user && [[ -x "$bin/gpu_user" ]]; then
  "$here/device-run.sh" "$bin/gpu_user" > "$out/user.log" 2>&1
  echo "gpu_user exit $?"
fi
wheel=$(ls "$bin"/coda_rs-*.whl 2>/dev/null | head -1)
site=$(mktemp -d)
[[ -n "$wheel" ]] && python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$wheel" > "$out/pip.log" 2>&1
if part python && [[ -n "$wheel" ]]; then
  (cd "$here/../coda-python/tests" && PYTHONPATH="$site" PYTHONUNBUFFERED=1 python3 -m unittest discover -v -p "test_*.py") > "$out/python.log" 2>&1
  echo "python exit $?"
fi
if part random && [[ -x "$bin/gpu_random" ]]; then
  "$here/device-run.sh" "$bin/gpu_random" > "$out/random.log" 2>&1
  echo "gpu_random exit $?"
fi
if part programs && [[ -x "$bin/time_programs" ]]; then
  # shellcheck disable=SC2086  # a list of arguments
  "$here/device-run.sh" "$bin/time_programs" ${PROGRAMS_ARGS:---quick --programs-only} > "$out/time-programs.log" 2>&1
  echo "time_programs exit $?"
fi
if part fp8 && [[ -x "$bin/time_programs" ]]; then
  "$here/device-run.sh" "$bin/time_programs" --programs-only --only fp8 > "$out/fp8.log" 2>&1
  echo "time_programs fp8 exit $?"
fi
if part train && [[ -n "$wheel" ]]; then
  # shellcheck disable=SC2086  # a list of variants
  PYTHONPATH="$site" PYTHONUNBUFFERED=1 "$here/../bench/train/run.sh" "$out/train" \
    ${TRAIN_VARIANTS:-plain:none:0 plain:none:1 coda:none:0 plain:default:0 coda:default:0 plain:max-autotune:0 coda:max-autotune:0} \
    > "$out/train.log" 2>&1
  echo "train exit $?"
fi
[[ -x "$bin/coda" ]] || exit 0
if part tune; then
# Each shipped program at each of its shapes in any GPU's file (`--program
# NAME` picks the program of that name alone).
python3 - "${TUNE_ONLY:-}" "$here"/../coda-llama/tuning/*.json > "$out/tune-args.txt" <<'PY'
import json, sys
from collections import defaultdict
shapes = defaultdict(dict)
for path in sys.argv[2:]:
    for e in json.load(open(path)):
        name = e["program"].split("::")[1]
        if sys.argv[1] in ("", name):
            shapes[name][f"{e['m']},{e['n']},{e['k']}"] = None
for p, s in shapes.items():
    print(p, " ".join(f"--shape {x}" for x in s))
PY
start=$(date +%s)
while read -r program args; do
  # shellcheck disable=SC2086
  CODA_LOG=debug CODA_TUNE_CACHE="$out/tuning.json" "$here/device-run.sh" "$bin/coda" tune --program "$program" $args >> "$out/tune.log" 2>&1
done < "$out/tune-args.txt"
echo "tune exit $? ($(( $(date +%s) - start )) s)"
fi
if part heuristic; then
# The untuned suite's programs searched at shapes the cost model was not
# fitted to (its held-out check), into a cache of their own; the table
# says where the heuristic's choice stands against each search's best.
start=$(date +%s)
# shellcheck disable=SC2086  # a list of arguments
CODA_LOG=debug CODA_TUNE_CACHE="$out/heuristic-tuning.json" "$here/device-run.sh" "$bin/coda" tune --program coda-user-programs:: \
  ${HEURISTIC_SHAPES:---shape 4096,4096,4096 --shape 8192,8192,8192 --shape 1000,4096,1024 --shape 16384,2048,2048 --shape 4096,14336,4096 --shape 8192,4096,16384} \
  > "$out/heuristic.log" 2>&1
echo "heuristic exit $? ($(( $(date +%s) - start )) s)"
python3 "$here/../bench/heuristic_report.py" "$out/heuristic.log" > "$out/heuristic-table.txt" 2>&1
fi
if part compare; then
# `coda bench` and the PyTorch baselines in one run (bench/compare.py), with the shipped tuning.
start=$(date +%s)
PYTHONUNBUFFERED=1 python3 "$here/../bench/compare.py" --coda "$bin/coda" --out "$out/compare" > "$out/compare.log" 2>&1
echo "compare exit $? ($(( $(date +%s) - start )) s)"
fi
if part bench; then
CODA_TUNE_CACHE="$out/tuning.json" "$here/device-run.sh" "$bin/coda" bench ${BENCH_ARGS:-} --json "$out/coda.json" --svg "$out/coda.svg" \
  > "$out/bench.log" 2>&1
echo "bench exit $?"
fi
grep -E "^FAIL" "$out/gpu.log" "$out/user.log" "$out/random.log" 2>/dev/null | head -20
tail -1 "$out/gpu.log" "$out/user.log" "$out/random.log" 2>/dev/null
grep -A12 "^FP8 program" "$out/fp8.log" 2>/dev/null
grep -B1 -A14 "^program " "$out/time-programs.log" 2>/dev/null | grep -v "^FP8\|^--"
grep -v "DEBUG\|^cache" "$out/tune.log" 2>/dev/null | tail -8
tail -4 "$out/python.log" 2>/dev/null
tail -12 "$out/train.log" 2>/dev/null
tail -2 "$out/heuristic-table.txt" 2>/dev/null
grep -v "cuBLASLt$" "$out/bench.log" 2>/dev/null | tail -50
grep "^|" "$out/compare.log" 2>/dev/null | tail -60
