// Assembles a CUTLASS 3.x SM90 TMA warp-specialized GEMM around a generated
// epilogue visitor tree, and runs it on a caller-owned stream.
//
// Layouts: A row-major [M,K]; B a PyTorch Linear weight [N,K] (column-major
// [K,N] in CUTLASS terms, "TN") or row-major [K,N] ("NN"); C and D row-major
// [M,N]; bf16 or 8-bit float operands (8-bit: TN only); f32 accumulation.
#pragma once

#include <cstdio>
#include <cstring>
#include <exception>

#include <cuda_runtime.h>

#include "cutlass/cuda_host_adapter.hpp"

namespace coda::sm90 {
// What creating this thread's TMA descriptors gave, since `run` last reset it.
struct TmaEncodes {
  int calls = 0;
  CUresult error = CUDA_SUCCESS;
};
inline thread_local TmaEncodes tma_encodes;
}  // namespace coda::sm90

namespace cutlass {
// CUTLASS builds every TMA descriptor through this wrapper (make_tma_copy_desc
// in cute/atom/copy_traits_sm90_tma.hpp) and, under NDEBUG, only prints a
// failure to stderr and goes on; this specialisation for the argument types
// that call deduces records the result, so `run` refuses to launch.
template <>
inline CUresult call_cuTensorMapEncodeTiled<CUtensorMap*, CUtensorMapDataType, int, void*, uint64_t*, uint64_t*,
                                            uint32_t*, uint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                            CUtensorMapL2promotion, CUtensorMapFloatOOBfill>(
    CUtensorMap* desc, CUtensorMapDataType format, int rank, void* address, uint64_t* dims, uint64_t* strides,
    uint32_t* box, uint32_t* element_strides, CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
    CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill fill) {
  cudaDriverEntryPointQueryResult found{};
  void* fn = nullptr;
  CUresult r = CUDA_ERROR_NOT_FOUND;
  if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) == cudaSuccess &&
      found == cudaDriverEntryPointSuccess) {
    r = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn)(desc, format, rank, address, dims, strides, box,
                                                                element_strides, interleave, swizzle, l2, fill);
  }
  coda::sm90::tma_encodes.calls += 1;
  if (r != CUDA_SUCCESS && coda::sm90::tma_encodes.error == CUDA_SUCCESS) coda::sm90::tma_encodes.error = r;
  return r;
}
}  // namespace cutlass

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

#include "coda/fp8_promotion.hpp"
#include "coda/launch.h"
#include "coda/math.hpp"

#ifndef NDEBUG
#error "CODA kernels must be built with -DNDEBUG: without it ptxas serializes wgmma (C7510)."
#endif

