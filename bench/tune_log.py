"""The timings `coda tune` logs with CODA_LOG=debug, one line per timed
choice: `coda tune: PROGRAM M=.. N=.. K=..: CONFIG swizzle S RASTER T ms`."""
import math
import re

LINE = re.compile(r"coda tune: (\S+) M=(\d+) N=(\d+) K=(\d+): (\S+) swizzle (\d+) (.+?) ([0-9.]+) ms$")


def timings(paths):
    """Each timed choice of the logs at `paths`: (program, m, n, k, config, swizzle, raster, ms)."""
    for path in paths:
        for raw in open(path, errors="replace"):
            line = re.sub(r"\x1b\[[0-9;]*m", "", raw.rstrip())
            m = LINE.search(line)
            if m and "DEBUG" in line:
                prog, mm, nn, kk, config, swizzle, raster, ms = m.groups()
                yield prog, int(mm), int(nn), int(kk), config, int(swizzle), raster, float(ms)


def scheduler(m, n, k, config):
    """The heuristic's swizzle and raster for `config` (`tune::scheduler`, mirrored: change both), as logged."""
    (tm, tn), (cm, cn) = (tuple(map(int, s.lstrip("c").split("x"))) for s in config.split("_")[1:3])
    gm, gn = math.ceil(m / tm), math.ceil(n / tn)
    if min(gm, gn) >= 32:
        long_k = cm == 1 and cn >= 2 and k >= 24576 and gm >= 64
        return (1 if long_k else 8), "along M"
    if cn == 1 and gm >= 128 and gn >= 8 and k >= 11008:
        return 8, "along M"
    return 1, "along M" if gn >= gm else "along N"
