#!/usr/bin/env python3
"""Makes a device run's searches of coda-llama's programs a shipped tuning file.

    ship_tuning.py CACHE.json OUT.json

CACHE.json is the tuning cache a `coda tune` run wrote on one GPU
(`scripts/device-verify.sh`'s `tune` part: OUT_DIR/tuning.json); OUT.json is
that GPU's file in coda-llama/tuning/, named for the GPU (coda-llama's build
refuses a file named for another GPU and says which name it wants). Keeps
the coda-llama entries, sorted by program and shape; refuses a cache that
holds more than one GPU's or toolchain's. Say in bench/NOTES.md which run
the file came from.
"""

import json
import sys


def main(cache, out):
    entries = [e for e in json.load(open(cache)) if e["program"].startswith("coda-llama::")]
    if not entries:
        sys.exit(f"{cache}: no coda-llama entries")
    for field in ("gpu", "toolchain"):
        seen = sorted({e[field] for e in entries})
        if len(seen) != 1:
            sys.exit(f"{cache}: entries of more than one {field}: {seen}")
    entries.sort(key=lambda e: (e["program"], e["m"], e["n"], e["k"]))
    with open(out, "w") as f:
        json.dump(entries, f, indent=2, ensure_ascii=False)
        f.write("\n")
    print(f"{out}: {len(entries)} entries of {entries[0]['gpu']}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(*sys.argv[1:])
