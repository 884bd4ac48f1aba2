#!/usr/bin/env python3
"""Fits one GPU's constants of the tuner's cost model (`coda_runtime::tune::COST_MODELS`,
`predicted_us`) to its timings, and says how well choosing by them does.

Inputs: `coda inspect` output (each program's per-element work), `coda tune`
logs run with CODA_LOG=debug (every timed choice; per config, the time in
the swizzle and raster order the heuristic gives it is kept), and `coda bench --json` files with an `untuned` table
(each suite program beside our bare GEMM, `cutlass_ms`; a row's program
and GEMM count where its note says they ran one of the two defaults in the
heuristic's scheduler options, or at swizzle 1 in CUTLASS's raster, as
session 7's did). The
model below mirrors `predicted_us` term by term: change
both together. Needs numpy and scipy.

usage: fit_cost_model.py INSPECT.txt [--gpu h200|h100] --tune tune.log [...] [--untuned coda.json [...]]
                         [--omit FILE=PROG,...] [--hold-out PROG ...] [--tsv OUT]
It reports how choosing between the two defaults does, by tune.rs's constants
(CURRENT below) and by the fit. Ping-pong's power term is fitted only for a
GPU whose constants have one (the H100's); elsewhere its drop stays 0.
The H200's constants are session 17's fit less its two terms for per-thread
pair loads, dropped in session 25 when `DoubleTile` inputs came to be staged
by TMA; refitted on session 25's searches of the pair programs
(R=bench/results; $R/2026-12-04-s25/fit.txt)
  fit_cost_model.py $R/2026-12-04-s25/inspect.txt \
      --tune $R/2026-12-01-s8/tune.log $R/2026-12-02-s16/tune.log $R/2026-12-04-s25/call2/tune-coda.log \
      --untuned $R/2026-12-01-s7/untuned.json \
      --omit $R/2026-12-01-s8/tune.log=linear_dswiglu $R/2026-12-02-s16/tune.log=linear_dswiglu \
             $R/2026-12-01-s7/untuned.json=swiglu_backward \
      --hold-out swiglu_backward dswiglu
they choose as the refit does at every shape. The H100's (session 41;
$R/2026-12-06-s41/fit-h100.txt, whose second half is the same constants on
all 68 shapes, without --hold-out):
  fit_cost_model.py $R/2026-12-06-s40/inspect.txt --gpu h100 \
      --tune $R/2026-12-06-s40/call-a-h100/h100/tune.log $R/2026-12-06-s41/call-b-h100/user-tune.log \
             $R/2026-12-06-s41/call-c-h100/held-out-tune.log \
      --hold-out geglu dequant_sigmoid softcap_lse bias_gelu_exact
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
NAMES = ["coop flops", "pp flops", "coop start", "pp start", "base", "tma byte", "sfu", "alu", "pp epilogue",
         "pp power drop", "power after"]
# Before session 25 `coda inspect` listed `DoubleTile` bytes apart (pair loads): they count as staged.
WORK = re.compile(r"tile loads ([0-9.]+) B, (?:pair loads ([0-9.]+) B, )?stores ([0-9.]+) B, ([0-9.]+) SFU and ([0-9.]+) ALU")
PAIR = ("coop_128x256_c1x1", "pp_128x128_c1x2")
# Per GPU, `tune::COST_MODELS`' constants as tune.rs has them, in NAMES' order, and the
# bandwidth floor (bytes per µs, not fitted: ~83% of the HBM's peak).
CURRENT = {
    "h200": ([5.433e6, 5.475e6, 2.47, 2.77, 0.0413, 1.67e-3, 7.07e-3, 2.02e-3, 1.57, 0.0, 1000.0], 4.0e6),
    "h100": ([5.861e6, 5.95e6, 0.324, 3.10, 0.0747, 3.06e-4, 0.0266, 1.19e-3, 1.10, 0.346, 1249.0], 2.8e6),
}


def works(path):
    out, name = {}, None
    for line in open(path):
        if not line.startswith(" "):
            name = line.split()[0].split("::")[-1] if line.strip() else None
        elif (m := WORK.search(line)) and name:
            tile, pair, store, sfu, alu = (float(x or 0) for x in m.groups())
            out[name] = [tile + pair, store, sfu, alu]
    out["bare GEMM"] = [0.0, 2.0, 0.0, 0.0]
    return out


def timings(tune_logs, untuned, omit):
    """(program, M, N, K, config, ms) of each default config in the heuristic's scheduler options;
    `omit` maps a file to the programs whose timings in it are left out (built from older code)."""
    timed = {}
    for path in tune_logs:
        for p, m, n, k, config, swizzle, raster, ms in tune_log.timings([path]):
            p = p.split("::")[-1]
            if config in PAIR and (swizzle, raster) == tune_log.scheduler(m, n, k, config) and p not in omit.get(path, ()):
                timed[(p, m, n, k, config)] = ms
    points = [(*k, t) for k, t in timed.items()]
    for path in untuned:
        for e in json.load(open(path))["untuned"]:
            m, n, k = (int(x.split("=")[1]) for x in e["shape"].split())
            # "configs: fused CONFIG swizzle S RASTER; linear CONFIG swizzle S RASTER": a row
            # counts where both ran a default config in the heuristic's options (or, as in
            # session 7, swizzle 1 in CUTLASS's raster).
            ran = re.findall(r"(fused|linear) (\S+) swizzle (\d+) (along M|along N|raster auto)", e["note"])
            if len(ran) != 2 or e["name"] in omit.get(path, ()):
                continue
            for role, config, swizzle, raster in ran:
                opts = tune_log.scheduler(m, n, k, config) if config in PAIR else None
                if opts and ((int(swizzle), raster) == opts or (swizzle, raster) == ("1", "raster auto")):
                    points.append((e["name"] if role == "fused" else "bare GEMM", m, n, k, config,
                                   e["fused_ms"] if role == "fused" else e["cutlass_ms"]))
    return points


def predicted_us(th, w, m, n, k, config, bandwidth):
    """`predicted_us` with the constants `th` (their logs)."""
    fc, fp, sc, sp, base, tma, sfu, alu, pp_ep, drop, after = np.exp(th)
    pp = config.startswith("pp")
    (tm, tn), (cm, cn) = (tuple(map(int, s.lstrip("c").split("x"))) for s in config.split("_")[1:])
    tiles = math.ceil(math.ceil(m / tm) / cm) * cm * math.ceil(math.ceil(n / tn) / cn) * cn
    per_sm = math.ceil(tiles / SMS)
    mainloop = 2 * tm * tn * k / (fp if pp else fc) + (sp if pp else sc)
    element = base + tma * w[0] + max(alu * w[3], sfu * w[2])
    epilogue = tm * tn / (128 if pp else 256) * (pp_ep if pp else 1) * element
    t = per_sm * max(mainloop, epilogue) + min(mainloop, epilogue) if pp else per_sm * (mainloop + epilogue)
    t = max(t, (2 * (m + n) * k + m * n * (w[0] + w[1])) / bandwidth)
    return t * (1 + drop * max(0.0, 1 - after / t)) if pp else t


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inspect")
    ap.add_argument("--gpu", choices=sorted(CURRENT), default="h200", help="whose constants and bandwidth")
    ap.add_argument("--tune", nargs="+", default=[])
    ap.add_argument("--untuned", nargs="+", default=[])
    ap.add_argument("--omit", nargs="+", default=[], metavar="FILE=PROG,...",
                    help="leave these programs' timings in FILE out (timed on an older build)")
    ap.add_argument("--hold-out", nargs="+", default=[], metavar="PROG",
                    help="fit without these programs, then report the choice on them too")
    ap.add_argument("--tsv", metavar="OUT", help="also write each shape with both configs timed, as the "
                    "tuner's tests read them (coda-runtime/tests/data/)")
    args = ap.parse_args()
    current, bandwidth = CURRENT[args.gpu]
    work = works(args.inspect)
    omit = {f: set(ps.split(",")) for f, ps in (o.split("=", 1) for o in args.omit)}
    every = [p for p in timings(args.tune, args.untuned, omit) if p[0] in work]
    points = [p for p in every if p[0] not in args.hold_out]

    # Without a power term the fit's last two constants stay at drop 0 (log of a tiny number).
    power = current[9] > 0
    full = (lambda th: th) if power else (lambda th: np.concatenate([th, np.log([1e-300, 1000.0])]))

    def resid(th):
        th = full(th)
        return np.array([math.log(predicted_us(th, work[p], m, n, k, c, bandwidth) / (ms * 1e3)) for p, m, n, k, c, ms in points])

    x0 = np.log([5.5e6, 5.5e6, 2.0, 2.0, 2e-3, 1e-3, 2e-3, 2e-4, 1.0, 0.3, 1000.0][:11 if power else 9])
    rng = np.random.default_rng(1)
    fit = min((least_squares(resid, x0 + rng.normal(0, 1, x0.shape), max_nfev=3000) for _ in range(30)), key=lambda r: r.cost)
    print(f"{len(points)} timings, rms log error {math.sqrt(2 * fit.cost / len(points)):.4f}")
    for name, v in zip(NAMES, np.exp(fit.x)):
        print(f"  {name:<12} {v:.4g}")
    held = [p for p in every if p[0] in args.hold_out]
    models = [("tune.rs's constants", np.log(np.maximum(current, 1e-300))), ("the fit", full(fit.x))]
    for label, th in models:
        report(label, th, work, points, "fitted", bandwidth)
        if held:
            report(label, th, work, held, "held out", bandwidth)
    if args.tsv:
        write_tsv(args.tsv, work, every)


def pairs(points):
    """{(program, M, N, K): {config: ms}} of the shapes where both defaults were timed."""
    shapes = collections.defaultdict(dict)
    for p, m, n, k, c, ms in points:
        if p != "bare GEMM":
            shapes[(p, m, n, k)][c] = ms
    return {s: per for s, per in sorted(shapes.items()) if len(per) == 2}


def write_tsv(path, work, points):
    with open(path, "w") as f:
        f.write("program\ttile_load_bytes\tstore_bytes\tsfu\talu\tm\tn\tk\t" + "\t".join(PAIR) + "\n")
        for (p, m, n, k), per in pairs(points).items():
            w = work[p]
            f.write("\t".join([p, *(f"{x:g}" for x in (w[0], w[1], w[2], w[3])), str(m), str(n), str(k),
                                *(f"{per[c]:.4f}" for c in PAIR)]) + "\n")


def report(label, th, work, points, which, bandwidth):
    """How choosing between the two defaults by the model does where both were timed."""
    logs, wrong = [], []
    for (p, m, n, k), per in pairs(points).items():
        pick = min(PAIR, key=lambda c: predicted_us(th, work[p], m, n, k, c, bandwidth))
        logs.append(math.log(per[pick] / min(per.values())))
        if logs[-1] > 0.01:
            wrong.append(f"{p} {m}x{n}x{k} {per[pick] / min(per.values()):.3f}")
    if logs:
        print(f"{label}, {which}: choosing over {len(logs)} shapes with both configs timed: "
              f"geomean {math.exp(sum(logs) / len(logs)):.4f}, worst {math.exp(max(logs)):.3f} of the faster"
              + "".join(f"\n    wrong by >1%: {w}" for w in wrong))


if __name__ == "__main__":
    main()
