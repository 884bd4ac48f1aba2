#!/usr/bin/env bash
# Session 30's planned call 2 (no machine was lent in sessions 29 and 30):
# session 28's planned call 3, parts 1-3, on the build call 1 checked (the
# FP8 branch's pack: its bf16 kernels are main's, byte for byte), logging
# straight into $OUT/call2 so a run cut by the limit keeps what it did;
# timeouts sum to 565 s. Carry [".device"] (scripts/device-pack.sh).
# (1) The wheel's tests. (2) The LM-head tail's kernels beside its three
# bare GEMMs (block_profile.py --vocab) at compare.py's two shapes; the
# loss variants (head_variants.py; soft-capping was 1.027x the plain tail).
# (3) The d = 8192 block: SM clock and power (nvidia-smi every 50 ms) while
# the CODA step and its bare GEMMs each run alone for ~3 s; our plain GEMM
# and SwiGLU with and without the save searched at the gate_up shape; then
# Nsight Compute over the forward's gate_up kernel and cuBLASLt's.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
o=$OUT/call2; rm -rf /tmp/b /tmp/site; mkdir -p /tmp/b /tmp/site "$o"
tar xJf .device/bins.tar.xz -C /tmp/b && cp .device/coda_rs-*.whl /tmp/b/
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/coda_rs-*.whl > "$o/pip-site.log" 2>&1
PYTHONPATH=/tmp/site PARTS=python timeout 100 scripts/device-verify.sh /tmp/b "$o" > "$o/verify-python.txt" 2>&1
echo "wheel tests at $(el) s: $(tail -1 "$o/python.log")"
export PYTHONPATH=/tmp/site
for d in 4096 8192; do
  timeout 45 python3 bench/block_profile.py --vocab 32768 --d $d --tokens $d > "$o/head-profile-d$d.txt" 2>&1
  echo "head profile d=$d exit $? at $(el) s"
done
timeout 60 python3 bench/head_variants.py > "$o/head-variants.txt" 2>&1
echo "head_variants exit $? at $(el) s"
nvidia-smi --help-query-gpu > "$o/smi-fields.txt" 2>&1
reasons=clocks_event_reasons.active; grep -q "$reasons" "$o/smi-fields.txt" || reasons=clocks_throttle_reasons.active
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,$reasons --format=csv,nounits -lms 50 > "$o/smi.csv" 2>&1 &
smi=$!
timeout 45 python3 - > "$o/clock-phases.txt" 2>&1 <<'PY'
# The d = 8192 block's CODA step and its twelve bare GEMMs, each repeated for ~3 s, phases stamped (host clock).
import sys, time, torch
sys.argv = ["block_profile.py", "--steps", "1"]
sys.path.insert(0, "bench")
import block_profile as bp
captured = {}
bp.show = lambda title, step: None
bp.per_step = lambda fn, steps: captured.setdefault(len(captured), fn) and []
bp.main()
for name, fn in zip(["coda", "gemms"], captured.values()):
    fn(); torch.cuda.synchronize()
    start = time.time(); n = 0
    while time.time() - start < 3.0:
        fn(); n += 1
        torch.cuda.synchronize()
    print(f"{name} {start:.3f} {time.time():.3f} steps {n} ms/step {(time.time() - start) / n * 1e3:.2f}")
PY
kill $smi
echo "clock phases at $(el) s: $(tr '\n' ';' < "$o/clock-phases.txt")"
# Whose time is the SwiGLU-save's ~25% at d = 8192: the epilogue's, or our GEMM's at this shape?
for p in matmul linear_rowscale_swiglu linear_rowscale_swiglu_save; do
  CODA_TUNE_CACHE=$o/gate-up-$p.json timeout 50 scripts/device-run.sh /tmp/b/coda tune --program coda-llama::$p --shape 16384,57344,8192 >> "$o/gate-up-8192.log" 2>&1
done
echo "gate_up searches at $(el) s: $(grep -o 'coda-llama::[a-z_]* M=.*choices)' "$o/gate-up-8192.log" | tr '\n' ';')"
timeout 120 ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:swiglu_save|nvjet_sm90_tst_192x192_64x4_1x2_h" \
  --launch-skip 2 --launch-count 4 --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
  --section LaunchStats --section Occupancy --metrics sm__cycles_elapsed.avg.per_second,dram__bytes_read.sum,dram__bytes_write.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_sector_hit_rate.pct \
  -f -o /tmp/block8192 python3 bench/block_profile.py --d 8192 --ffn 28672 --steps 1 > "$o/ncu-block.log" 2>&1
echo "ncu block exit $? at $(el) s"
[[ -f /tmp/block8192.ncu-rep ]] && timeout 20 ncu --import /tmp/block8192.ncu-rep --page raw --csv > "$o/block8192.raw.csv" 2>&1 && timeout 20 ncu --import /tmp/block8192.ncu-rep --page details > "$o/block8192.txt" 2>&1 && cp /tmp/block8192.ncu-rep "$o/"
grep -A4 "by kernel" "$o/head-profile-d4096.txt" | head -12; grep "GPU time" "$o"/head-profile-*.txt; tail -7 "$o/head-variants.txt"
python3 - "$o" <<'PY'
import csv, statistics, sys
from datetime import datetime
o = sys.argv[1]
ph = [l.split() for l in open(f"{o}/clock-phases.txt") if l.split() and l.split()[0] in ("coda", "gemms")]
def sample(r):  # (time, SM MHz, W, reasons), or None for a cut or [N/A] row
    try:
        return datetime.strptime(r[0].strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp(), float(r[1]), float(r[3]), r[5].strip()
    except (IndexError, ValueError):
        return None
rows = [s for s in map(sample, csv.reader(open(f"{o}/smi.csv"))) if s]
for name, a, b, *_ in ph:
    a, b = float(a), float(b)
    sel = [r for r in rows if a + 0.3 <= r[0] <= b]
    if sel:
        print(name, len(sel), "samples; SM MHz median", statistics.median(r[1] for r in sel), "power W median",
              statistics.median(r[2] for r in sel), "reasons", sorted(set(r[3] for r in sel)))
try:
    rows = list(csv.reader(open(f"{o}/block8192.raw.csv")))
except OSError:
    sys.exit("no block8192.raw.csv")
h = next(i for i, r in enumerate(rows) if r and r[0] == "ID")
names = rows[h]
want = ["gpu__time_duration.sum", "sm__cycles_elapsed.avg.per_second", "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", "dram__bytes_read.sum", "dram__bytes_write.sum",
        "lts__t_sector_hit_rate.pct", "smsp__warps_eligible.avg.per_cycle_active"]
print("kernel", *[w.split(".")[0] for w in want], sep=" | ")
print("units", *[rows[h + 1][names.index(w)] if w in names else "?" for w in want], sep=" | ")
for r in rows[h + 2:]:
    k = r[names.index("Kernel Name")]
    k = "swiglu_save" if "swiglu_save" in k else k[:40]
    print(k, *[r[names.index(w)] if w in names else "?" for w in want], sep=" | ")
PY
