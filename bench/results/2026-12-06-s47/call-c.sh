#!/usr/bin/env bash
# Session 47, call C (carry [".device"], ≤ 300 s, any card): the wheel's
# PyTorch tests of the block and LM-head ops and of `launch` on this build,
# for the audit's fixes: an op's tensors 16-byte aligned (checked under the
# caller's names before the first launch), empty batches refused by the
# caller's name, scalars and loss terms that f32 would change refused, a
# DLPack producer's own exceptions (test_cpu) kept as they are unless they
# refuse the export.
set -uo pipefail
nvidia-smi --query-gpu=name --format=csv,noheader
o=$OUT/c; rm -rf /tmp/b; mkdir -p /tmp/b "$o"
tar xJf .device/bins.tar.xz -C /tmp/b && cp .device/coda_rs-*.whl /tmp/b/
site=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" /tmp/b/coda_rs-*.whl > "$o/pip.log" 2>&1
(cd coda-python/tests && PYTHONPATH="$site" PYTHONUNBUFFERED=1 timeout 270 python3 -m unittest -v test_cpu test_gpu test_block test_head) > "$o/python.log" 2>&1
echo "python exit $?"
grep -E "^  (x0|pos|x|w|softcap|z_loss):|^(Ran|OK|FAILED)|^(FAIL|ERROR):" "$o/python.log" | tail -40
tar czf "$OUT/c.tgz" -C "$OUT" c
