#!/usr/bin/env python3
"""How the tuner's scheduler rule (`tune::scheduler`: the swizzle and raster
a chosen config runs in) does against `coda tune` searches that logged every
option (CODA_LOG=debug): per GPU, for each program × shape × config timed in
all four of swizzle {1, 8} × raster {M, N}, the rule's option over the
fastest of the four, as a geometric mean and the worst; and the same for
each option always taken. With --list, every search where the rule is more
than 3% from its best.

usage: scheduler_rule.py [--list] GPU=tune.log [GPU=tune.log ...]
  GPU names the card the log ran on (h100, h200): the rule is one for all,
  its fit differs per card.
"""
import argparse
import collections
import math

import tune_log

OPTIONS = [(1, "along M"), (1, "along N"), (8, "along M"), (8, "along N")]


def searches(logs):
    """(gpu, program, m, n, k, config) → {(swizzle, raster): ms} for each search with all four options."""
    found = collections.defaultdict(dict)
    for gpu, path in logs:
        for prog, m, n, k, config, swizzle, raster, ms in tune_log.timings([path]):
            key = (gpu, prog.split("::")[-1], m, n, k, config, path)
            option = (swizzle, raster)
            found[key][option] = min(ms, found[key].get(option, math.inf))
    # The four options the rule chooses from (a log also has CUTLASS's own raster).
    return {k: {o: v[o] for o in OPTIONS} for k, v in found.items() if all(o in v for o in OPTIONS)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true")
    ap.add_argument("logs", nargs="+", metavar="GPU=tune.log")
    a = ap.parse_args()
    logs = [tuple(x.split("=", 1)) for x in a.logs]
    if any(len(x) != 2 for x in logs):
        ap.error("each log is GPU=path")
    found = searches(logs)
    pickers = [("the rule", lambda m, n, k, c: tune_log.scheduler(m, n, k, c))]
    pickers += [(f"always swizzle {s} {r}", lambda m, n, k, c, o=(s, r): o) for s, r in OPTIONS]
    for gpu in sorted({k[0] for k in found}):
        mine = {k: v for k, v in found.items() if k[0] == gpu}
        print(f"{gpu}: {len(mine)} searches of {len({k[1] for k in mine})} programs")
        for name, pick in pickers:
            ratios = [(v[pick(k[2], k[3], k[4], k[5])] / min(v.values()), k) for k, v in mine.items()]
            geomean = math.exp(sum(math.log(r) for r, _ in ratios) / len(ratios))
            worst, w = max(ratios)
            print(f"  {name:<22} geomean {geomean:.4f}, worst {worst:.3f} ({w[1]} {w[2]}×{w[3]}×{w[4]} {w[5]})")
        if a.list:
            for k, v in sorted(mine.items()):
                opt = tune_log.scheduler(k[2], k[3], k[4], k[5])
                r = v[opt] / min(v.values())
                if r > 1.03:
                    best = min(v, key=v.get)
                    print(f"    {r:.3f} {k[1]} {k[2]}×{k[3]}×{k[4]} {k[5]}: rule swizzle {opt[0]} {opt[1]}, best swizzle {best[0]} {best[1]}")


if __name__ == "__main__":
    main()
