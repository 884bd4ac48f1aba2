#!/usr/bin/env python3
"""Which configs a default set should hold, from the timings a search logs.

Reads `coda tune` output run with CODA_LOG=debug (every timed choice:
`coda tune: PROGRAM M=.. N=.. K=..: CONFIG swizzle S RASTER T ms`) and
prints, per config, how often it is the fastest and its geometric-mean
slowdown against each shape's fastest (best swizzle/raster per config); then
the best single config and the best pair (each shape served by the faster
of the two), the question a default set answers.

usage: tune_summary.py tune.log [...]
"""
import itertools
import math
import sys
from collections import defaultdict

from tune_log import timings


def main():
    best = defaultdict(dict)  # (program, m, n, k) -> config -> fastest ms over swizzle/raster
    for prog, m, n, k, config, _, _, ms in timings(sys.argv[1:]):
        best[(prog, m, n, k)][config] = min(ms, best[(prog, m, n, k)].get(config, math.inf))
    if not best:
        sys.exit("no DEBUG `coda tune:` timing lines found (run the search with CODA_LOG=debug)")
    configs = sorted({c for per in best.values() for c in per})
    print(f"{len(best)} shapes, {len(configs)} configs (a program's build holds some of them)")

    def slowdown(chosen):
        """Over the shapes whose build holds every chosen config: (geomean, worst, shapes)."""
        logs = [math.log(min(per[c] for c in chosen) / min(per.values())) for per in best.values() if all(c in per for c in chosen)]
        if not logs:
            return math.inf, math.inf, 0
        return math.exp(sum(logs) / len(logs)), math.exp(max(logs)), len(logs)

    wins = defaultdict(int)
    for per in best.values():
        wins[min(per, key=per.get)] += 1
    print(f"{'config':<22} {'wins':>5} {'shapes':>6} {'geomean':>8} {'worst':>7}")
    for c in sorted(configs, key=lambda c: slowdown([c])[0]):
        g, w, n = slowdown([c])
        print(f"{c:<22} {wins[c]:>5} {n:>6} {g:>8.4f} {w:>7.3f}")
    pairs = sorted((p for p in itertools.combinations(configs, 2) if slowdown(p)[2]), key=lambda p: slowdown(p)[0])
    for p in pairs[:3]:
        g, w, n = slowdown(p)
        print(f"pair {p[0]} + {p[1]}: geomean {g:.4f}, worst {w:.3f} over {n} shapes (each shape its faster)")


if __name__ == "__main__":
    main()
