#!/usr/bin/env python3
"""A model in f32 of `row_lse`'s online step (coda/rowstate.hpp,
RowLsePartials::Callbacks::accumulate and end) before and after session 32,
over rows of large magnitudes, against log-sum-exp in f64.

    python3 bench/lse_step_model.py

Each f32 operation is rounded once (an FMA's product is exact in f64 for f32
operands); MUFU.EX2 with .ftz is 2^x rounded to f32, +inf from 128, 0 below
2^-126. The old step keeps rf = fl(max · log2 e) for every finite max; the
new one only below 2^30 in magnitude and sums exp(x − max) directly above.
A row counts as wrong where its lse is NaN, infinite where f64's is finite,
or more than 1e-6 relative off.
"""

import math
import random
import struct

INF = math.inf
L = struct.unpack("f", struct.pack("f", 1.4426950408889634))[0]
EXACT_MAX = 2.0**30


def f32(x):
    if math.isnan(x) or math.isinf(x):
        return x
    try:
        return struct.unpack("f", struct.pack("f", x))[0]
    except OverflowError:
        return math.copysign(INF, x)


def mul(a, b):
    return math.nan if {a, b} & {0.0} and (math.isinf(a) or math.isinf(b)) else f32(a * b)


def fma(a, b, c):
    p = a * b
    if math.isinf(p) and math.isinf(c) and (p > 0) != (c > 0):
        return math.nan
    return f32(p + c)


def ex2(x):
    if math.isnan(x):
        return x
    if x >= 128:
        return INF
    r = 2.0**x if x > -1000 else 0.0
    return 0.0 if r < 2**-126 else f32(r)


def step(state, xs, new):
    mo, rfo, so = state
    m = mo
    for x in xs:
        m = math.nan if math.isnan(m) or math.isnan(x) else max(m, x)
    empty = mo == -INF
    if not new or abs(m) < EXACT_MAX or not math.isfinite(m):
        ref = mul(m, L) if math.isfinite(m) else 0.0
        s = 0.0 if empty else mul(so, ex2(f32(rfo - ref)))
        for x in xs:
            s = f32(s + ex2(fma(x, L, -ref)))
    else:
        ref = -INF
        old = mul(f32(mo - m), L) if rfo == -INF else fma(-m, L, rfo)
        s = 0.0 if empty else mul(so, ex2(old))
        for x in xs:
            s = f32(s + ex2(mul(f32(x - m), L)))
    return m, ref, s


def lse(row, width, new):
    state = (-INF, 0.0, 0.0)
    for i in range(0, len(row), width):
        state = step(state, row[i : i + width], new)
    m, rf, s = state
    if math.isnan(m):
        return math.nan
    if math.isinf(m):
        return m
    if not new or rf != -INF:
        s = mul(s, ex2(fma(-m, L, rf)))
    if math.isnan(s):
        return math.nan
    return INF if s == INF else -INF if s <= 0 else m + math.log(s)


def reference(row):
    m = max(row)
    return m if math.isinf(m) else m + math.log(sum(math.exp(x - m) for x in row))


def main():
    rng = random.Random(7)
    wrong = {False: 0, True: 0}
    worst = {False: 0.0, True: 0.0}
    rows = 20000
    for t in range(rows):
        scale = 10 ** rng.uniform(0, 38.5)
        kind = t % 4
        row = []
        for _ in range(32):
            if kind == 0:
                x = rng.choice([-1, 1]) * scale * rng.uniform(0.5, 1)
            elif kind == 1:
                x = -scale * rng.uniform(0.999, 1)
            elif kind == 2:
                x = rng.choice([-scale, -EXACT_MAX, -EXACT_MAX * (1 + 2**-23), -EXACT_MAX * (1 - 2**-24), rng.uniform(-3, 3)])
            else:
                x = rng.choice([scale, -scale]) * rng.uniform(0.999999, 1)
            row.append(f32(x))
        want = reference(row)
        width = rng.choice([2, 4, 8])  # a fragment row's slots per subtile
        for new in (False, True):
            got = lse(row, width, new)
            if math.isnan(got) or (math.isinf(got) and got != want):
                wrong[new] += 1
                continue
            if math.isinf(want):
                continue
            err = abs(got - want) / max(1.0, abs(want))
            worst[new] = max(worst[new], err)
            wrong[new] += err > 1e-6
    for new, name in ((False, "old step"), (True, "new step")):
        print(f"{name}: {wrong[new]} of {rows} rows wrong, worst relative error of the rest {worst[new]:.2e}")


if __name__ == "__main__":
    main()
