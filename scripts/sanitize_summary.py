"""Summarises scripts/sanitize.sh's logs: per tool and binary, the test
outcome, the sanitizer's own error count, and its reports split between
our kernels and vendor (cuBLAS) kernels, by the kernel names in each report."""

import pathlib
import re
import sys

VENDOR = ("cublas", "nvjet", "xmma", "cutlass_80", "cutlass3x", "gemv", "splitk", "reduce_1Block")
# A report starts with one of these after the sanitizer's prefix.
START = re.compile(r"^========= (Invalid|Error|Race|Uninitialized|Barrier|Warning|Program hit|Hazard|Potential|Cuda API|Divergent)")

out = pathlib.Path(sys.argv[1])
rows = []
for log in sorted(out.glob("*.log")):
    tool, _, target = log.stem.partition("-")
    if tool not in ("memcheck", "racecheck", "synccheck", "initcheck"):
        continue
    text = log.read_text(errors="replace").splitlines()
    blocks, cur = [], None
    for line in text:
        if START.match(line):
            cur = [line]
            blocks.append(cur)
        elif cur is not None and line.startswith("=========     "):
            cur.append(line)
        else:
            cur = None
    ours = [b for b in blocks if not any(v in " ".join(b) for v in VENDOR)]
    vendor = len(blocks) - len(ours)
    summary = next((l for l in text if "ERROR SUMMARY" in l or "RACECHECK SUMMARY" in l), "no summary (timed out?)")
    result = next((l for l in reversed(text) if re.match(r"^\d+ passed, \d+ failed", l)), "no result line")
    rc_file = log.with_suffix(".rc")
    rc, secs = (rc_file.read_text().split() + ["?", "?"])[:2] if rc_file.exists() else ("?", "?")
    rows.append((tool, target, result, summary.replace("=========", "").strip(), len(ours), vendor, rc, secs))
    for b in ours[:5]:
        print(f"[{tool} {target}] ours: " + " | ".join(l.replace("=========", "").strip() for l in b[:4]))

print("| tool | binary | tests | sanitizer summary | reports in our kernels | in vendor kernels | exit | s |")
print("|---|---|---|---|---|---|---|---|")
for r in rows:
    print("| " + " | ".join(str(x) for x in r) + " |")
