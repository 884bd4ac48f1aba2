// Session 43 experiment (not part of the build): does CUTLASS's SM90
// stream-K tile scheduler recover the last partial wave of our GEMMs on 132
// SMs? Plain bf16 GEMMs D = A · Bᵀ (A [M, K], B [N, K], D bf16), each
// variant timed interleaved with the others at shapes where the grid of
// tiles leaves a partial last wave (4096 tiles of 128 × 128 on 132 SMs:
// 31.03 waves). Variants: our usual ping-pong 128 × 128 1 × 2 and
// cooperative 128 × 256 1 × 1 (persistent scheduler, swizzle 8 along M),
// and the cooperative tiles with the stream-K scheduler (deterministic
// reduction) in its heuristic mode and, as the scheduler's own overhead,
// its data-parallel mode. Timing: CUDA events around 5 launches, operand
// sets rotated past the L2, median of 30 samples; every launch includes
// what our runtime does per call (initialize: stream-K zeroes its
// barriers, then run). Outputs checked against the ping-pong kernel's.
//
// Build (here): nvcc -DNDEBUG -O3 --expt-relaxed-constexpr
//   -std=c++20 -gencode=arch=compute_90a,code=sm_90a -I$CUTLASS/include
//   -I$CUTLASS/tools/util/include streamk.cu -o streamk
#include <cutlass/cutlass.h>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/util/packed_stride.hpp>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

using namespace cute;
using bf16 = cutlass::bfloat16_t;

#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t e = (x);                                                                   \
    if (e != cudaSuccess) {                                                                \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

template <class TileShape, class ClusterShape, class KernelSchedule, class EpiSchedule, class Scheduler>
struct Variant {
  using Epi = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, cutlass::layout::RowMajor, 8, bf16,
      cutlass::layout::RowMajor, 8, EpiSchedule>::CollectiveOp;
  using Main = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, bf16, cutlass::layout::RowMajor, 8, bf16,
      cutlass::layout::ColumnMajor, 8, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epi::SharedStorage))>,
      KernelSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Main, Epi, Scheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

struct Sets {
  int m, n, k, count;
  std::vector<bf16*> a, b, d;
};

// One variant at one shape: a callable that launches on set i (initialize +
// run, as coda::sm90::run does per call).
template <class V>
std::function<void(int, cudaStream_t)> make(Sets& s, int mode, void** ws_out, size_t* ws_bytes) {
  using Gemm = typename V::Gemm;
  using Kernel = typename V::Kernel;
  auto args_for = [&s, mode](int i) {
    cutlass::KernelHardwareInfo hw;
    hw.device_id = 0;
    hw.sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(0);
    typename Gemm::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {s.m, s.n, s.k, 1},
        {s.a[i], cutlass::make_cute_packed_stride(typename Kernel::StrideA{}, {s.m, s.k, 1}), s.b[i],
         cutlass::make_cute_packed_stride(typename Kernel::StrideB{}, {s.n, s.k, 1})},
        {{1.f, 0.f}, nullptr, cutlass::make_cute_packed_stride(typename Kernel::StrideC{}, {s.m, s.n, 1}), s.d[i],
         cutlass::make_cute_packed_stride(typename Kernel::StrideD{}, {s.m, s.n, 1})},
        hw};
    using Raster = decltype(args.scheduler.raster_order);
    args.scheduler.max_swizzle_size = 8;
    args.scheduler.raster_order = Raster::AlongM;
    if constexpr (requires { args.scheduler.decomposition_mode; }) {
      using DM = decltype(args.scheduler.decomposition_mode);
      using RM = decltype(args.scheduler.reduction_mode);
      args.scheduler.decomposition_mode = mode == 0 ? DM::Heuristic : mode == 1 ? DM::DataParallel : DM::StreamK;
      args.scheduler.reduction_mode = RM::Deterministic;
    }
    return args;
  };
  size_t need = Gemm::get_workspace_size(args_for(0));
  void* ws = nullptr;
  if (need) CK(cudaMalloc(&ws, need));
  *ws_out = ws;
  *ws_bytes = need;
  auto gemm = std::make_shared<Gemm>();
  if (gemm->can_implement(args_for(0)) != cutlass::Status::kSuccess) {
    std::fprintf(stderr, "cannot implement\n");
    std::exit(1);
  }
  return [gemm, args_for, ws](int i, cudaStream_t st) {
    auto args = args_for(i);
    if (gemm->initialize(args, ws, st) != cutlass::Status::kSuccess) std::exit(2);
    if (gemm->run(st) != cutlass::Status::kSuccess) std::exit(3);
  };
}

