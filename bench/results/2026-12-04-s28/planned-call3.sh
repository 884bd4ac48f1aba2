#!/usr/bin/env bash
# Session 28, call 3: profile evidence for issue H's rows still over target
# in call 2's compare.py run. (1) gpu --quick (with the kit's two wide
# map programs, new after the session's device time) and gpu_random; the
# wheel's tests on this build. (2) The
# LM-head tail's kernels beside its three bare GEMMs (block_profile.py
# --vocab) at compare.py's two shapes; the loss variants (head_variants.py,
# issue I: soft-capping was 1.027x the plain tail). (3) The d = 8192 block: SM clock and
# power (nvidia-smi every 50 ms) while the CODA block's step and its bare
# GEMMs each run alone for ~3 s; then Nsight Compute over the forward's
# gate_up kernel (linear_rowscale_swiglu_save) and the bare gate_up GEMM,
# after our plain GEMM and SwiGLU with and without the save searched there
# with warp-state and memory sections and the SM clock. (4) Nsight Compute
# over linear_residual_rms_partial and linear_rowscale_rope at 4096 beside
# our plain GEMM (matmul) in ping-pong 128x128 (SourceCounters for
# bench/ncu_stalls.py).
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf /tmp/b /tmp/o /tmp/site; mkdir -p /tmp/b /tmp/o /tmp/site
tar xJf .device/bins.tar.xz -C /tmp/b && cp .device/coda_rs-*.whl /tmp/b/
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/coda_rs-*.whl > /tmp/o/pip.log 2>&1
GPU_ARGS=--quick PARTS="gpu random" timeout 200 scripts/device-verify.sh /tmp/b /tmp/o > /tmp/o/verify-check.txt 2>&1
echo "checks at $(el) s: $(tail -1 /tmp/o/gpu.log) / $(tail -1 /tmp/o/random.log)"
PYTHONPATH=/tmp/site PARTS=python timeout 120 scripts/device-verify.sh /tmp/b /tmp/o > /tmp/o/verify-python.txt 2>&1
echo "wheel tests at $(el) s: $(tail -1 /tmp/o/python.log)"
export PYTHONPATH=/tmp/site
for s in "4096 4096" "8192 8192"; do
  set -- $s
  timeout 60 python3 bench/block_profile.py --vocab 32768 --d $1 --tokens $2 > /tmp/o/head-profile-d$1.txt 2>&1
  echo "head profile d=$1 exit $? at $(el) s"
done
timeout 90 python3 bench/head_variants.py > /tmp/o/head-variants.txt 2>&1
echo "head_variants exit $? at $(el) s"
nvidia-smi --help-query-gpu > /tmp/o/smi-fields.txt 2>&1
reasons=clocks_event_reasons.active; grep -q "$reasons" /tmp/o/smi-fields.txt || reasons=clocks_throttle_reasons.active
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,$reasons --format=csv,nounits -lms 50 > /tmp/o/smi.csv 2>&1 &
smi=$!
timeout 90 python3 - > /tmp/o/clock-phases.txt 2>&1 <<'PY'
# The d = 8192 block's CODA step and its twelve bare GEMMs, each repeated for ~3 s, phases stamped (host clock).
import sys, time, torch
sys.argv = ["block_profile.py", "--steps", "1"]
sys.path.insert(0, "bench")
import block_profile as bp
captured = {}
bp.show = lambda title, step: None
orig = bp.per_step
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
echo "clock phases at $(el) s: $(cat /tmp/o/clock-phases.txt | tr '\n' ';')"
# Whose time is it, the epilogue's or our GEMM's at this shape? Our plain GEMM, SwiGLU without the
# save and with it, each searched at the d = 8192 gate_up shape.
for p in matmul linear_rowscale_swiglu linear_rowscale_swiglu_save; do
  CODA_TUNE_CACHE=/tmp/o/gate-up-$p.json timeout 60 scripts/device-run.sh /tmp/b/coda tune --program coda-llama::$p --shape 16384,57344,8192 >> /tmp/o/gate-up-8192.log 2>&1
