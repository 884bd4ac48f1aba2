#!/usr/bin/env bash
# Session 25, call 1: DoubleTile inputs staged by TMA as [M, N] 32-bit words
# (only the pair programs' kernels rebuilt). Checks first (quick set, untuned
# suite, random programs, the wheel's tests; memcheck over the small block
# backward, whose linear_dswiglu reads pairs), then swiglu_backward in the
# untuned suite (4096^3 and 8192^3) with session 24's binary and this one,
# alternated three times, then a search of linear_dswiglu at its three block
# shapes with each binary (`coda tune`, separate caches).
set -uo pipefail
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf /tmp/b /tmp/o; mkdir -p /tmp/b /tmp/o && tar xJf .device/bins.tar.xz -C /tmp/b && cp .device/coda_rs-*.whl /tmp/b/
xz -dc .device/coda_s24.xz > /tmp/b/coda_old && chmod +x /tmp/b/coda_old
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > /tmp/o/gpu-info.txt 2>&1
GPU_ARGS=--quick PARTS="gpu user random python" timeout 200 scripts/device-verify.sh /tmp/b /tmp/o > /tmp/o/verify-check.txt 2>&1
echo "checks done at $(el) s"
cs=/usr/local/cuda/bin/compute-sanitizer
timeout 60 scripts/device-run.sh $cs --tool memcheck --print-limit 50 /tmp/b/gpu --sanitize --only "block backward d=256" > /tmp/o/memcheck.log 2>&1
echo "memcheck exit $? at $(el) s: $(grep -c '^PASS' /tmp/o/memcheck.log) PASS, $(grep -c '^FAIL' /tmp/o/memcheck.log) FAIL; $(grep 'ERROR SUMMARY' /tmp/o/memcheck.log)"
for i in 1 2 3; do
  for bin in coda_old coda; do
    timeout 60 scripts/device-run.sh /tmp/b/$bin bench --part untuned --program swiglu_backward --json /tmp/o/untuned-$bin-$i.json > /tmp/o/untuned-$bin-$i.log 2>&1
    echo "untuned $bin $i exit $? at $(el) s"
  done
done
for bin in coda_old coda; do
  CODA_TUNE_CACHE=/tmp/o/tune-$bin.json timeout 100 scripts/device-run.sh /tmp/b/$bin tune --program linear_dswiglu \
    --shape 16384,8192,2048 --shape 16384,11008,4096 --shape 16384,28672,8192 > /tmp/o/tune-$bin.log 2>&1
  echo "tune $bin exit $? at $(el) s"
done
python3 - <<'PY'
import json, glob, statistics, collections
rows = collections.defaultdict(lambda: collections.defaultdict(list))
for bin in ("coda_old", "coda"):
    for f in sorted(glob.glob(f"/tmp/o/untuned-{bin}-[0-9].json")):
        for r in json.load(open(f))["untuned"]:
            rows[(r["name"], r["shape"])][bin].append((r["fused_ms"] / r["cublas_ms"], r["fused_ms"] / r["cutlass_ms"], r["fused_ms"], r.get("config", "")))
print("| program | shape | old / cuBLASLt | new / cuBLASLt | old / linear | new / linear | new ms / old ms (medians) |")
print("|---|---|---|---|---|---|---|")
for (name, shape), d in rows.items():
    o, n = d["coda_old"], d["coda"]
    med = lambda xs, k: statistics.median(x[k] for x in xs)
    print(f"| {name} | {shape} | {med(o, 0):.3f} | {med(n, 0):.3f} | {med(o, 1):.3f} | {med(n, 1):.3f} | {med(n, 2) / med(o, 2):.3f} |")
    print("   runs old / linear:", [round(x[1], 3) for x in o], " new:", [round(x[1], 3) for x in n])
for bin in ("coda_old", "coda"):
    try:
        for e in json.load(open(f"/tmp/o/tune-{bin}.json")):
            print(bin, e["program"], e["m"], e["n"], e["k"], e["config"], e["swizzle"], e["raster"], round(e["ms"], 4))
    except Exception as ex:
        print(bin, "no tune cache:", ex)
PY
tar czf "$OUT/call1.tgz" -C /tmp/o .
cat /tmp/o/verify-check.txt
