#!/usr/bin/env bash
# Session 25, call 6: Nsight Compute over the d = 8192 block's kernels that
# exceed their bare GEMMs most (call 5: linear_rowscale_swiglu_save +3.1 ms,
# the second rmsnorm_backward +1.4 ms, the f32 weight gradients) and the
# bare cuBLAS GEMMs beside them, inside bench/block_profile.py --steps 1
# (three warm-up steps, then one: every matching launch is profiled).
set -uo pipefail
rm -rf /tmp/o /tmp/site; mkdir -p /tmp/o /tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/coda_rs-*.whl > /tmp/o/pip.log 2>&1
PYTHONPATH=/tmp/site timeout 400 ncu --clock-control none --kernel-name-base demangled \
  --kernel-name "regex:swiglu_save|rmsnorm_backward|nvjet" \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy \
  -f -o /tmp/o/block8192 python3 bench/block_profile.py --d 8192 --ffn 28672 --steps 1 > /tmp/o/ncu-run.log 2>&1
echo "ncu exit $?"
ncu --import /tmp/o/block8192.ncu-rep --page raw --csv \
  --metrics gpu__time_duration.sum,sm__cycles_elapsed.max,dram__bytes_read.sum,dram__bytes_write.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__shared_mem_per_block_dynamic,launch__registers_per_thread \
  > /tmp/o/block8192.raw.csv 2>&1
rm -f /tmp/o/block8192.ncu-rep
python3 - <<'PY'
import csv, re
rows = list(csv.reader(open("/tmp/o/block8192.raw.csv")))
head = next(i for i, r in enumerate(rows) if r and r[0] == "ID")
names = rows[head]
col = lambda n: names.index(n)
units = rows[head + 1]
print("units:", {n: units[i] for i, n in enumerate(names) if n.startswith(("gpu__", "dram__"))})
for r in rows[head + 2:]:
    k = r[col("Kernel Name")]
    m = re.search(r"coda_coda_[a-z_]+?_\d+_\d+_\d+_(\w+?)__((?:coop|pp)_\d+x\d+_c\dx\d)", k)
    k = m.group(1) if m else k[:48]
    g = lambda n: r[col(n)] if n in names else "?"
    print(f"{r[col('ID')]:>3} {k:48} time {g('gpu__time_duration.sum'):>10}  dram rd {g('dram__bytes_read.sum'):>10} wr {g('dram__bytes_write.sum'):>10}"
          f"  tensor {g('sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active'):>6}  mem% {g('gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed'):>6}  grid {g('launch__grid_size')}")
PY
tar czf "$OUT/call6.tgz" -C /tmp/o .
tail -5 /tmp/o/ncu-run.log
