#!/usr/bin/env python3
"""Fits the constants of the tuner's cost model (`coda_runtime::tune::predicted_us`)
to timings from the H200, and says how well choosing by it does.

Inputs: `coda inspect` output (each program's per-element work), `coda tune`
logs run with CODA_LOG=debug (every timed choice; per config, the time in
the swizzle and raster order the heuristic gives it is kept), and `coda bench --json` files with an `untuned` table
(each suite program beside our bare GEMM, `cutlass_ms`; only rows whose
note says the program ran coop_128x256_c1x1 and the GEMM pp_128x128_c1x2,
both at swizzle 1 and CUTLASS's raster, as session 7's did, are used). The
model below mirrors `predicted_us` term by term: change
both together. Needs numpy and scipy.

usage: fit_cost_model.py INSPECT.txt --tune tune.log [...] [--untuned coda.json [...]]
The constants in tune.rs come from
  fit_cost_model.py bench/results/2026-12-01-s10/inspect.txt \
      --tune bench/results/2026-12-01-s8/tune.log --untuned bench/results/2026-12-01-s7/untuned.json
"""
import argparse
import collections
import json
import math
import re

import numpy as np
from scipy.optimize import least_squares

import tune_log

SMS = 132
BANDWIDTH = 4.0e6  # bytes per µs, fixed (not fitted)
NAMES = ["coop flops", "pp flops", "coop start", "pp start", "base", "tma byte", "pair byte", "sfu", "alu", "pp epilogue", "pp pair"]
WORK = re.compile(r"tile loads ([0-9.]+) B, pair loads ([0-9.]+) B, stores ([0-9.]+) B, ([0-9.]+) SFU and ([0-9.]+) ALU")
PAIR = ("coop_128x256_c1x1", "pp_128x128_c1x2")


def works(path):
    out, name = {}, None
    for line in open(path):
        if not line.startswith(" "):
            name = line.split()[0].split("::")[-1] if line.strip() else None
        elif (m := WORK.search(line)) and name:
            out[name] = [float(x) for x in m.groups()]
    out["bare GEMM"] = [0.0, 0.0, 2.0, 0.0, 0.0]
    return out


def scheduler(m, n, config):
    """The heuristic's swizzle and raster (`tune::scheduler`), as logged."""
    tm, tn = map(int, config.split("_")[1].split("x"))
    gm, gn = math.ceil(m / tm), math.ceil(n / tn)
    if min(gm, gn) >= 32:
        return 8, "along M"
    return 1, "along M" if gn >= gm else "along N"


def timings(tune_logs, untuned):
    """(program, M, N, K, config, ms) of each default config in the heuristic's scheduler options."""
    timed = {}
    for p, m, n, k, config, swizzle, raster, ms in tune_log.timings(tune_logs):
        if config in PAIR and (swizzle, raster) == scheduler(m, n, config):
            timed[(p.split("::")[-1], m, n, k, config)] = ms
    points = [(*k, t) for k, t in timed.items()]
    defaults = "fused coop_128x256_c1x1 swizzle 1 raster auto; linear pp_128x128_c1x2 swizzle 1 raster auto"
    for path in untuned:
        for e in json.load(open(path))["untuned"]:
            if e["note"] != f"configs: {defaults}":
                continue
            m, n, k = (int(x.split("=")[1]) for x in e["shape"].split())
            points.append((e["name"], m, n, k, PAIR[0], e["fused_ms"]))
            points.append(("bare GEMM", m, n, k, PAIR[1], e["cutlass_ms"]))
    return points


def predicted_us(th, w, m, n, k, config):
    """`predicted_us` with the constants `th` (their logs)."""
    fc, fp, sc, sp, base, tma, pair, sfu, alu, pp_ep, pp_pair = np.exp(th)
    pp = config.startswith("pp")
    (tm, tn), (cm, cn) = (tuple(map(int, s.lstrip("c").split("x"))) for s in config.split("_")[1:])
    tiles = math.ceil(math.ceil(m / tm) / cm) * cm * math.ceil(math.ceil(n / tn) / cn) * cn
    per_sm = math.ceil(tiles / SMS)
    mainloop = 2 * tm * tn * k / (fp if pp else fc) + (sp if pp else sc)
    element = base + tma * w[0] + pair * (pp_pair if pp else 1) * w[1] + max(alu * w[4], sfu * w[3])
    epilogue = tm * tn / (128 if pp else 256) * (pp_ep if pp else 1) * element
    t = per_sm * max(mainloop, epilogue) + min(mainloop, epilogue) if pp else per_sm * (mainloop + epilogue)
    return max(t, (2 * (m + n) * k + m * n * (w[0] + w[1] + w[2])) / BANDWIDTH)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inspect")
    ap.add_argument("--tune", nargs="+", default=[])
    ap.add_argument("--untuned", nargs="+", default=[])
    args = ap.parse_args()
    work = works(args.inspect)
    points = [p for p in timings(args.tune, args.untuned) if p[0] in work]

    def resid(th):
        return np.array([math.log(predicted_us(th, work[p], m, n, k, c) / (ms * 1e3)) for p, m, n, k, c, ms in points])

    x0 = np.log([5.5e6, 5.5e6, 2.0, 2.0, 2e-3, 1e-3, 5e-3, 2e-3, 2e-4, 1.0, 1.0])
    rng = np.random.default_rng(1)
    fit = min((least_squares(resid, x0 + rng.normal(0, 1, x0.shape), max_nfev=3000) for _ in range(30)), key=lambda r: r.cost)
    print(f"{len(points)} timings, rms log error {math.sqrt(2 * fit.cost / len(points)):.4f}")
    for name, v in zip(NAMES, np.exp(fit.x)):
        print(f"  {name:<12} {v:.4g}")
    shapes = collections.defaultdict(dict)
    for p, m, n, k, c, ms in points:
        if p != "bare GEMM":
            shapes[(p, m, n, k)][c] = ms
    logs = []
    for (p, m, n, k), per in sorted(shapes.items()):
        if len(per) == 2:
            pick = min(PAIR, key=lambda c: predicted_us(fit.x, work[p], m, n, k, c))
            logs.append(math.log(per[pick] / min(per.values())))
    if logs:
        print(f"choosing by the model over {len(logs)} shapes with both configs timed: "
              f"geomean {math.exp(sum(logs) / len(logs)):.4f}, worst {math.exp(max(logs)):.3f} of the faster")


if __name__ == "__main__":
    main()
