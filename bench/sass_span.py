#!/usr/bin/env python3
"""Where ptxas put a GEMM kernel's epilogue math relative to the mainloop's
tail, per kernel of a SASS listing (session 19's notes):

    cuobjdump -sass KERNEL.o > K.sass      # cuobjdump and nvdisasm: the nvidia-cuda-* wheels
    sass_span.py K.sass

For each kernel with wgmmas (HGMMA, or QGMMA for FP8): the instructions
between the last one and the epilogue's first shared-memory access or
barrier (the "span"; ~40-100 in a plain GEMM), the MUFU among them, and
how many instructions after the final `WARPGROUP.DEPBAR.LE gsb0, 0x0` the
consumer's last stage release
(`SYNCS.ARRIVE.TRANS64.RED`, CUTLASS's `mma_tail`) comes: the producer can
refill that stage only then, so math scheduled before it stalls the other
warpgroup's mainloop. Then the instructions from the last wgmma to the
kernel's end (the epilogue, unrolled over the tile's subtiles) and the
most common of them.
"""

import collections
import re
import sys


def main(path):
    text = open(path).read()
    for fn in re.split(r"Function : ", text)[1:]:
        name = fn.split("\n")[0]
        ins = [re.sub(r"^\s*/\*[0-9a-f]+\*/\s*", "", l).strip().rstrip(";")
               for l in fn.split("\n") if re.match(r"^\s*/\*[0-9a-f]{4,}\*/\s+\S", l)]
        ops = [re.sub(r"^@!?U?P\w+\s+", "", i).split(" ")[0] for i in ins]
        mma = [k for k, o in enumerate(ops) if o.startswith(("HGMMA", "QGMMA"))]
        if not mma:
            continue
        last = mma[-1]
        done = next(k for k in range(last, len(ops)) if ins[k].startswith("WARPGROUP.DEPBAR.LE gsb0, 0x0"))
        release = next(k for k in range(done, len(ops)) if "SYNCS.ARRIVE.TRANS64.RED" in ins[k])
        first = next(k for k in range(last, len(ops)) if ops[k].startswith(("LDSM", "STSM", "BAR")))
        span = ops[last + 1 : first]
        schedule = "pingpong" if "Pingpong" in name else "cooperative" if "Cooperative" in name else "?"
        mufu = sum(o.startswith("MUFU") for o in span)
        print(f"{schedule}: span {len(span)} instructions, {mufu} MUFU; stage release {release - done} after the final DEPBAR")
        tail = collections.Counter(o.split(".")[0] for o in ops[last + 1 :])
        common = ", ".join(f"{op} {n}" for op, n in tail.most_common(8))
        print(f"    after the last wgmma: {sum(tail.values())} instructions ({common})")


if __name__ == "__main__":
    main(sys.argv[1])
