// Aux reductions: finish per-tile partial statistics into per-row (or
// per-column) values. Deterministic (a fixed summation order, no atomics).
// The row and column finishers give a block 32 outputs (a warp's lanes, so
// that each tile's loads coalesce) and split the tiles over its 8 warps: one
// thread per output looping over a vocabulary's 256 tiles kept 16 SMs busy
// and took ~100 µs at 4096 rows (bench/NOTES.md, session 22). Also
// `repeat_two`, which lays vectors side by side (a per-head weight over a
// projection's columns), and `scale_into`, a tensor times a device scalar.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

constexpr int kLanes = 32, kWarps = 8;

struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};
// The max, NaN ignored (row_max's and col_max's partials).
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
// The max, NaN if either is (fmaxf drops a NaN).
struct MaxNan {
  __device__ float operator()(float a, float b) const { return isnan(a) || isnan(b) ? NAN : fmaxf(a, b); }
};

// Each lane's value combined over the block's warps in warp order; every
// thread of the block calls it and gets the result.
template <class Op>
__device__ float across_warps(float v, Op op) {
  __shared__ float part[kWarps][kLanes];
  part[threadIdx.y][threadIdx.x] = v;
  __syncthreads();
  float r = part[0][threadIdx.x];
  for (int w = 1; w < kWarps; ++w) r = op(r, part[w][threadIdx.x]);
  __syncthreads();  // the buffer is free for the next call
  return r;
}

// Σ_t p[t * pitch] over this output's tiles (none where `in` is false).
__device__ float sum_tiles(const float* __restrict__ p, bool in, int64_t pitch, int64_t n_tiles) {
  float s = 0.0f;
  if (in)
    for (int64_t t = threadIdx.y; t < n_tiles; t += kWarps) s += p[t * pitch];
  return across_warps(s, Add{});
}

// This thread's output (row or column) of a block of kLanes × kWarps threads.
__device__ int64_t output_index() { return int64_t(blockIdx.x) * kLanes + threadIdx.x; }

// A pending error an earlier call on this thread left in the (static)
// runtime is not this launch's: cleared before each launch, so the status
// read after it is the launch's own (the GEMM launches do the same,
// coda-runtime/src/kernel.rs).
inline void clear_pending_error() { (void)cudaGetLastError(); }

// A launch of one of the finishers above over `n` outputs.
template <class... P, class... A>
int launch_outputs(void (*kernel)(P...), int64_t n, void* stream, A... args) {
  if (stream == nullptr) return int(cudaErrorInvalidResourceHandle);
  clear_pending_error();
  kernel<<<unsigned((n + kLanes - 1) / kLanes), dim3(kLanes, kWarps), 0, static_cast<cudaStream_t>(stream)>>>(args...);
  return int(cudaGetLastError());
}

// r[m] = rsqrt(Σ_t partials[t * m_pad + m] * inv_d + eps)
__global__ void rms_finish(const float* __restrict__ partials, int64_t m, int64_t m_pad, int64_t n_tiles,
                           float inv_d, float eps, float* __restrict__ r) {
  int64_t row = output_index();
  float sum = sum_tiles(partials + row, row < m, m_pad, n_tiles);
  if (threadIdx.y == 0 && row < m) r[row] = rsqrtf(sum * inv_d + eps);
}

}  // namespace

extern "C" int coda_rms_finish(const float* partials, int64_t m, int64_t m_pad, int64_t n_tiles, float inv_d,
                               float eps, float* r, void* stream) {
  return launch_outputs(rms_finish, m, stream, partials, m, m_pad, n_tiles, inv_d, eps, r);
}

