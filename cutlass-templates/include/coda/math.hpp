// Scalar f32 functions that generated element-wise code calls by name.
// Semantics match coda-dsl's interpreter (crate coda-dsl, module interp).
//
// On the device each transcendental is one or two special-function-unit
// instructions with no slow path (libdevice's expf/logf/tanhf/IEEE division
// inline range-reduction code per element, which in unrolled epilogues costs
// issue slots and instruction cache). Without `.ftz` the approximations keep
// subnormal inputs and outputs. Errors (PTX ISA, and measured against the f64
// interpreter by the `math_functions` GPU test; README, "Maps"):
//   exp   ex2.approx(x·log2 e)    ~2 ulp + 1.2·|x| ulp
//   log   lg2.approx(x)·ln 2      absolute 2^-22 near 1, else ~3 ulp
//   tanh  tanh.approx             relative 2^-11
//   x/y   x · rcp.approx(y)       ~2 ulp; y rescaled by 2^±64 when 1/y would
//                                 be subnormal or overflow
//   sigmoid, silu, gelu from e = exp(−|z|) and rcp, so that neither tail
//   cancels or underflows early; softplus from exp and a log1p that is a
//   series for small arguments; gelu_exact from erfcf (erff cancels for x ≪ 0).
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
__device__ __forceinline__ float rcp(float x) {
  float y;
  asm("rcp.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
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
  return x * rcp(y * s) * s;
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
  float r = rcp(1.0f + e);
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
// 0.5·x·(1 + erf(x/√2)) = 0.5·x·erfc(−x/√2): 1 + erff cancels to 0 for
// x < −5.9; erfcf keeps the tail until it underflows.
CUTLASS_HOST_DEVICE float gelu_exact(float x) { return 0.5f * x * erfcf(x * -0.707106781186547524f); }
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

// sin and cos on the device as one SFU instruction each after reducing the
// argument to [−π, π] (two-constant Cody–Waite): absolute error ~1e-6 for
// |x| < 1e5 (RoPE angles), with none of sinf's inlined slow path, whose code
// size per element overflowed the instruction cache in unrolled epilogues.
CUTLASS_HOST_DEVICE float reduce_2pi(float x) {
  float k = rintf(x * 0.159154943091895f);
  float r = fmaf(-k, 6.28318548202514648f, x);  // 2π rounded to f32 ...
  return fmaf(-k, -1.74845553e-7f, r);          // ... and the rest of 2π
}
CUTLASS_HOST_DEVICE float sin(float x) {
#if defined(__CUDA_ARCH__)
  return __sinf(reduce_2pi(x));
#else
  return sinf(x);
#endif
}
CUTLASS_HOST_DEVICE float cos(float x) {
#if defined(__CUDA_ARCH__)
  return __cosf(reduce_2pi(x));
#else
  return cosf(x);
#endif
}

}  // namespace coda::math