done
echo "gate_up searches at $(el) s: $(grep -o 'coda-llama::[a-z_]* M=.*choices)' /tmp/o/gate-up-8192.log | tr '\n' ';')"
timeout 200 ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:swiglu_save|nvjet_sm90_tst_192x192_64x4_1x2_h" \
  --launch-skip 2 --launch-count 4 --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
  --section LaunchStats --section Occupancy --metrics sm__cycles_elapsed.avg.per_second,dram__bytes_read.sum,dram__bytes_write.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_sector_hit_rate.pct \
  -f -o /tmp/o/block8192 python3 bench/block_profile.py --d 8192 --ffn 28672 --steps 1 > /tmp/o/ncu-block.log 2>&1
echo "ncu block exit $? at $(el) s"
[[ -f /tmp/o/block8192.ncu-rep ]] && ncu --import /tmp/o/block8192.ncu-rep --page raw --csv > /tmp/o/block8192.raw.csv 2>&1 && ncu --import /tmp/o/block8192.ncu-rep --page details > /tmp/o/block8192.txt 2>&1 && rm -f /tmp/o/block8192.ncu-rep
for k in linear_residual_rms_partial:4096,4096,4096:pp_128x128_c1x2 matmul:4096,4096,4096:pp_128x128_c1x2 linear_rowscale_rope:4096,12288,4096:pp_128x192_c2x1 matmul:4096,12288,4096:pp_128x128_c1x2; do
  IFS=: read -r name shape cfg <<< "$k"; tag=$name-${shape%%,*}-${shape#*,}; tag=${tag%%,*}
  CODA_TUNE_CACHE=/tmp/o/ncu-cache-$tag.json timeout 90 scripts/device-run.sh ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:_${name}__${cfg}" \
    --launch-skip 3 --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis --section SchedulerStats \
    --section WarpStateStats --section InstructionStats --section LaunchStats --section Occupancy --section SourceCounters \
    -f -o /tmp/o/$tag /tmp/b/coda tune --program coda-llama::$name --shape $shape > /tmp/o/$tag.run.log 2>&1
  [[ -f /tmp/o/$tag.ncu-rep ]] || { echo "$tag: no report"; tail -3 /tmp/o/$tag.run.log; continue; }
  ncu --import /tmp/o/$tag.ncu-rep --page details > /tmp/o/$tag.txt 2>&1
  ncu --import /tmp/o/$tag.ncu-rep --page raw --csv > /tmp/o/$tag.raw.csv 2>&1
  ncu --import /tmp/o/$tag.ncu-rep --page source --csv --print-source sass 2>/dev/null | xz > /tmp/o/$tag.sass.csv.xz
  rm -f /tmp/o/$tag.ncu-rep
  echo "== $tag: $(grep -E '^    (Elapsed Cycles|SM Frequency|Duration)' /tmp/o/$tag.txt | tr -s ' ' | paste -sd'|')"
  python3 bench/ncu_stalls.py /tmp/o/$tag.sass.csv.xz 2>&1 | tail -n 3
done 2>&1 | tee /tmp/o/regions.txt
echo "ncu ops at $(el) s"
tar czf "$OUT/call3.tgz" -C /tmp/o .
grep -A4 "by kernel" /tmp/o/head-profile-d4096.txt | head -12; grep "GPU time" /tmp/o/head-profile-*.txt; tail -7 /tmp/o/head-variants.txt
python3 - <<'PY'
import csv, statistics
ph = [l.split() for l in open("/tmp/o/clock-phases.txt") if l.split() and l.split()[0] in ("coda", "gemms")]
rows = [r for r in csv.reader(open("/tmp/o/smi.csv")) if r and r[0][:2] == "20"]
from datetime import datetime
for name, a, b, *_ in ph:
    a, b = float(a), float(b)
    sel = [r for r in rows if a + 0.3 <= datetime.strptime(r[0].strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp() <= b]
    if sel:
        print(name, len(sel), "samples; SM MHz median", statistics.median(float(r[1]) for r in sel), "power W median", statistics.median(float(r[3]) for r in sel),
              "reasons", sorted(set(r[5].strip() for r in sel)))
PY
python3 - <<'PY'
import csv
rows = list(csv.reader(open("/tmp/o/block8192.raw.csv")))
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
