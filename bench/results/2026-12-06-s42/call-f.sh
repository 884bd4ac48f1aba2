#!/usr/bin/env bash
# Session 42, call F (≤ 240 s; carry [".device"]): what soft-capping's row
# partial costs. An experiment build (.device/exp2: the wheel of main at
# f84c7e1 with `linear_cross_entropy_save_softcap` writing no row sums,
# which soft-capping without label smoothing does not need; not main)
# against main's wheel, A B A at d = 2048 (the soft-capped row is the
# one that compares; the experiment's "all three" row lacks its sums),
# then main's d = 4096 twice (call E's label smoothing 1.021 beside all
# three's 1.004: the spread between runs).
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { local l=$(( $1 - $(el) )); echo $(( l > 1 ? l : 1 )); }
o=$OUT/call-f; rm -rf /tmp/py /tmp/pyx; mkdir -p /tmp/py /tmp/pyx "$o"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/py .device/coda_rs-*.whl > "$o/pip.log" 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/pyx .device/exp2/coda_rs-*.whl >> "$o/pip.log" 2>&1
run() { # tag pythonpath hidden
  PYTHONPATH=$2 timeout "$(left 230)" python3 bench/head_variants.py --hidden $3 > "$o/variants-$1.log" 2>&1
  echo "== $1 exit $? at $(el) s"; grep -E "^[a-z].* [0-9.]+ +[0-9.]+$" "$o/variants-$1.log"
}
run main-2048-1 /tmp/py 2048
run nosum-2048-1 /tmp/pyx 2048
run main-2048-2 /tmp/py 2048
run nosum-2048-2 /tmp/pyx 2048
run main-4096-1 /tmp/py 4096
run main-4096-2 /tmp/py 4096
tar czf "$OUT/call-f.tgz" -C "$OUT" call-f
echo "done at $(el) s"
