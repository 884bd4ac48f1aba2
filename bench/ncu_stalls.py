#!/usr/bin/env python3
"""Warp-stall samples of an Nsight Compute source page, by SASS opcode and
for the busiest lines (the numbers session 15's notes quote), then by
region of a GEMM kernel: before its first wgmma, its mainloop (12
instructions before the first to 6 after the last: the stage wait, the
wgmmas, the stage release, the loop's branch) and after it (the epilogue;
the producer's code where ptxas put it). In the mainloop, `dispatch` +
`not_selected` samples are issue slots its warps lost to a warp beside
them (session 24's notes).

    ncu --import X.ncu-rep --page source --csv --print-source sass | xz > X.csv.xz
    ncu_stalls.py X.csv.xz
"""

import csv
import io
import lzma
import re
import sys
from collections import Counter


def main(path):
    text = lzma.open(path, "rt").read() if path.endswith(".xz") else open(path).read()
    rows = list(csv.reader(io.StringIO(text)))
    head = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    names, lines = rows[head], rows[head + 1 :]
    samples = names.index("Warp Stall Sampling (All Samples)")
    reasons = [i for i, n in enumerate(names) if n.startswith("stall_") and "Not Issued" not in n]
    count = lambda r, i: int(r[i]) if r[i].isdigit() else 0
    opcode = lambda r: re.sub(r"^@!?U?P\w+\s+", "", r[1].strip()).split(" ")[0]
    by_op = Counter()
    for r in lines:
        by_op[opcode(r)] += count(r, samples)
    print(f"{sum(by_op.values())} samples; by opcode:", ", ".join(f"{k} {v}" for k, v in by_op.most_common(8)))
    for i in sorted(range(len(lines)), key=lambda i: -count(lines[i], samples))[:8]:
        r = lines[i]
        top = sorted(((count(r, j), names[j]) for j in reasons), reverse=True)[:2]
        print(f"  line {i:5}: {count(r, samples):6}  {r[1].strip()[:48]:48}  {top}")
    mma = [i for i, r in enumerate(lines) if opcode(r).startswith(("HGMMA", "QGMMA"))]
    if not mma:
        return
    first, last = max(mma[0] - 12, 0), mma[-1] + 6
    for region, span in (("before", range(first)), ("mainloop", range(first, last)), ("after", range(last, len(lines)))):
        total = sum(count(lines[i], samples) for i in span)
        by = Counter({names[j]: sum(count(lines[i], j) for i in span) for j in reasons})
        lost = by["stall_dispatch"] + by["stall_not_selected"]
        top = ", ".join(f"{k[6:]} {v}" for k, v in by.most_common(6))
        print(f"{region:8} {len(span):5} instructions, {total:6} samples ({top}); dispatch + not_selected {lost}")


if __name__ == "__main__":
    main(sys.argv[1])
