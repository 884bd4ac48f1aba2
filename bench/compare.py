#!/usr/bin/env python3
"""Runs `coda bench` and bench/torch_baselines.py in one go on the GPU
machine and prints the side-by-side table (markdown) with ratios; the JSON
of both runs is written beside the table.

usage: compare.py --coda PATH/TO/coda [--quick] [--out DIR]
       compare.py --coda-json coda.json [--quick] [--out DIR]   (reuse a `coda bench --json` run)
"""
import argparse
import datetime
import json
import os
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--coda", help="the built `coda` binary")
    ap.add_argument("--coda-json", help="a `coda bench --json` output to use instead of running it")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=".")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    quick = ["--quick"] if a.quick else []
    cj, tj = a.coda_json or os.path.join(a.out, "coda.json"), os.path.join(a.out, "torch.json")
    if not a.coda_json:
        if not a.coda:
            ap.error("give --coda or --coda-json")
        subprocess.run([a.coda, "bench", *quick, "--json", cj, "--svg", os.path.join(a.out, "coda.svg")], check=True)
    here = os.path.dirname(os.path.abspath(__file__))
    subprocess.run([sys.executable, os.path.join(here, "torch_baselines.py"), *quick, "--json", tj], check=True)
    coda, torch = json.load(open(cj)), json.load(open(tj))
    theirs = {(r["name"], r["shape"]): r for r in torch["rows"]}
    date = datetime.date.today().isoformat()
    lines = [
        f"{date}, {coda['gpu']}, torch {torch['torch']}; median ms of {coda['samples']} interleaved samples.",
        "",
        "| op | shape | CODA | cuBLASLt GEMMs | our CUTLASS GEMM | eager | torch.compile | CODA / cuBLASLt | CUTLASS / cuBLASLt | CODA / compile |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    notes = []
    for r in coda["rows"]:
        t = theirs.get((r["name"], r["shape"]), {})
        cut = f"{r['cutlass_ms']:.4f}" if r.get("cutlass_ms") is not None else "-"
        eager = f"{t['eager_ms']:.4f}" if t else "-"
        comp = f"{t['compile_ms']:.4f}" if t else "-"
        vs_comp = f"{r['fused_ms'] / t['compile_ms']:.3f}" if t else "-"
        cut_ratio = f"{r['cutlass_ms'] / r['cublas_ms']:.3f}" if r.get("cutlass_ms") is not None else "-"
        lines.append(
            f"| {r['name']} | {r['shape']} | {r['fused_ms']:.4f} | {r['cublas_ms']:.4f} | {cut} | {eager} | {comp} "
            f"| {r['fused_ms'] / r['cublas_ms']:.3f} | {cut_ratio} | {vs_comp} |"
        )
        if r.get("note"):
            notes.append(f"- {r['name']} {r['shape']}: {r['note']}")
    if notes:
        lines += ["", *notes]
    untuned = coda.get("untuned", [])
    if untuned:
        lines += ["", "Untuned suite (`coda-user-programs`, default build, `CODA_TUNE` unset: the config the heuristic picks):", "",
                  "| program | shape | CODA | cuBLASLt GEMM | CODA / cuBLASLt | config |", "|---|---|---|---|---|---|"]
        for r in untuned:
            config = r["note"].split(";")[0].removeprefix("configs: fused ")
            lines.append(f"| {r['name']} | {r['shape']} | {r['fused_ms']:.4f} | {r['cublas_ms']:.4f} | {r['fused_ms'] / r['cublas_ms']:.3f} | {config} |")
        lines += ["", *(f"- {line}" for line in coda["untuned_summary"].splitlines())]
    table = "\n".join(lines)
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
