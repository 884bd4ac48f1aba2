#!/usr/bin/env bash
# Session 42, call G (≤ 120 s; carry [".device"]): call E's profile summed
# 10.2 ms of kernels in the plain tail's 11.3 ms call (d = 2048, 4 chunks,
# through the wheel), and label smoothing's kernels now take the plain
# ones' time while its call still took 1.02–1.03×. Does the GPU wait on
# the host? head_variants.py --host (host ms per call; GPU ms with every
# launch queued ahead) at d = 2048 and 4096, main's wheel.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { local l=$(( $1 - $(el) )); echo $(( l > 1 ? l : 1 )); }
o=$OUT/call-g; rm -rf /tmp/py; mkdir -p /tmp/py "$o"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$o/gpu.txt" 2>&1; cat "$o/gpu.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/py .device/coda_rs-*.whl > "$o/pip.log" 2>&1
for h in 2048 4096; do
  PYTHONPATH=/tmp/py timeout "$(left 110)" python3 bench/head_variants.py --hidden $h --samples 20 --host > "$o/host-$h.log" 2>&1
  echo "== d=$h exit $? at $(el) s"; grep -vE "^NVIDIA|^loss" "$o/host-$h.log"
done
tar czf "$OUT/call-g.tgz" -C "$OUT" call-g
echo "done at $(el) s"
