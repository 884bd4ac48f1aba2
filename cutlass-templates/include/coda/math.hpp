// Scalar f32 functions that generated element-wise code calls by name.
// Semantics match coda-dsl's interpreter (crate coda-dsl, module interp).
//
// On the device nothing here has a slow path: libdevice's expf/logf/tanhf/
// sinf/IEEE division inline range-reduction code per element, which in
// unrolled epilogues costs issue slots and overflowed the instruction cache.
// exp, log, tanh and the reciprocal are one special-function-unit instruction
// each; sin and cos are a short reduction and polynomials (huge angles call
// libdevice's sincosf out of line); gelu_exact is a fitted erfc (a
// reciprocal, a polynomial and ex2). Without `.ftz` the approximations keep
// subnormal inputs and outputs, for which ptxas wraps each in range handling
// (6 more instructions a reciprocal, 3 an ex2 or lg2); where the argument's
// range keeps input and result normal (or 0, inf) a reciprocal takes the
// `.ftz` form, the same result without it (rcp_normal). Errors (PTX ISA, and
// measured against the f64 interpreter by the GPU tests; README, "Maps"):
//   exp   ex2.approx(x·log2 e)    ~2 ulp + 1.2·|x| ulp
//   log   lg2.approx(x)·ln 2      absolute 2^-22 near 1, else ~3 ulp
//   tanh  tanh.approx             relative 2^-11
//   x/y   x · rcp.approx(y)       ~2 ulp; y rescaled by 2^±64 when 1/y would
//                                 be subnormal or overflow
//   sin, cos                      relative ~3 ulp, zeros included; |x| > 2^19
//                                 by libdevice's sincosf
//   sigmoid, silu, gelu from e = exp(−|z|) and rcp, so that neither tail
//   cancels or underflows early; softplus from exp and a log1p that is a
//   series for small arguments; gelu_exact from erfc (erf cancels for x ≪ 0):
//   relative ~1e-5 (emulated; past x = −6 the rounding of the exponent
//   dominates).
#pragma once

#include <cutlass/cutlass.h>

