// Per-column sums (`col_sum`) or maxima (`col_max`) over each tile's rows,
// written without atomics as f32 partials laid out
// [ceil(M/tileM), round_up(N, tileN)] (tile-major, n fastest); columns past
// N hold the statistic's identity, rows past M contribute nothing.
//
// Our own node rather than CUTLASS's Sm90RowReduction: that one's shuffle
// step swaps fragment halves under a lane predicate, which nvcc lowers
// through local memory once a warp group's epilogue covers 128 rows
// (ping-pong 128×128, cooperative 256×128: 640–1040 bytes of stack;
// bench/NOTES.md, session 17). Here every register index is static.
//
// Layout facts used (cutlass-sm90-epilogue-notes.md, section C; the column
// pattern is checked at compile time on the real layout): a thread's subtile
// fragment is 2 rows × C columns, its columns at offsets 8k + p (p = 0, 1)
// from the thread's first column; the 8 lanes with equal lane % 4 (xor masks
// 4, 8, 16) hold the same columns, and so do all warps (stacked along M).
//
// Per thread: one register per column it holds (S = EPI_N · C). After the
// tile, three swap-and-shuffle steps leave each lane S/8 of its 8-lane
// group's column statistics, the warps' values meet in the epilogue's
// shared-memory store buffer (in rounds where it is small), and each
// thread combines and writes whole columns.
#pragma once

#include "cute/tensor.hpp"
#include "coda/rowstate.hpp"

namespace coda::sm90 {

using namespace cute;
using namespace cutlass::epilogue::fusion;

namespace detail {

// Column offset of slot s from the thread's first column: subtile s / C,
// pair (s % C) / 2 of that subtile, column s % 2 of the pair.
template <int C, int EpiTileN>
CUTLASS_HOST_DEVICE constexpr int colpartial_offset(int s) {
  return EpiTileN * (s / C) + 8 * ((s % C) / 2) + s % 2;
}

// Every element of the first subtile lies at column 8k + p of the thread's
// columns, in slot order: element i in column 8·(i / 4) + i % 2.
template <class SubLayout, int... I>
constexpr bool column_pairs(cute::integer_sequence<int, I...>) {
  return ((get<1>(SubLayout{}(Int<I>{})) == get<1>(SubLayout{}(Int<0>{})) + Int<8 * (I / 4) + I % 2>{}) && ...);
}

// The largest power of two ≤ x (x ≥ 1).
constexpr int power_of_two_at_most(int x) { return x < 2 ? 1 : 2 * power_of_two_at_most(x / 2); }

// One halving step of the reduction over the lanes that share columns: the
// lane with `mask` set keeps the upper half of its N live values, the other
// the lower half, and each combines the partner's copy of the half it keeps.
template <class Stat, int N>
CUTLASS_DEVICE void colpartial_swap_step(float (&v)[N], int n_live, bool upper, int mask) {
  CUTLASS_PRAGMA_UNROLL
  for (int t = 0; t < N; ++t) {
    if (t < n_live / 2) {
      float lo = v[t], hi = v[t + n_live / 2];
      float send = upper ? lo : hi;
      float keep = upper ? hi : lo;
      v[t] = Stat::combine(keep, __shfl_xor_sync(0xffffffff, send, mask));
    }
  }
}

}  // namespace detail

// The statistics: an identity and a combine (f32 addition; fmaxf, which
// ignores NaN as the DSL's `max` does).
struct SumStat {
  CUTLASS_DEVICE static float identity() { return 0.f; }
  CUTLASS_DEVICE static float combine(float a, float b) { return a + b; }
};
struct MaxStat {
  CUTLASS_DEVICE static float identity() { return -INFINITY; }
  CUTLASS_DEVICE static float combine(float a, float b) { return fmaxf(a, b); }
};

struct ColPartialsArgs {
  float* ptr = nullptr;
};

template <class CtaTileShapeMNK, class Stat>
struct ColPartials : PlainNode<ColPartialsArgs> {
  static constexpr int TileM = size<0>(CtaTileShapeMNK{});
  static constexpr int TileN = size<1>(CtaTileShapeMNK{});

