// The C ABI between coda-runtime (Rust) and every generated launcher.
// Mirrored by `coda_runtime::ffi::GemmLaunch`; change both together.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// One GEMM-epilogue launch: D-side outputs are computed from acc = A · Bᵀ.
// A is row-major [m, k], B is a PyTorch Linear weight [n, k] (row-major, K-major).
typedef struct CodaGemmLaunch {
  int64_t m, n, k;
  const void* a;
  const void* b;
  // Blockwise-scaled 8-bit operands only (else null): f32 a_scale [ceil(k/128), m]
  // and b_scale [ceil(n/128), ceil(k/128)] (coda/sm90_gemm.hpp, BlockwiseOperands).
  const void* a_scale;
  const void* b_scale;
  // The program's tensor parameters (inputs, then outputs), in declaration order.
  // Each generated launcher documents which index is which parameter.
  void* const* tensors;
  // The program's runtime scalars, in declaration order.
  const float* scalars;
  void* workspace;
  size_t workspace_bytes;
  int device_id;
  int sm_count;
  // Tile-scheduler options (runtime, no recompile): CTAs that are neighbours
  // in launch order walk `swizzle` (1, 2, 4 or 8) tiles across; `raster` 0 lets
  // CUTLASS choose, 1 walks along M first, 2 along N first.
  int swizzle;
  int raster;
  void* stream;  // a cudaStream_t owned by the caller; never the null stream
  // Filled with a human-readable reason when a call returns non-zero.
  char message[256];
} CodaGemmLaunch;

// Return codes of generated launchers.
enum CodaStatus {
  CODA_OK = 0,
  CODA_CANNOT_IMPLEMENT = 1,  // CUTLASS can_implement or a CODA alignment rule refused
  CODA_INIT_FAILED = 2,       // workspace/kernel-parameter set-up failed
  CODA_LAUNCH_FAILED = 3,     // the kernel launch returned an error
  CODA_BAD_ARGUMENT = 4,      // null stream, too-small workspace, ...
};

#ifdef __cplusplus
}
#endif
