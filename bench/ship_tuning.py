#!/usr/bin/env python3
"""Makes a device run's searches of coda-llama's programs a shipped tuning file.

    ship_tuning.py CACHE.json OUT.json [--only PROGRAM ...]

CACHE.json is the tuning cache a `coda tune` run wrote on one GPU
(`scripts/device-verify.sh`'s `tune` part: OUT_DIR/tuning.json); OUT.json is
that GPU's file in coda-llama/tuning/, named for the GPU (coda-llama's build
refuses a file named for another GPU and says which name it wants). Keeps
the coda-llama entries, sorted by program and shape; refuses a cache that
holds more than one GPU's or toolchain's. With --only (names without the
`coda-llama::` prefix), the existing OUT.json keeps its other programs'
entries and those programs' entries are replaced by the cache's (a search
of some programs in more configs, as session 43's of four on the H100).
Say in bench/NOTES.md which run the file came from.
"""

import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cache")
    ap.add_argument("out")
    ap.add_argument("--only", nargs="+", metavar="PROGRAM")
    args = ap.parse_args()
    entries = [e for e in json.load(open(args.cache)) if e["program"].startswith("coda-llama::")]
    if args.only:
        only = {f"coda-llama::{p}" for p in args.only}
        missing = only - {e["program"] for e in entries}
        if missing:
            sys.exit(f"{args.cache}: no entries of {sorted(missing)}")
        entries = [e for e in entries if e["program"] in only]
        entries += [e for e in json.load(open(args.out)) if e["program"] not in only]
    if not entries:
        sys.exit(f"{args.cache}: no coda-llama entries")
    for field in ("gpu", "toolchain"):
        seen = sorted({e[field] for e in entries})
        if len(seen) != 1:
            sys.exit(f"{args.cache}: entries of more than one {field}: {seen}")
    entries.sort(key=lambda e: (e["program"], e["m"], e["n"], e["k"]))
    with open(args.out, "w") as f:
        json.dump(entries, f, indent=2, ensure_ascii=False)
        f.write("\n")
    print(f"{args.out}: {len(entries)} entries of {entries[0]['gpu']}")


if __name__ == "__main__":
    main()
