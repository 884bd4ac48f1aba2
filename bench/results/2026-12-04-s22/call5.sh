#!/usr/bin/env bash
# Session 22, call 5: where the LM-head tail's forward + backward spends its
# time beside its GEMMs (1.057x / 1.051x cuBLASLt in call 4): Nsight
# Compute's duration of each kernel of the first fused tail launches
# (coda_rs.head.head_loss, plain cross-entropy, M=16384 d=2048 V=32768,
# chunks of 4096: bench/head_variants.py's warm-up), CODA's, CUTLASS's and
# cuBLAS's kernels (PyTorch's own input set-up excluded by name), the L2
# left as it is, clocks as they are.
set -uo pipefail
mkdir -p /tmp/b /tmp/o && cp .device/coda_rs-*.whl /tmp/b/
site=$(mktemp -d); python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" /tmp/b/coda_rs-*.whl > /tmp/o/pip.log 2>&1
PYTHONPATH="$site" timeout 240 scripts/device-run.sh ncu --clock-control none --cache-control none --kernel-name-base demangled \
  --kernel-name "regex:device_kernel|finish|row_weights|nvjet|xmma|gemm|repeat_two|Kernel" \
  --launch-count 60 --metrics gpu__time_duration.sum --csv \
  python3 bench/head_variants.py --samples 1 > /tmp/o/ncu-tail.csv 2> /tmp/o/ncu-tail.err
echo "ncu exit $?"
tar czf "$OUT/call5.tgz" -C /tmp/o .
python3 - /tmp/o/ncu-tail.csv <<'PY'
import csv, re, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; name, metric, value = h.index("Kernel Name"), h.index("Metric Name"), h.index("Metric Value")
for r in rows[1:]:
    if r[metric] != "gpu__time_duration.sum": continue
    n = r[name]
    m = re.search(r"coda_gen::\w+?_0_1_0_(\w+?)__", n)
    short = m.group(1) if m else n.split("(")[0].split("<")[0].split("::")[-1][:60]
    print(f"{r[value]:>12} ns  {short}")
PY
