#!/usr/bin/env python3
"""Fits the polynomial of gelu_exact in cutlass-templates/include/coda/math.hpp
and checks the whole device algorithm in emulated f32 against mpmath.

    erfc(a) = t · 2^(P(t) − a²·log₂e),  t = 1 / (1 + a/2),  a = |x|/√2 ≥ 0

(the form of Chebyshev-fitted erfc approximations with relative error in
the tail: t → 0 as a → ∞, so P needs no range handling), and
gelu_exact(x) = 0.5·x·erfc(−x/√2) = 0.5·x·(x ≥ 0 ? 2 − erfc(a) : erfc(a)).

Needs numpy and mpmath (a development tool; nothing builds with it). Prints
the f32 coefficients of P (minimax in absolute error of P, i.e. relative
error of erfc, by Lawson's iteration over a ∈ [0, 10]: erfc(10) = 2.1e-45
is f32's second-smallest subnormal) and the algorithm's maximum relative error over
x ∈ ±[1e-3, 3], ±[3, 6], ±[1e-3, 10] and ±[10, 14] (past 6 the
rounding of a²·log₂e, ~1e-7 of an exponent up to 140, dominates). rcp and ex2 are emulated correctly rounded;
the hardware's rcp.approx and ex2.approx add ~1–2 ulp.
"""
import sys

import mpmath as mp
import numpy as np

from f32fit import f32, fma, lawson

mp.mp.prec = 120
DEGREE = int(sys.argv[1]) if len(sys.argv) > 1 else 7  # the device's; 8 and 9 gain nothing in the tail


LOG2E = mp.log(2) ** -1
# Chebyshev-spaced points in t over [1/6, 1] (a from 10 down to 0).
t = (np.cos(np.linspace(0.0, np.pi, 3000)) * 0.5 + 0.5) * (1 - 1 / 6) + 1 / 6
a = 2 / t - 2
# P(t) = log₂(erfc(a)/t) + a²·log₂e, in log₂ so that the device needs no extra multiply.
target = np.array([float(mp.log(mp.erfc(mp.mpf(ai)) / mp.mpf(ti), 2) + mp.mpf(ai) ** 2 * LOG2E) for ai, ti in zip(a, t)])
P = [f32(v) for v in lawson(target, [t ** i for i in range(DEGREE + 1)], iterations=300)]

HALF_SQRT_HALF = f32(float(mp.sqrt(0.5) / 2))  # a/2 = |x|·(1/(2√2))
B = f32(float(mp.sqrt(LOG2E / 2)))  # a²·log₂e = (|x|·B)²


def ex2(v):
    return f32(float(mp.mpf(2) ** mp.mpf(float(v))))


def gelu_exact(x):
    """The device algorithm, operation by operation in f32."""
    x = f32(x)
    ax = abs(x)
    tt = f32(1.0 / float(fma(ax, HALF_SQRT_HALF, f32(1))))
    p = P[DEGREE]
    for c in reversed(P[:DEGREE]):
        p = fma(p, tt, c)
    b = f32(ax * B)
    q = f32(tt * ex2(fma(-b, b, p)))
    r = f32(f32(2) - q) if x >= 0 else q
    return f32(f32(f32(0.5) * x) * r)


def reference(x):
    x = mp.mpf(float(x))
    return x / 2 * mp.erfc(-x / mp.sqrt(2))


def worst(xs):
    errs = []
    for x in xs:
        r = reference(x)
        if abs(r) < 1.17549435e-38:  # relative error only where the result is a normal f32
            continue
        errs.append((float(abs((mp.mpf(float(gelu_exact(x))) - r) / r)), x))
    return max(errs)


if __name__ == "__main__":
    print(f"a/2 = |x| * {float(HALF_SQRT_HALF):.9e}f, a^2 log2(e) = (|x| * {float(B):.9e}f)^2")
    print(f"P, degree {DEGREE}, t^0 first (log2 form):")
    print(", ".join(f"{float(c):.9e}f" for c in P))
    print(f"fit: max |P(t) - target| = {np.max(np.abs(np.polyval(np.array(P[::-1], dtype=np.float64), t) - target)):.2e} (log2 units)")
    rng = np.random.default_rng(0)
    for lo, hi in [(1e-3, 3.0), (3.0, 6.0), (1e-3, 10.0), (10.0, 14.0)]:
        mags = np.exp(rng.uniform(np.log(lo), np.log(hi), 20000)).astype(f32)
        xs = np.concatenate([mags, -mags])
        e, x = worst(xs)
        print(f"x in ±[{lo:g}, {hi:g}]: max relative error {e:.2e} at x = {float(x):.6g}")
