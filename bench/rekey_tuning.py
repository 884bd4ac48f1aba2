#!/usr/bin/env python3
"""Carries a shipped tuning file over a header change that leaves its kernels as they were.

A tuning entry names its kernel by the content hash of the kernel's source
and toolchain (headers included), so any change under
`cutlass-templates/include` retires every entry, also where the change
cannot reach the kernel (a new header it does not include, a template
parameter it leaves at its default). This rewrites an entry's key from the
`coda inspect` listing before the change to the one after, for each
(program, config) whose entry holds the old key and whose ptxas report
(registers, stack, spills, shared memory) is the same in both listings;
any other entry is left as it is (the runtime then ignores it) and named.

    rekey_tuning.py OLD_INSPECT NEW_INSPECT coda-llama/tuning/nvidia-h200.json [PROGRAM ...]   # each GPU's file

Entries of each PROGRAM named after the file (e.g. coda-llama::linear_cross_entropy)
are re-keyed whatever their ptxas reports: a change that reaches those
kernels, alike in every config, with the old search's choice carried as a
guess (below).

The ptxas report is a necessary check, not a proof that the device code is
unchanged; say in bench/NOTES.md why the change cannot reach the kernels
(the objects do not settle it: nvcc embeds per-run identifiers, so two
builds of one unchanged source give `.nv_fatbin` sections that differ).
Over a change that does reach the kernels, alike in every config (session
20's accumulator fence), a re-keyed entry is the old search's choice carried
as a guess: say so in NOTES, and time the shipped rows in the same session.
"""

import json
import re
import sys

LINE = re.compile(r"^\s+(\S+)\s+(?:\(own\))?\s*key ([0-9a-f]{16})\s+(.*)$")


def listing(path):
    """(program, config) -> (key, ptxas report) from `coda inspect` output."""
    out, program = {}, None
    for line in open(path):
        if not line.startswith(" "):
            program = line.split(" ")[0]
            continue
        m = LINE.match(line.rstrip("\n"))
        if m and program:
            out[(program, m.group(1))] = (m.group(2), m.group(3))
    return out


def main(old_path, new_path, tuning_path, *guessed):
    old, new = listing(old_path), listing(new_path)
    entries = json.load(open(tuning_path))
    moved, kept = 0, []
    for e in entries:
        k = (e["program"], e["config"])
        if k in old and k in new and old[k][0] == e["key"] and (old[k][1] == new[k][1] or k[0] in guessed):
            e["key"] = new[k][0]
            moved += 1
        elif not (k in new and new[k][0] == e["key"]):
            kept.append(f"{k[0]} {k[1]} m={e['m']} n={e['n']} k={e['k']}")
    with open(tuning_path, "w") as f:
        json.dump(entries, f, indent=2)
        f.write("\n")
    print(f"{moved} of {len(entries)} entries re-keyed")
    for line in kept:
        print(f"not re-keyed (no match or a different ptxas report): {line}")
    return 0 if not kept else 1


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
