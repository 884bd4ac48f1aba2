// Aux reductions: finish per-tile partial statistics into per-row values.
// Deterministic (a fixed summation order, no atomics); one thread per row.
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

// r[m] = rsqrt(Σ_t partials[t * m_pad + m] * inv_d + eps)
__global__ void rms_finish(const float* __restrict__ partials, int64_t m, int64_t m_pad, int64_t n_tiles,
                           float inv_d, float eps, float* __restrict__ r) {
  int64_t row = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= m) return;
  float sum = 0.0f;
  for (int64_t t = 0; t < n_tiles; ++t) sum += partials[t * m_pad + row];
  r[row] = rsqrtf(sum * inv_d + eps);
}

}  // namespace

extern "C" int coda_rms_finish(const float* partials, int64_t m, int64_t m_pad, int64_t n_tiles, float inv_d,
                               float eps, float* r, void* stream) {
  if (stream == nullptr) return int(cudaErrorInvalidResourceHandle);
  int threads = 256;
  unsigned blocks = unsigned((m + threads - 1) / threads);
  rms_finish<<<blocks, threads, 0, static_cast<cudaStream_t>(stream)>>>(partials, m, m_pad, n_tiles, inv_d, eps, r);
  return int(cudaGetLastError());
}