using Coop = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using CoopEpi = cutlass::epilogue::TmaWarpSpecializedCooperative;
using Pp = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
using PpEpi = cutlass::epilogue::TmaWarpSpecialized;
using PP128 = Variant<Shape<_128, _128, _64>, Shape<_1, _2, _1>, Pp, PpEpi, cutlass::gemm::PersistentScheduler>;
using CO256 = Variant<Shape<_128, _256, _64>, Shape<_1, _1, _1>, Coop, CoopEpi, cutlass::gemm::PersistentScheduler>;
using SK256 = Variant<Shape<_128, _256, _64>, Shape<_1, _1, _1>, Coop, CoopEpi, cutlass::gemm::StreamKScheduler>;
using CO128 = Variant<Shape<_128, _128, _64>, Shape<_1, _2, _1>, Coop, CoopEpi, cutlass::gemm::PersistentScheduler>;
using SK128 = Variant<Shape<_128, _128, _64>, Shape<_1, _2, _1>, Coop, CoopEpi, cutlass::gemm::StreamKScheduler>;

__global__ void fill(bf16* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t x = uint32_t(i) * 2654435761u ^ seed;
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    p[i] = bf16((float(x & 0xffff) / 65536.f - 0.5f));
  }
}

__global__ void maxdiff(bf16 const* x, bf16 const* y, size_t n, float* out) {
  float m = 0.f;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    float a = float(x[i]), b = float(y[i]);
    m = fmaxf(m, fabsf(a - b) / fmaxf(1.f, fabsf(a)));
  }
  atomicMax(reinterpret_cast<int*>(out), __float_as_int(m));
}

