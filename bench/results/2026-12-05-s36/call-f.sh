#!/usr/bin/env bash
# Session 36, call F (~120 s): the LM-head op's gradient scaling by CODA's
# `aux::scale_into` instead of PyTorch's mixed-dtype `mul(out=)`: the GPU
# outcome (bit for bit against the host), the wheel's head tests (against
# f64, and bit for bit against PyTorch's mul at a loss gradient of -0.3
# and 1), then the tail's profile at d = 4096 and 8192 as in call D.
# Carry [".device"].
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
o=$OUT/call-f; rm -rf /tmp/b /tmp/py; mkdir -p /tmp/b /tmp/py "$o"
tar xJf .device/bins.tar.xz -C /tmp/b
timeout 60 scripts/device-run.sh /tmp/b/gpu --only scale_into > "$o/gpu.log" 2>&1
echo "gpu scale_into exit $? at $(el) s: $(tail -1 "$o/gpu.log")"; grep -A24 "scale_into" "$o/gpu.log" | head -30
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/py .device/coda_rs-*.whl > "$o/pip.log" 2>&1
(cd coda-python/tests && PYTHONPATH=/tmp/py PYTHONUNBUFFERED=1 timeout 120 python3 -m unittest -v test_head) > "$o/python-head.log" 2>&1
echo "python head exit $? at $(el) s"; grep -E "ok$|FAIL|ERROR|Ran|^OK" "$o/python-head.log" | tail -12
for a in "--vocab 32768 --d 4096 --tokens 4096" "--vocab 32768 --d 8192 --tokens 8192"; do
  tag=$(echo "$a" | tr -d ' -')
  PYTHONPATH=/tmp/py timeout 60 python3 bench/block_profile.py $a --steps 3 > "$o/profile-$tag.log" 2>&1
  echo "== profile $a exit $? at $(el) s"; grep -E "GPU time a step|elementwise|scale_into" "$o/profile-$tag.log" | head -8
done
tar czf "$OUT/call-f.tgz" -C "$OUT" call-f