namespace coda::sm90 {

using namespace cute;
using cutlass::bfloat16_t;
using namespace cutlass::epilogue::fusion;

constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;

// The two schedules we generate: kernel schedule + matching epilogue schedule.
struct Cooperative {
  using Kernel = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  using Epilogue = cutlass::epilogue::TmaWarpSpecializedCooperative;
};
struct Pingpong {
  using Kernel = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
  using Epilogue = cutlass::epilogue::TmaWarpSpecialized;
};

// Epilogue tile, stage counts and aux smem layouts, as the builder derives
// them, except the load pipeline's depth: `LoadStages` buffers for C and for
// each tile input (the builder's `StagesC`), which Gemm chooses. A program
// with group reductions names its own epilogue tile (one group of columns
// wide, coda/group.hpp), and so does a map program that fits a 64-column
// one (coda_dsl::smem::subtile).
template <class TileShape_, class Schedule, class ElementC, class ElementD, int LoadStages,
          class EpilogueTileType = cutlass::epilogue::collective::EpilogueTileAuto>
struct EpilogueDescriptor : cutlass::epilogue::collective::detail::EpilogueDescriptor<
                                TileShape_, EpilogueTileType, ElementC, ElementD, typename Schedule::Epilogue> {
  using Builder = cutlass::epilogue::collective::detail::EpilogueDescriptor<TileShape_, EpilogueTileType, ElementC,
                                                                           ElementD, typename Schedule::Epilogue>;
  using Policy = typename Builder::DispatchPolicy;
  static constexpr int StagesC = LoadStages;
  using DispatchPolicy = cutlass::epilogue::Sm90TmaWarpSpecialized<LoadStages, Policy::StagesD, Policy::FragmentSize,
                                                                   Policy::ReuseSmemC, Policy::DelayTmaStore>;
  // The fewest the collective takes: double buffering, and where C shares
  // D's buffers one more than D's stages (CUTLASS's support_smem_reuse).
  static constexpr int kFewestStagesC =
      cute::min(Builder::StagesC, Policy::ReuseSmemC && !cute::is_void_v<ElementC> ? Policy::StagesD + 1 : 2);
};

// An [M,N] row-major bf16/f32 tile loaded through TMA (not the C operand).
template <class Desc, class Element>
using TileLoad = Sm90AuxLoad<
    cutlass::epilogue::collective::detail::AuxLoadDescriptor<Desc, cutlass::layout::RowMajor, Element>::Stages,
    typename Desc::EpilogueTile, Element,
    typename cutlass::epilogue::collective::detail::AuxLoadDescriptor<Desc, cutlass::layout::RowMajor, Element>::Stride,
    typename cutlass::epilogue::collective::detail::AuxLoadDescriptor<Desc, cutlass::layout::RowMajor, Element>::SmemLayoutAtom,
    typename cutlass::epilogue::collective::detail::AuxLoadDescriptor<Desc, cutlass::layout::RowMajor, Element>::CopyOpS2R>;

// An [M,N] row-major tile stored through TMA beside D.
template <class Desc, class Element>
using TileStore = Sm90AuxStore<
    cutlass::epilogue::collective::detail::AuxStoreDescriptor<Desc, cutlass::layout::RowMajor, Element>::Stages,
    typename Desc::EpilogueTile, Element, kRound,
    typename cutlass::epilogue::collective::detail::AuxStoreDescriptor<Desc, cutlass::layout::RowMajor, Element>::Stride,
    typename cutlass::epilogue::collective::detail::AuxStoreDescriptor<Desc, cutlass::layout::RowMajor, Element>::SmemLayoutAtom,
    typename cutlass::epilogue::collective::detail::AuxStoreDescriptor<Desc, cutlass::layout::RowMajor, Element>::CopyOpR2S>;

// The stride of a packed row-major [M,N] tile (TileLoad/TileStore arguments).
using TileStride = cutlass::detail::TagToStrideC_t<cutlass::layout::RowMajor>;
inline TileStride tile_stride(int64_t m, int64_t n) {
  return cutlass::make_cute_packed_stride(TileStride{}, cute::make_shape(int(m), int(n), 1));
}

// A length-N vector broadcast down the rows (one value per column: gamma, bias).
template <class TileShape, class Element>
using PerColLoad = Sm90RowBroadcast<0, TileShape, Element, float, Stride<_0, _1, _0>>;

// A length-M vector broadcast across the columns (one value per row: r, s).
template <class TileShape, class Element>
using PerRowLoad = Sm90ColBroadcast<0, TileShape, Element, float, Stride<_1, _0, _0>>;

// A runtime f32 scalar.
using ScalarLoad = Sm90ScalarBroadcast<float>;

// Per-row sums over each tile's columns, written without atomics as f32
// partials laid out [ceil(N/tileN), round_up(M, tileM)] (tile-major, m fastest).
template <class TileShape>
using RowSumPartials = Sm90ColReduction<cutlass::plus, cutlass::plus, cutlass::plus, 0, TileShape, float, float,
                                        kRound, Stride<_1, _0, _0>, 4, true, /*FinalReduction=*/false>;

// Per-row maxima, laid out as RowSumPartials; fmaxf ignores NaN, as the DSL's
// `max` does, and the arguments give the identity, -INFINITY.
template <class TileShape>
using RowMaxPartials =
    Sm90ColReduction<cutlass::maximum_with_default_nan_propagation, cutlass::maximum_with_default_nan_propagation,
                     cutlass::maximum_with_default_nan_propagation, 0, TileShape, float, float, kRound,
                     Stride<_1, _0, _0>, 4, true, /*FinalReduction=*/false>;

// Defaults for our custom EVT nodes that need no workspace, shared memory
// or producer loads: their Params are their Arguments.
template <class Args>
struct PlainNode {
  struct SharedStorage {};
  using Arguments = Args;
  using Params = Args;
  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const&, Arguments const& args, void*) {
    return args;
  }
  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const&, Arguments const&) {
    return 0;
  }
  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const&, Arguments const&, void*, cudaStream_t,
                                              cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }
  CUTLASS_DEVICE bool is_producer_load_needed() const { return false; }
  CUTLASS_DEVICE bool is_C_load_needed() const { return false; }
  template <class... A>
  CUTLASS_DEVICE auto get_producer_load_callbacks(ProducerLoadArgs<A...> const&) {
    return EmptyProducerLoadCallbacks{};
  }
};

