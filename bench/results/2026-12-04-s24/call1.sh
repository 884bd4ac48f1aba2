#!/usr/bin/env bash
# Session 24, call 1: reciprocals without ptxas's range handling where the
# argument is normal (coda/math.hpp's rcp_normal: sigmoid, silu, gelu,
# gelu_exact, division), every kernel rebuilt. Checks first (quick set,
# untuned suite, random programs, the wheel's tests; memcheck over the small
# block backward), then the untuned suite at 4096^3 (`coda bench --part
# untuned --quick`) with session 23's binary and this session's, alternated
# three times.
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf /tmp/b /tmp/o; mkdir -p /tmp/b /tmp/o && tar xJf .device/bins.tar.xz -C /tmp/b && cp .device/coda_rs-*.whl /tmp/b/
xz -dc .device/coda_old.xz > /tmp/b/coda_old && chmod +x /tmp/b/coda_old
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > /tmp/o/gpu-info.txt 2>&1
GPU_ARGS=--quick PARTS="gpu user random python" timeout 170 scripts/device-verify.sh /tmp/b /tmp/o > /tmp/o/verify-check.txt 2>&1
echo "checks done at $(el) s"
cs=/usr/local/cuda/bin/compute-sanitizer
timeout 60 scripts/device-run.sh $cs --tool memcheck --print-limit 50 /tmp/b/gpu --sanitize --only "block backward d=256" > /tmp/o/memcheck.log 2>&1
echo "memcheck exit $? at $(el) s: $(grep -c '^PASS' /tmp/o/memcheck.log) PASS, $(grep -c '^FAIL' /tmp/o/memcheck.log) FAIL; $(grep 'ERROR SUMMARY' /tmp/o/memcheck.log)"
for i in 1 2 3; do
  for bin in coda_old coda; do
    timeout 90 scripts/device-run.sh /tmp/b/$bin bench --part untuned --quick --json /tmp/o/untuned-$bin-$i.json > /tmp/o/untuned-$bin-$i.log 2>&1
    echo "untuned $bin $i exit $? at $(el) s"
  done
done
python3 - <<'PY'
import json, glob, statistics, collections
rows = collections.defaultdict(lambda: collections.defaultdict(list))
for bin in ("coda_old", "coda"):
    for f in sorted(glob.glob(f"/tmp/o/untuned-{bin}-[0-9].json")):
        for r in json.load(open(f))["untuned"]:
            rows[r["name"]][bin].append((r["fused_ms"] / r["cublas_ms"], r["fused_ms"] / r["cutlass_ms"], r["fused_ms"]))
print("| program | old / cuBLASLt | new / cuBLASLt | old / linear | new / linear | new ms / old ms (medians) |")
print("|---|---|---|---|---|---|")
for name, d in rows.items():
    o, n = d["coda_old"], d["coda"]
    med = lambda xs, k: statistics.median(x[k] for x in xs)
    print(f"| {name} | {med(o, 0):.3f} | {med(n, 0):.3f} | {med(o, 1):.3f} | {med(n, 1):.3f} | {med(n, 2) / med(o, 2):.3f} |")
PY
tar czf "$OUT/call1.tgz" -C /tmp/o .
cat /tmp/o/verify-check.txt
