// Scalar f32 functions that generated element-wise code calls by name.
// Semantics match coda-dsl's interpreter (crate coda-dsl, module interp).
#pragma once

#include <cutlass/cutlass.h>

namespace coda::math {

CUTLASS_HOST_DEVICE float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
CUTLASS_HOST_DEVICE float silu(float x) { return x / (1.0f + expf(-x)); }
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
