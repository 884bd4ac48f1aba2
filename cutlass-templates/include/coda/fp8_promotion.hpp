// The FP8 mainloops' consumer side with their promotions pipelined.
//
// The tensor cores add FP8 products into their accumulator with less than
// f32's precision, so CUTLASS's SM90 FP8 mainloops (per-tensor:
// MainloopSm90TmaGmmaWarpSpecializedFP8; blockwise-scaled: ...BlockwiseFP8)
// let each k-tile's wgmmas (128 of K) start a partial sum from zero and add
// ("promote") it into the f32 accumulator, scaled by the k-tile's scales if
// blockwise. They wait for every wgmma in flight before each promotion, so
// once a k-tile the warpgroup drains the tensor pipe, adds 64 values a
// thread, and only then issues the next k-tile (bench/NOTES.md, session 12:
// 72-77% SM throughput at 8192^3, cuBLASLt's FP8 GEMM 91%). Here two partial
// sums take turns: the wgmmas of k-tile t+1 go into one while k-tile t's, in
// the other, is promoted, so one k-tile's wgmmas are always in flight, as in
// the bf16 mainloop. The additions and their order are CUTLASS's at one
// promotion per k-tile (its per-tensor default, which this fixes: the
// collective's mma_promotion_interval argument is not read; blockwise's only
// interval), so the results are the same.
//
// Only the cooperative schedule: two partial sums and the accumulator take
// 3 x 64 registers a thread for a 128x128 tile (one 64x128 half a warp-
// group), inside the 232 the consumer warps get; ping-pong's 128x128 a warp-
// group would take 3 x 128.
#pragma once

#include "cute/tensor.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"

namespace coda::sm90 {

// How a k-tile's partial sum is promoted. The first is added to +0, as
// CUTLASS adds it to its zero-initialised accumulator: a -0 sum gives +0.

// Per-tensor (or no) scales: a partial sum is added as it is.
template <class Base>
struct UnscaledPromotion {
  struct Scales {};
  CUTLASS_DEVICE UnscaledPromotion(typename Base::TensorStorage&, int) {}
  CUTLASS_DEVICE void load(Scales&, int) const {}
  template <bool kFirst, class Accum, class Partial>
  CUTLASS_DEVICE static void promote(Accum& accum, Partial const& partial, Scales const&) {
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < cute::size(accum); ++i) {
      accum(i) = (kFirst ? 0.0f : accum(i)) + partial(i);
    }
  }
};

// DeepSeek-V3's blockwise scales in shared memory (1x128 for A, 128x128 for
// B; the producer brings each k-tile's into its pipeline stage beside A and
// B), viewed with the accumulator tile's shape, (BLK_M,BLK_N,(K-blocks,PIPE)),
// broadcast along N for A and along M for B.
template <class Base>
CUTLASS_DEVICE auto blockwise_scales_a(typename Base::TensorStorage& s) {
  using namespace cute;
  using L = typename Base::SmemLayoutSFA;
  auto shape = make_shape(get<0>(cute::shape(L{})), get<1>(typename Base::TileShape{}),
                          make_shape(get<1>(cute::shape(L{})), get<2>(cute::shape(L{}))));
  auto stride = make_stride(get<0>(cute::stride(L{})), _0{}, make_stride(get<1>(cute::stride(L{})), get<2>(cute::stride(L{}))));
  return make_tensor(make_smem_ptr(s.smem_SFA.data()), make_layout(shape, stride));
}
template <class Base>
CUTLASS_DEVICE auto blockwise_scales_b(typename Base::TensorStorage& s) {
  using namespace cute;
  using L = typename Base::SmemLayoutSFB;
  auto shape = make_shape(get<0>(typename Base::TileShape{}), get<0>(cute::shape(L{})),
                          make_shape(get<1>(cute::shape(L{})), get<2>(cute::shape(L{}))));
  auto stride = make_stride(_0{}, get<0>(cute::stride(L{})), make_stride(get<1>(cute::stride(L{})), get<2>(cute::stride(L{}))));
  return make_tensor(make_smem_ptr(s.smem_SFB.data()), make_layout(shape, stride));
}

