#!/usr/bin/env python3
"""Where a training step's GPU waits: the idle gaps of a Chrome trace.

Reads the trace `train.py --trace` writes (host and GPU, 3 steps) and
prints the GPU's busy and idle time over the traced span, then the idle
time summed by the host operation that launched the work after each gap
(the innermost `cpu_op` around the launch call), and the largest gaps. A
gap whose next kernel was launched just before it started means the host
was late (the GPU ran dry); one launched long before was waiting on
something else (a dependency, a synchronising call).

usage: gaps.py TRACE.json[.gz] [--top N] [--min-us US]
"""
import argparse
import bisect
import collections
import gzip
import json

GPU = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH = ("cuda_runtime", "cuda_driver")


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)["traceEvents"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--min-us", type=float, default=5.0, help="gaps shorter than this are not attributed")
    a = ap.parse_args()
    events = [e for e in load(a.trace) if e.get("ph") == "X"]
    gpu = sorted((e for e in events if e.get("cat") in GPU), key=lambda e: e["ts"])
    launches = {e["args"]["correlation"]: e for e in events if e.get("cat") in LAUNCH and "correlation" in e.get("args", {})}
    ops = collections.defaultdict(list)  # tid -> cpu ops sorted by start
    for e in events:
        if e.get("cat") == "cpu_op":
            ops[e["tid"]].append(e)
    starts = {}
    for tid, lst in ops.items():
        lst.sort(key=lambda e: e["ts"])
        starts[tid] = [e["ts"] for e in lst]

    def launched_by(kernel):
        """The launch call of `kernel` and the innermost host op around it."""
        call = launches.get(kernel.get("args", {}).get("correlation"))
        if call is None:
            return None, "(no launch call)"
        lst, st = ops.get(call["tid"], []), starts.get(call["tid"], [])
        best = None
        for i in range(bisect.bisect_right(st, call["ts"]) - 1, max(-1, bisect.bisect_right(st, call["ts"]) - 400), -1):
            e = lst[i]
            if e["ts"] + e["dur"] >= call["ts"] + call["dur"]:
                best = e  # the latest-starting op that still contains the call: the innermost
                break
        return call, best["name"] if best else "(outside any op)"

    span = gpu[-1]["ts"] + gpu[-1]["dur"] - gpu[0]["ts"]
    busy, end, gaps = 0.0, gpu[0]["ts"], []
    for e in gpu:
        if e["ts"] > end:
            gaps.append((e["ts"] - end, e))
        busy += max(0.0, e["ts"] + e["dur"] - max(e["ts"], end))
        end = max(end, e["ts"] + e["dur"])
    idle = span - busy
    print(f"{len(gpu)} GPU events over {span / 1e3:.2f} ms: busy {busy / 1e3:.2f} ms, idle {idle / 1e3:.2f} ms "
          f"({len(gaps)} gaps; per step of 3: {span / 3e3:.2f} ms, idle {idle / 3e3:.2f} ms)")
    by_op = collections.Counter()
    late = 0.0
    rows = []
    for g, k in gaps:
        if g < a.min_us:
            by_op["(gaps under %g us)" % a.min_us] += g
            continue
        call, op = launched_by(k)
        lead = k["ts"] - call["ts"] if call else float("nan")
        if call and lead < g:
            late += g
        by_op[op] += g
        rows.append((g, k["name"][:60], op[:50], lead))
    print(f"idle in gaps whose work was launched less than the gap before it started (host late): {late / 1e3:.2f} ms")
    print("\nidle ms by the host op that launched the work after the gap:")
    for op, t in by_op.most_common(20):
        print(f"  {t / 1e3:8.3f}  {op}")
    print(f"\nlargest gaps (us), the work after each, its host op, and how long before it started it was launched (us):")
    for g, name, op, lead in sorted(rows, reverse=True)[: a.top]:
        print(f"  {g:8.1f}  {name:<60}  {op:<50}  {lead:9.1f}")


if __name__ == "__main__":
    main()