namespace {

// out[m] = scale · Σ_t partials[t * m_pad + m]
__global__ void row_sum_finish(const float* __restrict__ partials, int64_t m, int64_t m_pad, int64_t n_tiles,
                               float scale, float* __restrict__ out) {
  int64_t row = output_index();
  float sum = sum_tiles(partials + row, row < m, m_pad, n_tiles);
  if (threadIdx.y == 0 && row < m) out[row] = sum * scale;
}

// out[n] = Σ_t partials[t * n_pad + n], or out[n] += that (accumulating row chunks).
__global__ void col_sum_finish(const float* __restrict__ partials, int64_t n, int64_t n_pad, int64_t m_tiles,
                               int accumulate, float* __restrict__ out) {
  int64_t col = output_index();
  float sum = sum_tiles(partials + col, col < n, n_pad, m_tiles);
  if (threadIdx.y == 0 && col < n) out[col] = accumulate ? out[col] + sum : sum;
}

// out[i] = max_t partials[t * pitch + i] for i < n: a row_max's [n_tiles, m_pad]
// or a col_max's [m_tiles, n_pad] partials (−∞ where no element was reduced).
__global__ void max_finish(const float* __restrict__ partials, int64_t n, int64_t pitch, int64_t tiles,
                           float* __restrict__ out) {
  int64_t i = output_index();
  float big = -INFINITY;
  if (i < n)
    for (int64_t t = threadIdx.y; t < tiles; t += kWarps) big = fmaxf(big, partials[t * pitch + i]);
  big = across_warps(big, Max{});
  if (threadIdx.y == 0 && i < n) out[i] = big;
}

// *out = the maximum of the same partials over every i < n: the whole
// output's (a per-tensor amax). One block of 1024 threads, a fixed order.
__global__ void max_all_finish(const float* __restrict__ partials, int64_t n, int64_t pitch, int64_t tiles,
                               float* __restrict__ out) {
  __shared__ float part[1024];
  float big = -INFINITY;
  for (int64_t t = 0; t < tiles; ++t)
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) big = fmaxf(big, partials[t * pitch + i]);
  part[threadIdx.x] = big;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) part[threadIdx.x] = fmaxf(part[threadIdx.x], part[threadIdx.x + stride]);
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = part[0];
}

// out[j] = Σ_t Σ_{h < groups} partials[t * n_pad + first + h * g + j] for j < g
// (t outer, h inner: the order is fixed).
__global__ void col_group_sum_finish(const float* __restrict__ partials, int64_t n_pad, int64_t m_tiles, int64_t first,
                                     int64_t groups, int64_t g, int accumulate, float* __restrict__ out) {
  int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= g) return;
  float sum = 0.0f;
  for (int64_t t = 0; t < m_tiles; ++t)
    for (int64_t h = 0; h < groups; ++h) sum += partials[t * n_pad + first + h * g + j];
  out[j] = accumulate ? out[j] + sum : sum;
}

// out[i] = a[i % na] for i < na·ta, then b[(i − na·ta) % nb] for the next
// nb·tb, then 0.
__global__ void repeat_two(const __nv_bfloat16* __restrict__ a, int64_t na, int64_t ta, const __nv_bfloat16* __restrict__ b,
                           int64_t nb, int64_t tb, __nv_bfloat16* __restrict__ out, int64_t n) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int64_t ea = na * ta, eb = ea + nb * tb;
  out[i] = i < ea ? a[i % na] : i < eb ? b[(i - ea) % nb] : __float2bfloat16(0.0f);
}

// dst[i] = src[i] · *g in f32, rounded once into D (bf16 round-to-nearest-even, as
// PyTorch's `mul(out=)`): gradients kept from a forward scaled by the loss's
// gradient, which stays on the device. Four elements a thread a step where
// both pointers are aligned for it (`vec`), one at a time for the rest. The
// buffers do not overlap (`__restrict__`; aux::scale_into's contract).
__device__ inline float to_float(float x) { return x; }
__device__ inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <class D>
__device__ inline D from_float(float x);
template <>
__device__ inline float from_float<float>(float x) { return x; }
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <class T>
struct alignas(4 * sizeof(T)) Four {
  T v[4];
};

template <class S, class D>
__global__ void scale_into(const S* __restrict__ src, const float* __restrict__ g, D* __restrict__ dst, int64_t n, int vec) {
  const float s = *g;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t n4 = vec ? n / 4 : 0;
  for (int64_t j = first; j < n4; j += stride) {
    Four<S> a = reinterpret_cast<const Four<S>*>(src)[j];
    Four<D> b;
#pragma unroll
    for (int k = 0; k < 4; ++k) b.v[k] = from_float<D>(to_float(a.v[k]) * s);
    reinterpret_cast<Four<D>*>(dst)[j] = b;
  }
  for (int64_t j = n4 * 4 + first; j < n; j += stride) dst[j] = from_float<D>(to_float(src[j]) * s);
}

