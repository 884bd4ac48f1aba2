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

}  // namespace coda::math