  template <class ProblemShape>
  static bool can_implement(ProblemShape const&, Arguments const& args) {
    return args.ptr != nullptr;
  }

  CUTLASS_HOST_DEVICE ColPartials() {}
  CUTLASS_HOST_DEVICE ColPartials(Params const& params, SharedStorage const&) : params(&params) {}
  Params const* params;

  template <class ThrCoords, class Residue, int NumThreads>
  struct Callbacks : EmptyConsumerStoreCallbacks {
    using Sub = decltype(std::declval<ThrCoords>()(_, _, _, _0{}, _0{}).layout());
    using Full = decltype(std::declval<ThrCoords>().layout());
    static constexpr int C = size(Sub{}) / 2;                               // columns per subtile
    static constexpr int EpiN = size<4>(Full{});                             // subtiles along N
    static constexpr int EpiTileN = TileN / EpiN;
    static constexpr int S = EpiN * C;                                       // columns per thread
    static constexpr int Warps = NumThreads / 32;
    static_assert(cute::is_static_v<Sub>, "the epilogue's thread coordinates must be static");
    static_assert(detail::column_pairs<Sub>(cute::make_integer_sequence<int, size(Sub{})>{}),
                  "each thread's fragment must hold column pairs 8k, 8k+1 in slot order (r,r,r+8,r+8,...)");
    static_assert(S % 8 == 0 && Warps * 32 == NumThreads, "the reduction spreads S columns over 8 lanes");
    static_assert(4 * C == EpiTileN, "a quad's 4 lanes must hold a subtile's columns between them");

    ThrCoords tCcD;
    Residue residue;  // (M, N) minus the thread's first element
    int col0;         // the thread's first column, relative to the CTA tile
    int thread_idx;
    float* out;       // this tile's row of partials; null for a grid-padding tile
    float parts[S];  // one per column the thread holds

    CUTLASS_DEVICE Callbacks(ThrCoords c, Residue r, int c0, int t, float* o)
        : tCcD(c), residue(r), col0(c0), thread_idx(t), out(o) {
      CUTLASS_PRAGMA_UNROLL
      for (int s = 0; s < S; ++s) parts[s] = Stat::identity();
    }

    template <class ElementAcc, class ElementIn, int FragmentSize>
    CUTLASS_DEVICE cutlass::Array<ElementIn, FragmentSize> visit(cutlass::Array<ElementAcc, FragmentSize> const&, int epi_v,
                                                                 int epi_m, int epi_n,
                                                                 cutlass::Array<ElementIn, FragmentSize> const& x) {
      static_assert(FragmentSize == size(Sub{}), "a column reduction needs each thread's whole subtile in one fragment");
      auto coords = tCcD(_, _, _, epi_m, epi_n);
      // The subtile's slots by a loop over all of them: static register
      // indices even where the caller's subtile loop is not unrolled.
      CUTLASS_PRAGMA_UNROLL
      for (int en = 0; en < EpiN; ++en) {
        if (en == epi_n) {
          CUTLASS_PRAGMA_UNROLL
          for (int i = 0; i < FragmentSize; ++i) {
            if (elem_less(coords(epi_v * FragmentSize + i), residue)) {
              float& s = parts[en * C + 2 * (i / 4) + i % 2];
              s = Stat::combine(s, float(x[i]));
            }
          }
        }
      }
      return x;
    }