// The DAG's last node: D's value, converted to ElementD by Sm90Compute.
template <class F>
struct PassThrough {
  CUTLASS_HOST_DEVICE F operator()(F const& x) const { return x; }
};

// The accumulator, as CUTLASS's Sm90AccFetch gives it, behind a dependency
// ptxas cannot see through. Without it ptxas hoists math that reads only the
// accumulator above the mainloop's last stage release (mma_tail's arrive):
// the producer refills that stage late and the other warpgroup's mainloop
// waits for it (bench/NOTES.md, session 19: 872-1,184 instructions late in
// three of the untuned suite's kernels). A clock read in each visit, which
// ptxas keeps in place among the epilogue's barriers, predicates an FMA by 1
// plus -0 on each element: exact for every value (x*1 + (-0) = x, -0 and
// infinities included), and the math cannot move above the read it depends
// on. (One read per tile, in begin(), keeps the release in time too but
// leaves the math above the subtiles' first shared-memory access.)
struct AccFetch : Sm90VisitorImpl<> {
  using Sm90VisitorImpl<>::Sm90VisitorImpl;

  struct ConsumerStoreCallbacks : EmptyConsumerStoreCallbacks {
    template <typename ElementAccumulator, int FragmentSize>
    CUTLASS_DEVICE cutlass::Array<ElementAccumulator, FragmentSize> visit(
        cutlass::Array<ElementAccumulator, FragmentSize> const& frg_acc, int, int, int) {
      static_assert(cute::is_same_v<ElementAccumulator, float>, "the fence is an f32 FMA");
      uint32_t clock;
      asm volatile("mov.u32 %0, %%clock;" : "=r"(clock));
      cutlass::Array<ElementAccumulator, FragmentSize> out;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < FragmentSize; ++i) {
        float x = frg_acc[i];
        // Any clock value leaves x as it is; only ptxas must not know that.
        asm("{ .reg .pred p; setp.eq.u32 p, %1, 0x7fc00001; @p fma.rn.f32 %0, %0, 0f3F800000, 0f80000000; }"
            : "+f"(x)
            : "r"(clock));
        out[i] = x;
      }
      return out;
    }
  };

  template <bool ReferenceSrc, class... Args>
  CUTLASS_DEVICE auto get_consumer_store_callbacks(ConsumerStoreArgs<Args...> const&) {
    return ConsumerStoreCallbacks{};
  }
};

// An epilogue with no D tensor: the builder sizes the epilogue from ElementAux.
template <class Aux, class Visitor>
struct VoidD : Visitor {
  using Visitor::Visitor;
  using ElementAux = Aux;
};