// Blockwise scales: a partial sum is multiplied by its row's A scale times
// the k-tile's B scale.
template <class Base>
struct BlockwisePromotion {
  static_assert(Base::ScalePromotionInterval == 4 && Base::ScaleNsPerTile == 1 && Base::ScaleMsPerTile > 1,
                "blockwise promotion: 1x128 A scales and one 128x128 B scale a 128-deep k-tile");
  using Element = typename Base::ElementBlockScale;
  using Storage = typename Base::TensorStorage;
  // Each thread's part: (MMA,MMA_M,MMA_N,(K-blocks,PIPE)).
  using ThreadScalesA = decltype(typename Base::TiledMma{}.get_slice(0).partition_C(
      blockwise_scales_a<Base>(std::declval<Storage&>())));
  using ThreadScalesB = decltype(typename Base::TiledMma{}.get_slice(0).partition_C(
      blockwise_scales_b<Base>(std::declval<Storage&>())));

  // A k-tile's scales in registers: the product of A's row scale and B's.
  struct Scales {
    decltype(cute::make_tensor_like<Element>(std::declval<ThreadScalesA&>()(cute::_, cute::_, cute::_, cute::_0{}))) ab;
  };

  ThreadScalesA smem_a;
  ThreadScalesB smem_b;

  CUTLASS_DEVICE BlockwisePromotion(Storage& s, int thread_idx)
      : smem_a(typename Base::TiledMma{}.get_slice(thread_idx).partition_C(blockwise_scales_a<Base>(s))),
        smem_b(typename Base::TiledMma{}.get_slice(thread_idx).partition_C(blockwise_scales_b<Base>(s))) {}

  CUTLASS_DEVICE void load(Scales& scales, int stage) const {
    using namespace cute;
    copy(smem_a(_, _, _, make_coord(_0{}, stage)), scales.ab);
    Element b = smem_b(_0{}, _0{}, _0{}, make_coord(_0{}, stage));
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(filter_zeros(scales.ab)); ++i) {
      filter_zeros(scales.ab)(i) = filter_zeros(scales.ab)(i) * b;
    }
  }
  template <bool kFirst, class Accum, class Partial>
  CUTLASS_DEVICE static void promote(Accum& accum, Partial const& partial, Scales const& scales) {
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < cute::size(accum); ++i) {
      accum(i) = (kFirst ? 0.0f : accum(i)) + partial(i) * scales.ab(i);
    }
  }
};

template <class Base, template <class> class Promotion>
struct PipelinedFp8Promotion : Base {
  using typename Base::MainloopPipeline;
  using typename Base::Params;
  using typename Base::PipelineState;
  using typename Base::SmemLayoutA;
  using typename Base::SmemLayoutB;
  using typename Base::TensorStorage;
  using typename Base::TiledMma;
  using typename Base::TileShape;

  static_assert(cute::is_same_v<typename Base::DispatchPolicy::Schedule, cutlass::gemm::KernelTmaWarpSpecializedCooperative> ||
                    cute::is_same_v<typename Base::DispatchPolicy::Schedule,
                                    cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8Blockwise>,
                "pipelined FP8 promotion: cooperative schedules only (see the header's comment)");

  // Issues one k-tile's wgmmas into `partial`, which they start from zero.
  template <class FragA, class FragB, class Partial>
  CUTLASS_DEVICE static void issue(TiledMma& tiled, FragA const& a, FragB const& b, Partial& partial) {
    cute::warpgroup_fence_operand(partial);
    cute::warpgroup_arrive();
    tiled.accumulate_ = cute::GMMA::ScaleOut::Zero;
    CUTLASS_PRAGMA_UNROLL
    for (int k_block = 0; k_block < cute::size<2>(a); ++k_block) {
      cute::gemm(tiled, a(cute::_, cute::_, k_block), b(cute::_, cute::_, k_block), partial);
      tiled.accumulate_ = cute::GMMA::ScaleOut::One;
    }
    cute::warpgroup_commit_batch();
    cute::warpgroup_fence_operand(partial);
  }

