#!/usr/bin/env python3
"""How the tuner's heuristic does against a timed search, from `coda tune`
logs: per program and shape, the heuristic's choice and its time against
the fastest choice the search found (every compiled config × swizzle ×
raster), and against the own config with CUTLASS's defaults; then the
geometric mean and the worst.

usage: heuristic_report.py tune.log [...]
"""
import math
import re
import sys

INFO = re.compile(
    r"coda tune: (\S+) M=(\d+) N=(\d+) K=(\d+): (.+?) ([0-9.]+) ms \(own config ([0-9.]+) ms, heuristic's (\S+) ([0-9.]+) ms, \d+ choices\)"
)


def main():
    rows = []
    for path in sys.argv[1:]:
        for raw in open(path, errors="replace"):
            m = INFO.search(re.sub(r"\x1b\[[0-9;]*m", "", raw))
            if m:
                prog, mm, nn, kk, best, ms, own, pick, pick_ms = m.groups()
                rows.append((prog.split("::")[-1], f"{mm}×{nn}×{kk}", best, float(ms), float(own), pick, float(pick_ms)))
    if not rows:
        sys.exit("no `coda tune:` result lines with the heuristic's time")
    print(f"{'program':<24} {'shape':<18} {'heuristic':<18} {'vs best':>8} {'own/best':>9}  best")
    for prog, shape, best, ms, own, pick, pick_ms in rows:
        print(f"{prog:<24} {shape:<18} {pick:<18} {pick_ms / ms:>8.3f} {own / ms:>9.3f}  {best}")
    for label, col in (("heuristic", 6), ("own config", 4)):
        logs = [math.log(r[col] / r[3]) for r in rows]
        worst = max(rows, key=lambda r: r[col] / r[3])
        print(f"{label}: {len(rows)} searches, geomean {math.exp(sum(logs) / len(logs)):.4f}× the best, "
              f"worst {worst[col] / worst[3]:.3f}× ({worst[0]} {worst[1]})")


if __name__ == "__main__":
    main()