// B as a PyTorch Linear weight [N, K] (A·Bᵀ), or as [K, N] row-major (A·B).
using WeightNK = cutlass::layout::ColumnMajor;
using WeightKN = cutlass::layout::RowMajor;

// The GEMM's operands (coda_dsl::ir::Operands). bf16, or two 8-bit floats
// (float_e4m3_t, float_e5m2_t) for which CUTLASS's FP8 mainloop adds the
// tensor cores' partial sums into the f32 accumulator every 128 of K (no
// fast accumulation), with its consumer side replaced by one that keeps the
// wgmmas in flight across those additions (coda/fp8_promotion.hpp);
// per-tensor and per-row/column scales are epilogue inputs.
template <class A, class B>
struct PlainOperands {
  using ElementA = A;
  using ElementB = B;
  template <class Schedule>
  using KernelSchedule = typename Schedule::Kernel;
  template <class Collective>
  using Mainloop = cute::conditional_t<cutlass::sizeof_bits<A>::value == 8, PipelinedFp8Promotion<Collective, UnscaledPromotion>, Collective>;
  using GmemLayoutA = cutlass::layout::RowMajor;
  template <class LayoutB>
  using GmemLayoutB = LayoutB;
  template <class MainloopArguments>
  static void add_scales(MainloopArguments&, CodaGemmLaunch const&) {}
};
using Bf16Operands = PlainOperands<bfloat16_t, bfloat16_t>;

// DeepSeek-V3's blockwise FP8 (coda_dsl::ir::OperandScale::Blockwise): f32
// a_scale [ceil(K/128), M], one per row and 128 of K (M fastest), and
// b_scale [ceil(N/128), ceil(K/128)], one per 128 x 128 block of B. The
// mainloop scales each 128-deep slice of the product as it adds it to the
// accumulator, so the epilogue sees acc = sum_k a_scale * b_scale * (A.B)_k.
template <class A, class B>
struct BlockwiseOperands {
  using ElementA = A;
  using ElementB = B;
  using ScaleConfig = cutlass::detail::Sm90BlockwiseScaleConfig<1, 128, 128, cute::GMMA::Major::MN, cute::GMMA::Major::K>;
  template <class Schedule>
  using KernelSchedule = cute::conditional_t<cute::is_same_v<Schedule, Cooperative>,
                                             cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8Blockwise,
                                             cutlass::gemm::KernelTmaWarpSpecializedPingpongFP8Blockwise>;
  template <class Collective>
  using Mainloop = PipelinedFp8Promotion<Collective, BlockwisePromotion>;
  using GmemLayoutA = cute::tuple<cutlass::layout::RowMajor, decltype(ScaleConfig::deduce_layoutSFA())>;
  template <class LayoutB>
  using GmemLayoutB = cute::tuple<LayoutB, decltype(ScaleConfig::deduce_layoutSFB())>;
  template <class MainloopArguments>
  static void add_scales(MainloopArguments& m, CodaGemmLaunch const& p) {
    auto shape = cute::make_shape(int(p.m), int(p.n), int(p.k), 1);
    m.ptr_SFA = static_cast<float const*>(p.a_scale);
    m.layout_SFA = ScaleConfig::tile_atom_to_shape_SFA(shape);
    m.ptr_SFB = static_cast<float const*>(p.b_scale);
    m.layout_SFB = ScaleConfig::tile_atom_to_shape_SFB(shape);
  }
};

// The kernel. The generated epilogue, `FusionAt<S>` (its `Desc`, visitor
// tree `Epilogue`, and `kMap`), takes any depth S of its load pipeline. Of
// a GEMM's, Gemm takes the deepest, up to the builder's, that leaves the
// mainloop as many stages as the shallowest does, so that a tile input's
// buffers do not take a mainloop stage's shared memory (bench/NOTES.md,
// session 23: at equal mainloop stages, the builder's depth). A map
// program's mainloop is one k-block: it takes the deepest that leaves the
// two stages a mainloop needs. Mainloop stages fill what the epilogue leaves.
template <template <int> class FusionAt, class ClusterShape, class Schedule, class ElementC, class ElementD,
          class LayoutB = WeightNK, class Operands = Bf16Operands>