namespace coda::math {

#if defined(__CUDA_ARCH__)
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float lg2(float x) {
  float y;
  asm("lg2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// Only for |x| in [2^-126, 2^126] (or 0, inf, NaN): there `.ftz` flushes nothing.
__device__ __forceinline__ float rcp_normal(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
#endif

CUTLASS_HOST_DEVICE float exp(float x) {
#if defined(__CUDA_ARCH__)
  return ex2(x * 1.44269504088896341f);
#else
  return expf(x);
#endif
}
CUTLASS_HOST_DEVICE float log(float x) {
#if defined(__CUDA_ARCH__)
  return lg2(x) * 0.693147180559945309f;
#else
  return logf(x);
#endif
}
CUTLASS_HOST_DEVICE float tanh(float x) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return tanhf(x);
#endif
}
CUTLASS_HOST_DEVICE float div(float x, float y) {
#if defined(__CUDA_ARCH__)
  // rcp(y) overflows for subnormal y and is subnormal (inexact) for |y| > 2^126,
  // while x/y may be neither: scale y into range and the quotient back.
  float a = fabsf(y);
  float s = a < 1.17549435e-38f ? 18446744073709551616.0f : (a > 8.50705917e37f ? 5.42101086e-20f : 1.0f);
  return x * rcp_normal(y * s) * s;
#else
  return x / y;
#endif
}
// σ(z) = 1/(1+e^−z) for z ≥ 0 and e^z/(1+e^z) below: with e = e^−|z| ≤ 1 the
// reciprocal needs no range handling and the negative tail keeps its
// relative accuracy down to e^z's underflow (1/(1+e^−z) is 0 below −88.7).
CUTLASS_HOST_DEVICE float sigmoid(float z) {
  float e = exp(-fabsf(z));
#if defined(__CUDA_ARCH__)
  float r = rcp_normal(1.0f + e);  // 1 + e ∈ [1, 2]
#else
  float r = 1.0f / (1.0f + e);
#endif
  return z >= 0.0f ? r : e * r;
}
CUTLASS_HOST_DEVICE float silu(float x) { return x * sigmoid(x); }
// 0.5·x·(1 + tanh u) = x·σ(2u), u = √(2/π)·(x + 0.044715·x³): 1 + tanh u
// cancels to 0 for u < −9 where the result is still a normal float.
CUTLASS_HOST_DEVICE float gelu(float x) {
  return x * sigmoid(1.59576912160573071f * fmaf(0.044715f * x, x * x, x));
}
// 0.5·x·(1 + erf(x/√2)) = 0.5·x·erfc(−x/√2) (1 + erf cancels to 0 for
// x < −5.9). With a = |x|/√2: erfc(a) = t·2^(P(t) − a²·log₂e), t = 1/(1 + a/2)
// ∈ (0, 1], P of degree 7 fitted for relative error (scripts/fit-erfc.py,
// which also checks this algorithm in emulated f32), so the tail x ≪ 0 keeps
// its relative accuracy until it underflows; erfc(−a) = 2 − erfc(a). Two SFU
// instructions and ~21 others (SASS), against libdevice erfcf's three and ~40.
CUTLASS_HOST_DEVICE float gelu_exact(float x) {
#if defined(__CUDA_ARCH__)
  float ax = fabsf(x);
  // 1 + a/2 ≥ 1; past 2^126 t would be subnormal, but then ex2 below is 0.
  float t = rcp_normal(fmaf(ax, 3.535533845e-01f, 1.0f));
  float p = fmaf(t, -2.649679482e-01f, 1.058928609e+00f);
  p = fmaf(p, t, -1.399595022e+00f);
  p = fmaf(p, t, 4.629833996e-01f);
  p = fmaf(p, t, -3.489071876e-02f);
  p = fmaf(p, t, 5.615798235e-01f);
  p = fmaf(p, t, 1.441725373e+00f);
  p = fmaf(p, t, -1.825764537e+00f);
  float b = ax * 8.493217826e-01f;  // b² = a²·log₂e
  float q = t * ex2(fmaf(-b, b, p));
  return 0.5f * x * (x >= 0.0f ? 2.0f - q : q);
#else
  return 0.5f * x * erfcf(x * -0.707106781186547524f);
#endif
}
// log(1 + e), e ∈ [0, 1]: 1 + e rounds e away below 2^−24 and log's absolute
// error near 1 is large relative to small e, so small e takes the series
// e − e²/2 + e³/3 − e⁴/4 (relative error < e⁴/5 < 1e-6 for e < 1/32).
CUTLASS_HOST_DEVICE float log1p_unit(float e) {
  float series = e * fmaf(-e, fmaf(-e, fmaf(-e, 0.25f, 0.333333343f), 0.5f), 1.0f);
  return e < 0.03125f ? series : log(1.0f + e);
}
// max(x, 0) + log(1 + e^−|x|): no overflow, and no early 0 for x ≪ 0.
CUTLASS_HOST_DEVICE float softplus(float x) { return fmaxf(x, 0.0f) + log1p_unit(exp(-fabsf(x))); }
CUTLASS_HOST_DEVICE float rsqrt(float x) {
#if defined(__CUDA_ARCH__)
  return ::rsqrtf(x);
#else
  return 1.0f / sqrtf(x);
#endif
}
CUTLASS_HOST_DEVICE float select(float c, float a, float b) { return c != 0.0f ? a : b; }

#if defined(__CUDA_ARCH__)
struct SinCos {
  float sin, cos;
};
// x = k·π/2 + r, |r| ≤ π/4, by three-constant Cody–Waite: π/2 is split into
// f32 parts, and the first fma is exact (x − k·C1 is a multiple of 2^-23 of
// magnitude < 1), so r keeps its relative accuracy where sin or cos is near a
// zero. On [−π/4, π/4] sin r = r + r³·P(r²), cos r = 1 + r²·Q(r²), with
// coefficients fitted for minimal relative error by scripts/fit-sincos.py,
// which also checks this algorithm in emulated f32; k mod 4 picks ±sin r or
// ±cos r. Relative error ≤ 3 ulp for |x| ≤ 2^19 (measured to 1e6); beyond,
// x·2/π soon rounds to the wrong k and r leaves the polynomials' interval, so
// those arguments (and ±∞) take libdevice's sincosf, a full Payne–Hanek
// reduction, through one non-inlined function: its code is not repeated per
// element, and the branch is not taken at ordinary angles. The reduction and
// polynomials come first, unconditionally, and the far branch after them, so
// that sin and cos of one angle (two calls, e.g. from two epilogue nodes)
// share them: with the branch first, each call's arithmetic sat in its own
// branch and nvcc computed it twice (bench/NOTES.md, session 26).
__device__ __noinline__ SinCos sin_cos_far(float x) {
  SinCos v;
  ::sincosf(x, &v.sin, &v.cos);
  return v;
}
__device__ __forceinline__ SinCos sin_cos(float x) {
  float k = rintf(x * 0.636619747f);
  float r = fmaf(-k, 1.57079637f, x);
  r = fmaf(-k, -4.37113883e-8f, r);
  r = fmaf(-k, -1.71512451e-15f, r);
  float r2 = r * r;
  float s = fmaf(r2 * r, fmaf(r2, fmaf(r2, -1.95144545e-4f, 8.33215471e-3f), -1.66666552e-1f), r);
  float c = fmaf(r2, fmaf(r2, fmaf(r2, fmaf(r2, 2.43824925e-5f, -1.38866703e-3f), 4.16666195e-2f), -0.5f), 1.0f);
  int q = __float2int_rn(k);  // defined for NaN and ±∞ (r is NaN then anyway)
  SinCos v{(q & 1) ? c : s, (q & 1) ? -s : c};
  if (q & 2) {
    v.sin = -v.sin;
    v.cos = -v.cos;
  }
  if (fabsf(x) > 524288.0f) {
    v = sin_cos_far(x);
  }
  return v;
}
#endif
CUTLASS_HOST_DEVICE float sin(float x) {
#if defined(__CUDA_ARCH__)
  return x == 0.0f ? x : sin_cos(x).sin;  // sin(−0) = −0; r would be +0
#else
  return sinf(x);
#endif
}
CUTLASS_HOST_DEVICE float cos(float x) {
#if defined(__CUDA_ARCH__)
  return sin_cos(x).cos;
#else
  return cosf(x);
#endif
}

}  // namespace coda::math
