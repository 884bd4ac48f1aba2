// Session 24: every f32 bit pattern through coda/math.hpp's sigmoid, silu,
// gelu, gelu_exact and div (x/y for four x), with rcp_normal as shipped
// (rcp.approx.ftz) and as before (rcp.approx, the header with `.ftz`
// removed, namespace renamed); counts results whose bits differ (NaN = NaN).
#include <cstdio>
#include <cstdint>
#include <cstring>
#include "math_new.hpp"
#include "math_old.hpp"

__device__ unsigned long long mismatches[5];
__device__ uint32_t first_bad[5];
__device__ unsigned long long checked;  // inputs seen: the check ran on all of them

__device__ bool same(float a, float b) {
  return (a != a && b != b) || __float_as_uint(a) == __float_as_uint(b);
}

__global__ void check(uint64_t base) {
  uint64_t i = base + blockIdx.x * uint64_t(blockDim.x) + threadIdx.x;
  if (i > 0xffffffffull) return;
  if (threadIdx.x == 0) atomicAdd(&checked, (unsigned long long)blockDim.x);
  float v = __uint_as_float(uint32_t(i));
  float r[5][2] = {
      {coda::math::sigmoid(v), coda::math_old::sigmoid(v)},
      {coda::math::silu(v), coda::math_old::silu(v)},
      {coda::math::gelu(v), coda::math_old::gelu(v)},
      {coda::math::gelu_exact(v), coda::math_old::gelu_exact(v)},
      {0.f, 0.f}};
  const float xs[4] = {1.0f, -3.7f, 1e30f, 1e-30f};
  bool div_ok = true;
  for (float x : xs) div_ok &= same(coda::math::div(x, v), coda::math_old::div(x, v));
  for (int f = 0; f < 5; ++f) {
    bool ok = f == 4 ? div_ok : same(r[f][0], r[f][1]);
    if (!ok && atomicAdd(&mismatches[f], 1ull) == 0) first_bad[f] = uint32_t(i);
  }
}

int main() {
  const uint64_t per = 1ull << 30;
  for (uint64_t b = 0; b < (1ull << 32); b += per) check<<<per / 256, 256>>>(b);
  if (cudaDeviceSynchronize() != cudaSuccess) { printf("CUDA error\n"); return 2; }
  unsigned long long m[5], n = 0; uint32_t f[5];
  cudaMemcpyFromSymbol(&n, checked, sizeof n);
  printf("inputs checked: %llu (2^32 = %llu)\n", n, 1ull << 32);
  cudaMemcpyFromSymbol(m, mismatches, sizeof m);
  cudaMemcpyFromSymbol(f, first_bad, sizeof f);
  const char* names[5] = {"sigmoid", "silu", "gelu", "gelu_exact", "div (x = 1, -3.7, 1e30, 1e-30)"};
  int bad = 0;
  for (int k = 0; k < 5; ++k) {
    printf("%-32s 2^32 inputs: %llu results differ%s", names[k], m[k], m[k] ? "" : "\n");
    if (m[k]) printf(" (first input bits 0x%08x)\n", f[k]);
    bad |= m[k] != 0;
  }
  return bad || n != (1ull << 32);
}
