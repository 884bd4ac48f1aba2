"""What the coefficient-fitting scripts share (fit-sincos.py, fit-erfc.py):
f32 fused multiply-add emulated in numpy, and a minimax fit by Lawson's
iteration. Imported from the scripts' own folder."""
import numpy as np

f32 = np.float32


def fma(a, b, c):
    """f32 fma: the product of two f32 is exact in f64; one rounding to f32 after the sum."""
    return f32(np.float64(a) * np.float64(b) + np.float64(c))


def lawson(target, basis, iterations=200):
    """Weighted least squares whose weights grow where the error is largest: converges to minimax."""
    a = np.stack(basis, 1)
    w = np.full(len(target), 1.0 / len(target))
    for _ in range(iterations):
        sw = np.sqrt(w)
        c = np.linalg.lstsq(a * sw[:, None], target * sw, rcond=None)[0]
        w *= np.abs(a @ c - target)
        w /= w.sum()
    return c