int main(int argc, char** argv) {
  int samples = argc > 1 ? std::atoi(argv[1]) : 30;
  struct Shape3 { int m, n, k; };
  std::vector<Shape3> shapes = {{4096, 4096, 4096},  {8192, 8192, 8192},   {4096, 4096, 32768}, {4096, 8192, 32768},
                                {4096, 32768, 4096}, {16384, 4096, 11008}, {4096, 12288, 4096}, {8192, 16384, 8192}};
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  float* dev_max;
  CK(cudaMalloc(&dev_max, sizeof(float)));
  std::printf("| M | N | K | variant | ms | / pp 128x128 | max rel diff vs pp | workspace MiB |\n|---|---|---|---|---|---|---|---|\n");
  for (auto sh : shapes) {
    Sets s{sh.m, sh.n, sh.k, 0, {}, {}, {}};
    size_t bytes = (size_t(sh.m) * sh.k + size_t(sh.n) * sh.k + size_t(sh.m) * sh.n) * 2;
    s.count = int(std::max<size_t>(2, (400ull << 20) / bytes + 1));
    for (int i = 0; i < s.count; ++i) {
      bf16 *a, *b, *d;
      CK(cudaMalloc(&a, size_t(sh.m) * sh.k * 2));
      CK(cudaMalloc(&b, size_t(sh.n) * sh.k * 2));
      CK(cudaMalloc(&d, size_t(sh.m) * sh.n * 2));
      fill<<<1024, 256, 0, st>>>(a, size_t(sh.m) * sh.k, 17 + i);
      fill<<<1024, 256, 0, st>>>(b, size_t(sh.n) * sh.k, 91 + i);
      s.a.push_back(a), s.b.push_back(b), s.d.push_back(d);
    }
    struct Run { std::string name; std::function<void(int, cudaStream_t)> f; void* ws; size_t wsb; std::vector<float> t; };
    std::vector<Run> runs;
    auto add = [&](std::string name, auto f, void* ws, size_t wsb) { runs.push_back({name, f, ws, wsb, {}}); };
    void* ws; size_t wsb;
    { auto f = make<PP128>(s, 0, &ws, &wsb); add("pp 128x128 1x2", f, ws, wsb); }
    { auto f = make<CO256>(s, 0, &ws, &wsb); add("coop 128x256 1x1", f, ws, wsb); }
    { auto f = make<SK256>(s, 0, &ws, &wsb); add("coop 128x256 1x1 stream-K heuristic", f, ws, wsb); }
    { auto f = make<SK256>(s, 1, &ws, &wsb); add("coop 128x256 1x1 stream-K data-parallel", f, ws, wsb); }
    { auto f = make<CO128>(s, 0, &ws, &wsb); add("coop 128x128 1x2", f, ws, wsb); }
    { auto f = make<SK128>(s, 0, &ws, &wsb); add("coop 128x128 1x2 stream-K heuristic", f, ws, wsb); }
    // Correctness: each variant's D on set 0 against the ping-pong kernel's.
    bf16* ref;
    size_t nd = size_t(sh.m) * sh.n;
    CK(cudaMalloc(&ref, nd * 2));
    runs[0].f(0, st);
    CK(cudaMemcpyAsync(ref, s.d[0], nd * 2, cudaMemcpyDeviceToDevice, st));
    std::vector<float> diff(runs.size(), 0.f);
    for (size_t v = 0; v < runs.size(); ++v) {
      CK(cudaMemsetAsync(s.d[0], 0xff, nd * 2, st));
      runs[v].f(0, st);
      CK(cudaMemsetAsync(dev_max, 0, sizeof(float), st));
      maxdiff<<<1024, 256, 0, st>>>(ref, s.d[0], nd, dev_max);
      CK(cudaMemcpyAsync(&diff[v], dev_max, sizeof(float), cudaMemcpyDeviceToHost, st));
      CK(cudaStreamSynchronize(st));
    }
    // Warm-up ~1 s, then interleaved samples (the order rotates each sample).
    for (int w = 0; w < 20; ++w)
      for (auto& r : runs)
        for (int i = 0; i < 5; ++i) r.f((w * 5 + i) % s.count, st);
    CK(cudaStreamSynchronize(st));
    int set = 0;
    for (int smp = 0; smp < samples; ++smp) {
      for (size_t j = 0; j < runs.size(); ++j) {
        auto& r = runs[(j + smp) % runs.size()];
        CK(cudaEventRecord(e0, st));
        for (int i = 0; i < 5; ++i) r.f((set++) % s.count, st);
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        r.t.push_back(ms / 5);
      }
    }
    CK(cudaGetLastError());
    std::vector<float> med;
    for (auto& r : runs) {
      std::sort(r.t.begin(), r.t.end());
      med.push_back(r.t[r.t.size() / 2]);
    }
    for (size_t v = 0; v < runs.size(); ++v)
      std::printf("| %d | %d | %d | %s | %.4f | %.3f | %.2e | %.1f |\n", sh.m, sh.n, sh.k, runs[v].name.c_str(), med[v],
                  med[v] / med[0], diff[v], runs[v].wsb / 1048576.0);
    std::fflush(stdout);
    for (auto& r : runs)
      if (r.ws) CK(cudaFree(r.ws));
    for (int i = 0; i < s.count; ++i) {
      CK(cudaFree(s.a[i]));
      CK(cudaFree(s.b[i]));
      CK(cudaFree(s.d[i]));
    }
    CK(cudaFree(ref));
  }
  return 0;
}
