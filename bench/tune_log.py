"""The timings `coda tune` logs with CODA_LOG=debug, one line per timed
choice: `coda tune: PROGRAM M=.. N=.. K=..: CONFIG swizzle S RASTER T ms`."""
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