  // The kernel's contract, as for every SM90 mainloop: wait for and consume
  // `k_tile_count` stages from `read`, release all but the last (mma_tail
  // releases it), and leave the sum in `accum` with no wgmma in flight.
  template <class FrgTensorC>
  CUTLASS_DEVICE void mma(MainloopPipeline pipeline, PipelineState read, FrgTensorC& accum, int k_tile_count,
                          int thread_idx, TensorStorage& shared_tensors, Params const&) {
    using namespace cute;
    static_assert(is_rmem<FrgTensorC>::value, "the accumulator lives in registers");
    // One promotion per k-tile is one per 128 of K (4 wgmmas of K = 32).
    static_assert(size<2>(TileShape{}) == 128, "FP8 k-tiles are 128 deep");

    Tensor sA = make_tensor(make_smem_ptr(shared_tensors.smem_A.data()), SmemLayoutA{});  // (BLK_M,BLK_K,PIPE)
    Tensor sB = make_tensor(make_smem_ptr(shared_tensors.smem_B.data()), SmemLayoutB{});  // (BLK_N,BLK_K,PIPE)
    constexpr int kWarpGroups = size(TiledMma{}) / cutlass::NumThreadsPerWarpGroup;
    auto warp_groups = make_layout(Int<kWarpGroups>{}, Int<cutlass::NumThreadsPerWarpGroup>{});
    int warp_group = __shfl_sync(0xFFFFFFFF, thread_idx / cutlass::NumThreadsPerWarpGroup, 0);
    TiledMma tiled_mma;
    auto thread_mma = tiled_mma.get_slice(warp_groups(warp_group));
    Tensor tCrA = thread_mma.make_fragment_A(thread_mma.partition_A(sA));  // (MMA,MMA_M,MMA_K,PIPE)
    Tensor tCrB = thread_mma.make_fragment_B(thread_mma.partition_B(sB));  // (MMA,MMA_N,MMA_K,PIPE)
    CUTE_STATIC_ASSERT_V(size<1>(tCrA) == size<1>(accum));
    CUTE_STATIC_ASSERT_V(size<1>(tCrB) == size<2>(accum));

    using Scaling = Promotion<Base>;
    Scaling scaling(shared_tensors, thread_idx);
    Tensor even = make_fragment_like(accum);
    Tensor odd = make_fragment_like(accum);
    typename Scaling::Scales even_scales, odd_scales;
    PipelineState release = read;
    // Waits for the next stage, takes its scales and issues its wgmmas.
    auto next = [&](auto& partial, auto& scales) {
      pipeline.consumer_wait(read, pipeline.consumer_try_wait(read));
      int stage = read.index();
      scaling.load(scales, stage);
      issue(tiled_mma, tCrA(_, _, _, stage), tCrB(_, _, _, stage), partial);
      ++read;
    };
    // Adds a finished partial sum into the accumulator. The fences keep the
    // additions after the wait before them and before the wgmmas after them:
    // moved past the next wgmmas into `partial`, they would make the compiler
    // copy `partial` while those are in flight, and ptxas serialize every
    // wgmma (C7514).
    auto promote = [&](auto first, auto& partial, auto const& scales) {
      warpgroup_fence_operand(partial);
      warpgroup_fence_operand(accum);
      Scaling::template promote<decltype(first)::value>(accum, partial, scales);
      warpgroup_fence_operand(accum);
      warpgroup_fence_operand(partial);
    };
    // Waits until only the newest k-tile's wgmmas are in flight, promotes
    // the one before it, and gives its stage back to the producer.
    auto retire = [&](auto first, auto& partial, auto const& scales) {
      warpgroup_wait<1>();
      promote(first, partial, scales);
      pipeline.consumer_release(release);
      ++release;
    };

    if (k_tile_count <= 0) {
      clear(accum);
      return;
    }
    next(even, even_scales);
    if (k_tile_count == 1) {
      warpgroup_wait<0>();
      promote(true_type{}, even, even_scales);
      return;
    }
    next(odd, odd_scales);
    retire(true_type{}, even, even_scales);
    // Two k-tiles an iteration, so that each partial sum keeps its registers.
    CUTLASS_PRAGMA_NO_UNROLL
    for (k_tile_count -= 2; k_tile_count >= 2; k_tile_count -= 2) {
      next(even, even_scales);
      retire(false_type{}, odd, odd_scales);
      next(odd, odd_scales);
      retire(false_type{}, even, even_scales);
    }
    if (k_tile_count == 1) {
      next(even, even_scales);
      retire(false_type{}, odd, odd_scales);
      warpgroup_wait<0>();
      promote(false_type{}, even, even_scales);
    } else {
      warpgroup_wait<0>();
      promote(false_type{}, odd, odd_scales);
    }
  }

  // Every stage but the last was released in `mma`, with no wgmma in flight.
  CUTLASS_DEVICE void mma_tail(MainloopPipeline pipeline, PipelineState release, int k_tile_count) {
    if (k_tile_count > 0) {
      release.advance(k_tile_count - 1);
      pipeline.consumer_release(release);
    }
  }
};

}  // namespace coda::sm90
