#!/usr/bin/env python3
"""Nsight Compute's raw metrics of several kernels side by side: the ones
that say whether an epilogue's time is cycles or clock (elapsed cycles, SM
frequency), and which pipes and stalls grow with it.

    ncu --import X.ncu-rep --page raw --csv > X.raw.csv      # one kernel per file
    ncu_compare.py [--grep REGEX] A.raw.csv B.raw.csv ...

Without --grep it prints a fixed list of metrics; with it, every metric
whose name matches (e.g. --grep 'pipe_.*pct_of_peak_sustained_active').
"""

import argparse
import csv
import os
import re

FIXED = [
    "gpu__time_duration.sum",
    "gpc__cycles_elapsed.max",
    "gpc__cycles_elapsed.avg.per_second",
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "smsp__inst_executed.sum",
    "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active",
    "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active",
    "smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio",
]


def metrics(path):
    rows = [r for r in csv.reader(open(path)) if r]
    head = next(i for i, r in enumerate(rows) if "Kernel Name" in r or "ID" in r[:2])
    names, units, values = rows[head], rows[head + 1], rows[head + 2]
    return {n: (v, u) for n, u, v in zip(names, units, values)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--grep")
    p.add_argument("files", nargs="+")
    a = p.parse_args()
    data = [(os.path.basename(f).split(".")[0], metrics(f)) for f in a.files]
    keys = FIXED if not a.grep else sorted({k for _, m in data for k in m if re.search(a.grep, k)})
    print("metric," + ",".join(n for n, _ in data))
    for k in keys:
        vals = [m.get(k, ("", ""))[0].replace(",", "") for _, m in data]
        if any(vals):
            print(f"{k} [{next((m[k][1] for _, m in data if k in m), '')}]," + ",".join(vals))


if __name__ == "__main__":
    main()