// lse[m] = max_t + log Σ_t s_t · exp(max_t − max) over [2, n_tiles, m_pad] partials.
__global__ void lse_finish(const float* __restrict__ partials, int64_t m, int64_t m_pad, int64_t n_tiles,
                           float* __restrict__ lse) {
  int64_t row = output_index();
  bool in = row < m;
  const float* mx = partials + row;
  const float* se = partials + n_tiles * m_pad + row;
  float big = -INFINITY;
  if (in)
    for (int64_t t = threadIdx.y; t < n_tiles; t += kWarps) big = MaxNan{}(big, mx[t * m_pad]);
  big = across_warps(big, MaxNan{});
  // NaN, −∞ and +∞ maxima decide the row alone (rowstate.hpp's lse_merge).
  bool decided = isnan(big) || isinf(big);
  float sum = 0.0f;
  if (in && !decided)
    for (int64_t t = threadIdx.y; t < n_tiles; t += kWarps) sum += se[t * m_pad] * expf(mx[t * m_pad] - big);
  sum = across_warps(sum, Add{});
  if (threadIdx.y == 0 && in) lse[row] = decided ? big : big + logf(sum);
}

// loss[m] = lse[m] − w_target·target_logit[m] − w_sum·row_sum[m] + w_lse_squared·lse[m]²
// where 0 ≤ target[m] < n, else 0; mean over those rows (NaN if none). A term
// of weight 0 is left out (row_sum is null then), so plain cross-entropy
// (1, 0, 0) is lse − target_logit exactly. One block: a fixed summation
// order, deterministic.
__global__ void cross_entropy_finish(const float* __restrict__ lse, const float* __restrict__ target_logit,
                                     const float* __restrict__ row_sum, const int32_t* __restrict__ target, int64_t m,
                                     int64_t n, float w_target, float w_sum, float w_lse_squared,
                                     float* __restrict__ loss, float* __restrict__ mean) {
  __shared__ float sums[1024];
  __shared__ float counts[1024];
  float sum = 0.0f, count = 0.0f;
  for (int64_t row = threadIdx.x; row < m; row += blockDim.x) {
    int32_t t = target[row];
    bool valid = t >= 0 && t < n;
    float l = 0.0f;
    if (valid) {
      float a = lse[row];
      l = a;
      if (w_target != 0.0f) l -= w_target * target_logit[row];
      if (w_sum != 0.0f) l -= w_sum * row_sum[row];
      if (w_lse_squared != 0.0f) l += w_lse_squared * a * a;
    }
    loss[row] = l;
    sum += l;
    count += valid ? 1.0f : 0.0f;
  }
  sums[threadIdx.x] = sum;
  counts[threadIdx.x] = count;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      sums[threadIdx.x] += sums[threadIdx.x + stride];
      counts[threadIdx.x] += counts[threadIdx.x + stride];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) *mean = counts[0] > 0.0f ? sums[0] / counts[0] : NAN;
}

// The gradient of the mean loss with respect to each row's loss: 1 / (number
// of rows with a target in [0, n)) for those rows, 0 for ignored rows.
__global__ void cross_entropy_row_weights(const int32_t* __restrict__ target, int64_t m, int64_t n,
                                          float* __restrict__ w) {
  __shared__ float counts[1024];
  float count = 0.0f;
  for (int64_t row = threadIdx.x; row < m; row += blockDim.x) count += (target[row] >= 0 && target[row] < n) ? 1.0f : 0.0f;
  counts[threadIdx.x] = count;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) counts[threadIdx.x] += counts[threadIdx.x + stride];
    __syncthreads();
  }
  float inv = counts[0] > 0.0f ? 1.0f / counts[0] : 0.0f;
  for (int64_t row = threadIdx.x; row < m; row += blockDim.x) {
    w[row] = (target[row] >= 0 && target[row] < n) ? inv : 0.0f;
  }
}

unsigned blocks_for(int64_t n, int threads) { return unsigned((n + threads - 1) / threads); }

}  // namespace

extern "C" int coda_row_sum_finish(const float* partials, int64_t m, int64_t m_pad, int64_t n_tiles, float scale,
                                   float* out, void* stream) {
  return launch_outputs(row_sum_finish, m, stream, partials, m, m_pad, n_tiles, scale, out);
}

extern "C" int coda_col_sum_finish(const float* partials, int64_t n, int64_t n_pad, int64_t m_tiles, int accumulate,
                                   float* out, void* stream) {
  return launch_outputs(col_sum_finish, n, stream, partials, n, n_pad, m_tiles, accumulate, out);
}

extern "C" int coda_max_finish(const float* partials, int64_t n, int64_t pitch, int64_t tiles, float* out,
                               void* stream) {
  return launch_outputs(max_finish, n, stream, partials, n, pitch, tiles, out);
}