    template <class STensor, class SyncFn, class VTensor>
    CUTLASS_DEVICE void reduce(STensor&& smem_buffer, SyncFn const& sync_fn, int, int, bool is_last_iteration,
                               VTensor) {
      if (!is_last_iteration || out == nullptr) return;  // the same for every thread of the tile
      // The warps' rows meet in the store buffer in rounds of as many rows as
      // it holds: one round but where an 8-bit D's buffer is small for the
      // tile (cooperative 128×256 stores 128×32 bytes a stage, 8 warps × 256
      // columns need 8 KB). Combined in warp order either way.
      constexpr int BufBytes =
          decltype(cosize(smem_buffer.layout()))::value * sizeof(typename remove_cvref_t<STensor>::value_type);
      constexpr int Fit = BufBytes / int(sizeof(float) * TileN);  // warps' rows the buffer holds
      static_assert(Fit >= 1, "the store buffer must hold one row of column partials");
      constexpr int PerRound = Warps < Fit ? Warps : detail::power_of_two_at_most(Fit);
      static_assert(Warps % PerRound == 0, "rounds of whole warps");
      constexpr int Cols = (TileN + NumThreads - 1) / NumThreads;  // columns a thread combines
      int lane = thread_idx % 32, warp = thread_idx / 32;
      float v[S];
      CUTLASS_PRAGMA_UNROLL
      for (int s = 0; s < S; ++s) v[s] = parts[s];
      detail::colpartial_swap_step<Stat>(v, S, lane & 16, 16);
      detail::colpartial_swap_step<Stat>(v, S / 2, lane & 8, 8);
      detail::colpartial_swap_step<Stat>(v, S / 4, lane & 4, 4);
      int first = (lane & 16 ? S / 2 : 0) + (lane & 8 ? S / 4 : 0) + (lane & 4 ? S / 8 : 0);

      float* buf = reinterpret_cast<float*>(raw_pointer_cast(smem_buffer.data()));
      float a[Cols];
      CUTLASS_PRAGMA_UNROLL
      for (int r = 0; r < Warps / PerRound; ++r) {
        sync_fn();  // every thread is done reading this stage (C, where CUTLASS reuses it for D), or the last round
        if (warp / PerRound == r) {
          CUTLASS_PRAGMA_UNROLL
          for (int t = 0; t < S / 8; ++t) {
            buf[(warp % PerRound) * TileN + col0 + detail::colpartial_offset<C, EpiTileN>(first + t)] = v[t];
          }
        }
        sync_fn();
        CUTLASS_PRAGMA_UNROLL
        for (int j = 0; j < Cols; ++j) {
          int c = thread_idx + j * NumThreads;
          CUTLASS_PRAGMA_UNROLL
          for (int w = 0; w < PerRound; ++w) {
            if (c < TileN) a[j] = r == 0 && w == 0 ? buf[c] : Stat::combine(a[j], buf[w * TileN + c]);
          }
        }
      }
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < Cols; ++j) {
        int c = thread_idx + j * NumThreads;
        if (c < TileN) out[c] = a[j];
      }
      sync_fn();  // this subtile's D copy into the buffer comes next
    }
  };

  template <bool ReferenceSrc, class... Args>
  CUTLASS_DEVICE auto get_consumer_store_callbacks(ConsumerStoreArgs<Args...> const& args) {
    detail::assert_two_rows<decltype(args.tCcD)>();
    auto [M, N, K, L] = args.problem_shape_mnkl;
    auto [m, n, k, l] = args.tile_coord_mnkl;
    int64_t n_tiles = (int64_t(N) + TileN - 1) / TileN;
    auto [r0, c0] = detail::thread_origin(args);
    // Tiles that only pad the grid (to a multiple of the cluster or swizzle)
    // lie past (M, N) and have no partials to write.
    bool inside = int64_t(m) * TileM < int64_t(M) && int64_t(n) < n_tiles;
    float* row = inside ? params->ptr + int64_t(m) * n_tiles * TileN + int64_t(n) * TileN : nullptr;
    constexpr int NumThreads = decltype(args.tiled_copy)::TiledNumThr::value;
    return Callbacks<decltype(args.tCcD), decltype(args.residue_tCcD), NumThreads>(args.tCcD, args.residue_tCcD, c0,
                                                                                 args.thread_idx, row);
  }
};

template <class CtaTileShapeMNK>
using ColSumPartials = ColPartials<CtaTileShapeMNK, SumStat>;
template <class CtaTileShapeMNK>
using ColMaxPartials = ColPartials<CtaTileShapeMNK, MaxStat>;

}  // namespace coda::sm90