struct Gemm {
  // The builder's descriptor, the same at any depth.
  using Builder = typename FusionAt<1>::Desc::Builder;
  using TileShape = typename Builder::TileShape;
  using ElementA = typename Operands::ElementA;
  using ElementB = typename Operands::ElementB;
  // 16-byte TMA rows: 8 bf16 or 16 8-bit elements.
  static constexpr int kAlignAB = 128 / cutlass::sizeof_bits<ElementA>::value;
  static constexpr int kAlignC = cute::is_void_v<ElementC> ? 8 : 128 / cutlass::sizeof_bits<ElementC>::value;
  static constexpr int kAlignD = cute::is_void_v<ElementD> ? 8 : 128 / cutlass::sizeof_bits<ElementD>::value;

  template <int S>
  using EpilogueAt = typename cutlass::epilogue::collective::detail::Sm90TmaBuilderImpl<
      TileShape, typename Builder::EpilogueTile, float, float,
      ElementC, cutlass::layout::RowMajor, kAlignC,
      ElementD, cutlass::layout::RowMajor, kAlignD,
      typename FusionAt<S>::Epilogue, typename FusionAt<S>::Desc::DispatchPolicy>::CollectiveOp;

  template <int S>
  using MainloopAt = cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
      ElementA, typename Operands::GmemLayoutA, kAlignAB,
      ElementB, typename Operands::template GmemLayoutB<LayoutB>, kAlignAB, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename EpilogueAt<S>::SharedStorage))>,
      typename Operands::template KernelSchedule<Schedule>>;

  static constexpr int kFewestLoadStages = FusionAt<1>::Desc::kFewestStagesC;
  template <int S>
  static constexpr bool kEnoughStages = FusionAt<1>::kMap ? MainloopAt<S>::PipelineStages >= 2
                                                          : MainloopAt<S>::PipelineStages ==
                                                                MainloopAt<kFewestLoadStages>::PipelineStages;
  // The deepest load pipeline in [fewest, S] that leaves the mainloop enough stages.
  template <int S>
  static constexpr int deepest() {
    if constexpr (S <= kFewestLoadStages) {
      return kFewestLoadStages;
    } else if constexpr (kEnoughStages<S>) {
      return S;
    } else {
      return deepest<S - 1>();
    }
  }
  static constexpr int kLoadStages = deepest<Builder::StagesC>();

  using CollectiveEpilogue = EpilogueAt<kLoadStages>;
  using CollectiveMainloop = typename Operands::template Mainloop<typename MainloopAt<kLoadStages>::CollectiveOp>;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop,
                                                      CollectiveEpilogue>;
  using Adapter = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using Arguments = typename Adapter::Arguments;
  using EpilogueArguments = typename FusionAt<kLoadStages>::Epilogue::Arguments;

  static Arguments arguments(CodaGemmLaunch const& p, void const* c, void* d, EpilogueArguments const& epi) {
    int M = int(p.m), N = int(p.n), K = int(p.k);
    using StrideA = typename Kernel::StrideA;
    using StrideB = typename Kernel::StrideB;
    using StrideC = typename Kernel::StrideC;
    using StrideD = typename Kernel::StrideD;
    cutlass::KernelHardwareInfo hw;
    hw.device_id = p.device_id;
    hw.sm_count = p.sm_count;
    // Every SM90 mainloop names its operands so; the rest keep their defaults.
    typename CollectiveMainloop::Arguments mainloop{};
    mainloop.ptr_A = static_cast<ElementA const*>(p.a);
    mainloop.dA = cutlass::make_cute_packed_stride(StrideA{}, {M, K, 1});
    mainloop.ptr_B = static_cast<ElementB const*>(p.b);
    mainloop.dB = cutlass::make_cute_packed_stride(StrideB{}, {N, K, 1});
    Operands::add_scales(mainloop, p);
    Arguments args{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {M, N, K, 1},
        mainloop,
        {epi, static_cast<typename CollectiveEpilogue::ElementC const*>(c),
         cutlass::make_cute_packed_stride(StrideC{}, {M, N, 1}),
         static_cast<typename CollectiveEpilogue::ElementD*>(d),
         cutlass::make_cute_packed_stride(StrideD{}, {M, N, 1})},
        hw};
    using Raster = decltype(args.scheduler.raster_order);
    args.scheduler.max_swizzle_size = p.swizzle;
    args.scheduler.raster_order = p.raster == 1 ? Raster::AlongM : p.raster == 2 ? Raster::AlongN : Raster::Heuristic;
    return args;
  }
};