extern "C" int coda_max_all_finish(const float* partials, int64_t n, int64_t pitch, int64_t tiles, float* out,
                                   void* stream) {
  if (stream == nullptr) return int(cudaErrorInvalidResourceHandle);
  clear_pending_error();
  max_all_finish<<<1, 1024, 0, static_cast<cudaStream_t>(stream)>>>(partials, n, pitch, tiles, out);
  return int(cudaGetLastError());
}

extern "C" int coda_col_group_sum_finish(const float* partials, int64_t n_pad, int64_t m_tiles, int64_t first,
                                         int64_t groups, int64_t g, int accumulate, float* out, void* stream) {
  if (stream == nullptr) return int(cudaErrorInvalidResourceHandle);
  clear_pending_error();
  col_group_sum_finish<<<blocks_for(g, 128), 128, 0, static_cast<cudaStream_t>(stream)>>>(partials, n_pad, m_tiles,
                                                                                          first, groups, g, accumulate, out);
  return int(cudaGetLastError());
}

// src_bf16 / dst_bf16: the element types (else f32). A grid of at most 4096
// blocks of 256 threads strides over the rest.
extern "C" int coda_scale_into(const void* src, int src_bf16, const float* g, void* dst, int dst_bf16, int64_t n,
                               void* stream) {
  if (stream == nullptr) return int(cudaErrorInvalidResourceHandle);
  if (n == 0) return int(cudaSuccess);
  auto aligned = [](const void* p, int bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; };
  int vec = aligned(src, src_bf16 ? 8 : 16) && aligned(dst, dst_bf16 ? 8 : 16);
  const int64_t wanted = (n / 4 + 255) / 256;
  const int blocks = wanted < 1 ? 1 : wanted > 4096 ? 4096 : int(wanted);
  auto s = static_cast<cudaStream_t>(stream);
  using B = __nv_bfloat16;
  clear_pending_error();
  if (src_bf16 && dst_bf16)
    scale_into<<<blocks, 256, 0, s>>>(static_cast<const B*>(src), g, static_cast<B*>(dst), n, vec);
  else if (src_bf16)
    scale_into<<<blocks, 256, 0, s>>>(static_cast<const B*>(src), g, static_cast<float*>(dst), n, vec);
  else if (dst_bf16)
    scale_into<<<blocks, 256, 0, s>>>(static_cast<const float*>(src), g, static_cast<B*>(dst), n, vec);
  else
    scale_into<<<blocks, 256, 0, s>>>(static_cast<const float*>(src), g, static_cast<float*>(dst), n, vec);
  return int(cudaGetLastError());
}

extern "C" int coda_repeat_two_bf16(const void* a, int64_t na, int64_t ta, const void* b, int64_t nb, int64_t tb,
                                    void* out, int64_t n, void* stream) {
  if (stream == nullptr) return int(cudaErrorInvalidResourceHandle);
  clear_pending_error();
  repeat_two<<<blocks_for(n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const __nv_bfloat16*>(a), na, ta, static_cast<const __nv_bfloat16*>(b), nb, tb,
      static_cast<__nv_bfloat16*>(out), n);
  return int(cudaGetLastError());
}

extern "C" int coda_lse_finish(const float* partials, int64_t m, int64_t m_pad, int64_t n_tiles, float* lse,
                               void* stream) {
  return launch_outputs(lse_finish, m, stream, partials, m, m_pad, n_tiles, lse);
}

extern "C" int coda_cross_entropy_finish(const float* lse, const float* target_logit, const float* row_sum,
                                         const int32_t* target, int64_t m, int64_t n, float w_target, float w_sum,
                                         float w_lse_squared, float* loss, float* mean, void* stream) {
  if (stream == nullptr) return int(cudaErrorInvalidResourceHandle);
  clear_pending_error();
  cross_entropy_finish<<<1, 1024, 0, static_cast<cudaStream_t>(stream)>>>(
      lse, target_logit, row_sum, target, m, n, w_target, w_sum, w_lse_squared, loss, mean);
  return int(cudaGetLastError());
}

extern "C" int coda_cross_entropy_row_weights(const int32_t* target, int64_t m, int64_t n, float* w, void* stream) {
  if (stream == nullptr) return int(cudaErrorInvalidResourceHandle);
  clear_pending_error();
  cross_entropy_row_weights<<<1, 1024, 0, static_cast<cudaStream_t>(stream)>>>(target, m, n, w);
  return int(cudaGetLastError());
}
