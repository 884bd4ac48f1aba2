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
//   x/y   x · rcp.approx(y)       ~2 ulp, subnormal y rescaled (rcp would overflow)
//   sigmoid, silu from exp and rcp: relative accuracy kept on both tails;
//   gelu from tanh, softplus from exp and log, gelu_exact from erff.
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
  // 1/y overflows for subnormal y while x/y may not: divide by y·2^64 then.
  constexpr float two64 = 18446744073709551616.0f;
  return fabsf(y) < 1.17549435e-38f ? x * rcp(y * two64) * two64 : x * rcp(y);
#else
  return x / y;
#endif
}
// 1 + e^−x ≥ 1: the reciprocal needs no range handling.
CUTLASS_HOST_DEVICE float sigmoid(float x) {
#if defined(__CUDA_ARCH__)
  return rcp(1.0f + exp(-x));
#else
  return 1.0f / (1.0f + expf(-x));
#endif
}
CUTLASS_HOST_DEVICE float silu(float x) {
#if defined(__CUDA_ARCH__)
  return x * rcp(1.0f + exp(-x));
#else
  return x / (1.0f + expf(-x));
#endif
}
CUTLASS_HOST_DEVICE float gelu(float x) {
  float u = 0.797884560802865355f * fmaf(0.044715f * x, x * x, x);  // √(2/π)·(x + 0.044715·x³)
  return 0.5f * x * (1.0f + tanh(u));
}
// erff is a short polynomial with no slow path.
CUTLASS_HOST_DEVICE float gelu_exact(float x) { return 0.5f * x * (1.0f + erff(x * 0.707106781186547524f)); }
// max(x, 0) + log(1 + e^−|x|): no overflow, and e^−|x| ≤ 1 keeps log's argument in [1, 2].
CUTLASS_HOST_DEVICE float softplus(float x) { return fmaxf(x, 0.0f) + log(1.0f + exp(-fabsf(x))); }
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