inline int fail(CodaGemmLaunch& p, int code, char const* what, char const* detail) {
  std::snprintf(p.message, sizeof(p.message), "%s: %s", what, detail);
  return code;
}

// Runs a launcher body; a C++ exception must not unwind through the C ABI.
template <class F>
int guarded(CodaGemmLaunch& p, F&& body) {
  try {
    return body();
  } catch (std::exception const& e) {
    return fail(p, CODA_INIT_FAILED, "C++ exception", e.what());
  } catch (...) {
    return fail(p, CODA_INIT_FAILED, "C++ exception", "unknown");
  }
}

template <class G>
int workspace_size(CodaGemmLaunch& p, typename G::Arguments const& args, size_t* bytes) {
  *bytes = G::Adapter::get_workspace_size(args);
  return CODA_OK;
}

// can_implement → initialize (workspace, smem attribute, TMA descriptors) →
// launch on p.stream.
template <class G>
int run(CodaGemmLaunch& p, typename G::Arguments const& args) {
  if (p.stream == nullptr) {
    return fail(p, CODA_BAD_ARGUMENT, "stream", "the null stream is not allowed; pass a created stream");
  }
  auto stream = static_cast<cudaStream_t>(p.stream);
  size_t need = G::Adapter::get_workspace_size(args);
  if (need > p.workspace_bytes) {
    return fail(p, CODA_BAD_ARGUMENT, "workspace", "smaller than the kernel's workspace size");
  }
  typename G::Adapter gemm;
  cutlass::Status st = gemm.can_implement(args);
  if (st != cutlass::Status::kSuccess) {
    return fail(p, CODA_CANNOT_IMPLEMENT, "CUTLASS can_implement", cutlass::cutlassGetStatusString(st));
  }
  tma_encodes = TmaEncodes{};
  st = gemm.initialize(args, p.workspace, stream);
  if (st != cutlass::Status::kSuccess) {
    return fail(p, CODA_INIT_FAILED, "CUTLASS initialize", cutlass::cutlassGetStatusString(st));
  }
  // A and B are always TMA loads: no recorded call means the interception above
  // no longer matches CUTLASS's call, and a failure would go unseen.
  if (tma_encodes.calls == 0) {
    return fail(p, CODA_INIT_FAILED, "TMA descriptors", "creation was not observed (coda/sm90_gemm.hpp out of date with CUTLASS)");
  }
  if (tma_encodes.error != CUDA_SUCCESS) {
    char detail[32];
    std::snprintf(detail, sizeof(detail), "CUresult %d", int(tma_encodes.error));
    return fail(p, CODA_INIT_FAILED, "TMA descriptor creation (cuTensorMapEncodeTiled)", detail);
  }
  st = gemm.run(stream);
  if (st != cutlass::Status::kSuccess) {
    return fail(p, CODA_LAUNCH_FAILED, "CUTLASS run", cutlass::cutlassGetStatusString(st));
  }
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    return fail(p, CODA_LAUNCH_FAILED, "kernel launch", cudaGetErrorString(err));
  }
  return CODA_OK;
}

}  // namespace coda::sm90
