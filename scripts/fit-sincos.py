#!/usr/bin/env python3
"""Fits the sin/cos polynomials of cutlass-templates/include/coda/math.hpp and
checks the whole device algorithm in emulated f32 against mpmath.

Needs numpy and mpmath (a development tool; nothing builds with it). Prints
the Cody–Waite parts of π/2, the f32 coefficients (minimax in relative error
by Lawson's iteration), and the algorithm's maximum relative error over
random angles in ±10^[−6, 6] and angles near multiples of π/2.
"""
import mpmath as mp
import numpy as np

from f32fit import f32, fma, lawson

mp.mp.prec = 200


half_pi = mp.pi / 2
C1 = f32(float(half_pi))
C2 = f32(float(half_pi - mp.mpf(float(C1))))
C3 = f32(float(half_pi - mp.mpf(float(C1)) - mp.mpf(float(C2))))
TWO_OVER_PI = f32(float(2 / mp.pi))


# Chebyshev-spaced points on (0, π/4], a little past π/4 for k's rounding.
r = (np.cos(np.linspace(0.001, np.pi - 0.001, 4000)) * 0.5 + 0.5) * (np.pi / 4 + 1e-3)
s, c = np.sin(r), np.cos(r)
# sin r = r + r³·P(r²), cos r = 1 + r²·Q(r²), each error relative to the value.
P = [f32(v) for v in lawson((s - r) / s, [r ** (3 + 2 * i) / s for i in range(3)])]
Q = [f32(v) for v in lawson((c - 1) / c, [r ** (2 + 2 * i) / c for i in range(4)])]


def sin_cos(x):
    """The device algorithm, operation by operation in f32."""
    x = f32(x)
    k = f32(np.rint(f32(x * TWO_OVER_PI)))
    rr = fma(-k, C1, x)
    rr = fma(-k, C2, rr)
    rr = fma(-k, C3, rr)
    r2 = f32(rr * rr)
    sn = fma(f32(r2 * rr), fma(r2, fma(r2, P[2], P[1]), P[0]), rr)
    cs = fma(r2, fma(r2, fma(r2, fma(r2, Q[3], Q[2]), Q[1]), Q[0]), f32(1))
    q = int(k) & 3
    return [sn, cs, -sn, -cs][q], [cs, -sn, -cs, sn][q]


print("pi/2 parts:", *("%.9e" % v for v in (C1, C2, C3)), " 2/pi: %.9e" % TWO_OVER_PI)
print("P:", *("%.9e" % v for v in P))
print("Q:", *("%.9e" % v for v in Q))
rng = np.random.default_rng(7)
angles = np.concatenate([
    10 ** rng.uniform(-6, 6, 20000) * rng.choice([-1, 1], 20000),
    [float(half_pi * k) + rng.uniform(-1e-3, 1e-3) for k in range(-2000, 2001)],
]).astype(np.float32)
worst_sin = worst_cos = 0.0
for a in angles:
    sn, cs = sin_cos(a)
    x = mp.mpf(float(a))
    worst_sin = max(worst_sin, float(abs((float(sn) - mp.sin(x)) / mp.sin(x))))
    worst_cos = max(worst_cos, float(abs((float(cs) - mp.cos(x)) / mp.cos(x))))
print("max relative error: sin %.2e, cos %.2e" % (worst_sin, worst_cos))
