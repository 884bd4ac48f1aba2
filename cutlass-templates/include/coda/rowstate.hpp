// Stateful per-row epilogue nodes: state carried across a tile's subtiles.
//
// - RowLsePartials: an online log-sum-exp of each row over the tile's columns
//   (running max and Σ exp(x − max)), written once per tile as f32 partials
//   laid out [2, ceil(N / tileN), round_up(M, tileM)]: plane 0 the maxima,
//   plane 1 the sums, m fastest. Masked columns contribute nothing; a row with
//   no valid column writes (−inf, 0). No atomics.
// - GatherPerRow: out[m] = x[m, target[m]] for the one tile holding that
//   column; a target outside [0, N) (e.g. the ignore index −100) writes nothing.
// - OneHotPerRow: a leaf with value 1 at column target[m] of row m, else 0;
//   a target outside [0, N) gives a row of zeros.
//
// Fragment rows: on SM90 slot i of a thread's subtile fragment lies in row
// r0 + 8·((i / 2) % 2) (cutlass-sm90-epilogue-notes.md, section C); checked
// at compile time on the real layout.
#pragma once

#include <climits>

#include <math_constants.h>

#include "cute/tensor.hpp"
#include "coda/sm90_gemm.hpp"

namespace coda::sm90 {

using namespace cute;
using namespace cutlass::epilogue::fusion;

namespace detail {

template <class CoordLayout, int... I>
constexpr bool two_rows(cute::integer_sequence<int, I...>) {
  return ((get<0>(CoordLayout{}(Int<I>{})) == get<0>(CoordLayout{}(Int<0>{})) + Int<8 * ((I / 2) % 2)>{}) && ...);
}

// Slot i of every subtile fragment lies in row r0 + 8·((i/2)%2) of the subtile.
template <class ThrCoordTensor>
CUTLASS_DEVICE constexpr void assert_two_rows() {
  using Sub = decltype(std::declval<ThrCoordTensor>()(_, _, _, _0{}, _0{}).layout());
  static_assert(cute::is_static_v<Sub>, "the epilogue's thread coordinates must be static");
  static_assert(two_rows<Sub>(cute::make_integer_sequence<int, size(Sub{})>{}),
                "each thread's fragment must cover rows r0 and r0 + 8 in the slot pattern (r,r,r+8,r+8,...)");
}

// The thread's first element relative to its CTA tile.
template <class Args>
CUTLASS_DEVICE cute::tuple<int, int> thread_origin(Args const& args) {
  auto [M, N, K, L] = args.problem_shape_mnkl;
  auto [m, n, k, l] = args.tile_coord_mnkl;
  auto [tile_m, tile_n, tile_k] = args.tile_shape_mnk;
  return {int(M - get<0>(args.residue_tCcD)) - int(m) * int(tile_m),
          int(N - get<1>(args.residue_tCcD)) - int(n) * int(tile_n)};
}

// Whether the CTA tile lies inside (M, N), so that no element is masked.
template <class Args>
CUTLASS_DEVICE bool interior(Args const& args) {
  auto [M, N, K, L] = args.problem_shape_mnkl;
  auto [m, n, k, l] = args.tile_coord_mnkl;
  auto [tile_m, tile_n, tile_k] = args.tile_shape_mnk;
  return (int64_t(m) + 1) * tile_m <= int64_t(M) && (int64_t(n) + 1) * tile_n <= int64_t(N);
}

// 2^x flushing subnormal inputs and results to zero: one MUFU.EX2 (without
// .ftz ptxas adds a range test and two scalings). For sums of exponentials of
// x − max, whose largest term is 1, a term below 2^-126 is lost either way.
CUTLASS_DEVICE float ex2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// max(a, b), NaN if either is (one FMNMX; fmaxf drops a NaN).
CUTLASS_DEVICE float max_nan(float a, float b) {
  float y;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b));
  return y;
}

// Callbacks that know the global coordinates of their thread's fragment:
// element e of subtile (epi_m, epi_n) lies at row0 + get<0>(tCcD(e)),
// col0 + get<1>(tCcD(e)); `residue` masks elements past (M, N).
template <class ThrCoords, class Residue, class P>
struct CoordCallbacks : EmptyConsumerStoreCallbacks {
  ThrCoords tCcD;
  Residue residue;
  int64_t row0, col0;
  P params;

  CUTLASS_DEVICE CoordCallbacks(ThrCoords c, Residue r, int64_t r0, int64_t c0, P p)
      : tCcD(c), residue(r), row0(r0), col0(c0), params(p) {}
};

// Builds a node's `Callbacks` (a CoordCallbacks) for this thread.
template <template <class, class> class Callbacks, class P, class Args>
CUTLASS_DEVICE auto coord_callbacks(Args const& args, P params) {
  auto [M, N, K, L] = args.problem_shape_mnkl;
  int64_t r0 = int64_t(M - get<0>(args.residue_tCcD));
  int64_t c0 = int64_t(N - get<1>(args.residue_tCcD));
  return Callbacks<decltype(args.tCcD), decltype(args.residue_tCcD)>(args.tCcD, args.residue_tCcD, r0, c0, params);
}

// Callbacks that read each fragment row's target once per tile: tcol[e][row]
// is the target's column relative to the thread's first column, or kNoTarget
// for a row past M or a target outside [0, N).
template <class ThrCoords, class Residue, class P>
struct TargetCallbacks : CoordCallbacks<ThrCoords, Residue, P> {
  static constexpr int NumEpiM = decltype(cute::size<3>(std::declval<ThrCoords>().layout()))::value;
  static constexpr int kNoTarget = INT_MIN / 2;  // no fragment column is near it
  int tcol[NumEpiM][2];

  CUTLASS_DEVICE TargetCallbacks(ThrCoords c, Residue r, int64_t r0, int64_t c0, P p)
      : CoordCallbacks<ThrCoords, Residue, P>(c, r, r0, c0, p) {
    CUTLASS_PRAGMA_UNROLL
    for (int e = 0; e < NumEpiM; ++e) {
      CUTLASS_PRAGMA_UNROLL
      for (int row = 0; row < 2; ++row) {
        // Rows r0 and r0 + 8 hold slots with (i / 2) % 2 == row; slot 2·row is the first.
        int dr = int(get<0>(c(_, _, _, e, 0)(2 * row)));
        tcol[e][row] = kNoTarget;
        if (elem_less(make_coord(dr, 0), r)) {
          int64_t t = int64_t(p->targets[r0 + dr]);
          if (t >= 0 && t - c0 < int64_t(get<1>(r))) tcol[e][row] = int(t - c0);
        }
      }
    }
  }

  // The target column of fragment row `row` of subtile row `epi_m`.
  CUTLASS_DEVICE int target(int epi_m, int row) const {
    int t = kNoTarget;
    CUTLASS_PRAGMA_UNROLL
    for (int e = 0; e < NumEpiM; ++e) {
      if (e == epi_m) t = tcol[e][row];
    }
    return t;
  }
};

// Merges (m2, s2) into (m1, s1): the running max and Σ exp(x − max). As the
// interpreter (coda-dsl interp, lse_empty_or_infinite): a NaN max is (NaN,
// NaN), an empty or all −∞ part (−∞, 0), a +∞ max (+∞, 1).
CUTLASS_DEVICE void lse_merge(float& m1, float& s1, float m2, float s2) {
  if (isnan(m1) || isnan(m2)) {
    m1 = s1 = CUDART_NAN_F;
    return;
  }
  float m = fmaxf(m1, m2);
  if (m == -CUDART_INF_F) return;  // both empty
  if (m == CUDART_INF_F) {
    m1 = m;
    s1 = 1.f;
    return;
  }
  s1 = s1 * __expf(m1 - m) + s2 * __expf(m2 - m);
  m1 = m;
}

}  // namespace detail

struct RowLseArgs {
  float* ptr = nullptr;
};

template <class CtaTileShapeMNK, class EpilogueTile>
struct RowLsePartials : PlainNode<RowLseArgs> {
  static constexpr int EpiM = size<0>(EpilogueTile{});
  static constexpr int NumEpiM = size<0>(CtaTileShapeMNK{}) / EpiM;

  template <class ProblemShape>
  static bool can_implement(ProblemShape const&, Arguments const& args) {
    return args.ptr != nullptr;
  }

  CUTLASS_HOST_DEVICE RowLsePartials() {}
  CUTLASS_HOST_DEVICE RowLsePartials(Params const& params, SharedStorage const&) : params(&params) {}
  Params const* params;

  template <class ThrCoords, class Residue>
  struct Callbacks : EmptyConsumerStoreCallbacks {
    ThrCoords tCcD;
    Residue residue;     // (M, N) minus the thread's first element
    bool interior;       // the CTA tile lies inside (M, N): no element is masked
    int row0;            // the thread's first row, relative to the CTA tile
    int64_t tile_row0;   // the CTA tile's first row
    int64_t plane;       // n_tiles · m_pad: the offset of the sums plane
    float* out;          // this tile's column of partials; null for a grid-padding tile
    // Per fragment row: the running max (NaN-propagating) and Σ exp(x − max);
    // end() applies the special cases, which the max alone decides
    // (detail::lse_merge).
    float mx[NumEpiM][2];
    float se[NumEpiM][2];

    CUTLASS_DEVICE Callbacks(ThrCoords c, Residue r, bool in, int r0, int64_t t0, int64_t pl, float* o)
        : tCcD(c), residue(r), interior(in), row0(r0), tile_row0(t0), plane(pl), out(o) {
      CUTLASS_PRAGMA_UNROLL
      for (int e = 0; e < NumEpiM; ++e) {
        mx[e][0] = mx[e][1] = -CUDART_INF_F;
        se[e][0] = se[e][1] = 0.f;
      }
    }

    static constexpr float kLog2e = 1.4426950408889634f;

    // One online step per fragment row over its slots of `x` (with Masked,
    // slots past (M, N) count as −∞): one rescale of the running sum, then
    // one exp per element, 2^((x − max) · log2 e), as PyTorch's logsumexp
    // takes it. x − max is exact near the max, so an element at the max
    // adds exactly 1, as there. (Folding log2 e into one FFMA, x · log2 e −
    // fl(max · log2 e), saves an instruction an element but adds 2^δ, δ that
    // rounding: a row of 192 equal values summed to 191.99992; session 55.)
    template <bool Masked, class Coords, class ElementIn, int FragmentSize>
    CUTLASS_DEVICE void accumulate(Coords const& coords, int epi_v, int epi_m,
                                   cutlass::Array<ElementIn, FragmentSize> const& x) {
      float v[FragmentSize];
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < FragmentSize; ++i) {
        v[i] = !Masked || elem_less(coords(epi_v * FragmentSize + i), residue) ? float(x[i]) : -CUDART_INF_F;
      }
      CUTLASS_PRAGMA_UNROLL
      for (int e = 0; e < NumEpiM; ++e) {
        if (e != epi_m) continue;
        CUTLASS_PRAGMA_UNROLL
        for (int row = 0; row < 2; ++row) {
          float m = mx[e][row];
          CUTLASS_PRAGMA_UNROLL
          for (int i = 0; i < FragmentSize; ++i) {
            if ((i / 2) % 2 == row) m = detail::max_nan(m, v[i]);
          }
          // Until the max is finite nothing is summed (x − max is NaN at
          // −∞); once it is +∞ or NaN, end() sets the sum. An old max of −∞
          // scales the old sum, 0, by 2^−∞ = 0.
          float s = 0.f;
          if (isfinite(m)) {
            s = se[e][row] * detail::ex2_ftz((mx[e][row] - m) * kLog2e);
            CUTLASS_PRAGMA_UNROLL
            for (int i = 0; i < FragmentSize; ++i) {
              if ((i / 2) % 2 == row) s += detail::ex2_ftz((v[i] - m) * kLog2e);
            }
          }
          mx[e][row] = m;
          se[e][row] = s;
        }
      }
    }

    template <class ElementAcc, class ElementIn, int FragmentSize>
    CUTLASS_DEVICE cutlass::Array<ElementIn, FragmentSize> visit(cutlass::Array<ElementAcc, FragmentSize> const&, int epi_v, int epi_m,
                                                        int epi_n, cutlass::Array<ElementIn, FragmentSize> const& x) {
      // Two copies of the step, so that interior tiles test no coordinates.
      auto coords = tCcD(_, _, _, epi_m, epi_n);
      if (interior) {
        accumulate<false>(coords, epi_v, epi_m, x);
      } else {
        accumulate<true>(coords, epi_v, epi_m, x);
      }
      return x;
    }

    // After the tile: the special cases, then combine the 4 lanes that share
    // each row, then one lane writes.
    CUTLASS_DEVICE void end() {
      int lane = threadIdx.x % 32;
      CUTLASS_PRAGMA_UNROLL
      for (int e = 0; e < NumEpiM; ++e) {
        CUTLASS_PRAGMA_UNROLL
        for (int row = 0; row < 2; ++row) {
          float m = mx[e][row];
          if (isnan(m)) {
            se[e][row] = CUDART_NAN_F;
          } else if (m == CUDART_INF_F) {
            se[e][row] = 1.f;
          }
          CUTLASS_PRAGMA_UNROLL
          for (int mask = 1; mask <= 2; mask *= 2) {
            float m2 = __shfl_xor_sync(0xffffffff, mx[e][row], mask);
            float s2 = __shfl_xor_sync(0xffffffff, se[e][row], mask);
            detail::lse_merge(mx[e][row], se[e][row], m2, s2);
          }
          if (lane % 4 == 0 && out != nullptr) {
            int64_t r = tile_row0 + row0 + int(get<0>(tCcD(_, _, _, e, 0)(0))) + 8 * row;
            out[r] = mx[e][row];
            out[plane + r] = se[e][row];
          }
        }
      }
    }
  };

  template <bool ReferenceSrc, class... Args>
  CUTLASS_DEVICE auto get_consumer_store_callbacks(ConsumerStoreArgs<Args...> const& args) {
    detail::assert_two_rows<decltype(args.tCcD)>();
    auto [M, N, K, L] = args.problem_shape_mnkl;
    auto [m, n, k, l] = args.tile_coord_mnkl;
    auto [tile_m, tile_n, tile_k] = args.tile_shape_mnk;
    int64_t m_pad = (int64_t(M) + tile_m - 1) / tile_m * tile_m;
    int64_t n_tiles = (int64_t(N) + tile_n - 1) / tile_n;
    auto [r0, c0] = detail::thread_origin(args);
    // Tiles that only pad the grid (to a multiple of the cluster or swizzle)
    // lie past (M, N) and have no partials to write.
    bool inside = int64_t(m) * tile_m < int64_t(M) && int64_t(n) < n_tiles;
    float* column = inside ? params->ptr + int64_t(n) * m_pad : nullptr;
    return Callbacks<decltype(args.tCcD), decltype(args.residue_tCcD)>(
        args.tCcD, args.residue_tCcD, detail::interior(args), r0, int64_t(m) * tile_m, n_tiles * m_pad, column);
  }
};

template <class TargetElement>
struct GatherArgs {
  TargetElement const* targets = nullptr;
  float* out = nullptr;
};

template <class TargetElement>
struct GatherPerRow : PlainNode<GatherArgs<TargetElement>> {
  using Base = PlainNode<GatherArgs<TargetElement>>;
  using typename Base::Arguments;
  using typename Base::Params;
  using typename Base::SharedStorage;

  template <class ProblemShape>
  static bool can_implement(ProblemShape const&, Arguments const& args) {
    return args.targets != nullptr && args.out != nullptr;
  }

  CUTLASS_HOST_DEVICE GatherPerRow() {}
  CUTLASS_HOST_DEVICE GatherPerRow(Params const& params, SharedStorage const&) : params(&params) {}
  Params const* params;

  template <class ThrCoords, class Residue>
  struct Callbacks : detail::TargetCallbacks<ThrCoords, Residue, Params const*> {
    using detail::TargetCallbacks<ThrCoords, Residue, Params const*>::TargetCallbacks;
    using detail::TargetCallbacks<ThrCoords, Residue, Params const*>::tCcD;
    using detail::TargetCallbacks<ThrCoords, Residue, Params const*>::row0;
    using detail::TargetCallbacks<ThrCoords, Residue, Params const*>::params;
    using detail::TargetCallbacks<ThrCoords, Residue, Params const*>::target;

    template <class ElementAcc, class ElementIn, int FragmentSize>
    CUTLASS_DEVICE cutlass::Array<ElementIn, FragmentSize> visit(cutlass::Array<ElementAcc, FragmentSize> const&, int epi_v, int epi_m,
                                                        int epi_n, cutlass::Array<ElementIn, FragmentSize> const& x) {
      auto coords = tCcD(_, _, _, epi_m, epi_n);
      CUTLASS_PRAGMA_UNROLL
      for (int row = 0; row < 2; ++row) {
        // One range test per row; the row's slots only in the one tile holding its target.
        int t = target(epi_m, row), lo = INT_MAX, hi = INT_MIN;
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < FragmentSize; ++i) {
          if ((i / 2) % 2 == row) {
            lo = min(lo, int(get<1>(coords(epi_v * FragmentSize + i))));
            hi = max(hi, int(get<1>(coords(epi_v * FragmentSize + i))));
          }
        }
        if (t < lo || t > hi) continue;
        bool hit = false;
        float value = 0.f;
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < FragmentSize; ++i) {
          if ((i / 2) % 2 == row && int(get<1>(coords(epi_v * FragmentSize + i))) == t) {
            hit = true;
            value = float(x[i]);
          }
        }
        if (hit) params->out[row0 + int64_t(get<0>(coords(epi_v * FragmentSize + 2 * row)))] = value;
      }
      return x;
    }
  };

  template <bool ReferenceSrc, class... Args>
  CUTLASS_DEVICE auto get_consumer_store_callbacks(ConsumerStoreArgs<Args...> const& args) {
    detail::assert_two_rows<decltype(args.tCcD)>();
    return detail::coord_callbacks<Callbacks>(args, params);
  }
};

template <class TargetElement>
struct OneHotArgs {
  TargetElement const* targets = nullptr;
};

template <class TargetElement>
struct OneHotPerRow : PlainNode<OneHotArgs<TargetElement>> {
  using Base = PlainNode<OneHotArgs<TargetElement>>;
  using typename Base::Arguments;
  using typename Base::Params;
  using typename Base::SharedStorage;

  template <class ProblemShape>
  static bool can_implement(ProblemShape const&, Arguments const& args) {
    return args.targets != nullptr;
  }

  CUTLASS_HOST_DEVICE OneHotPerRow() {}
  CUTLASS_HOST_DEVICE OneHotPerRow(Params const& params, SharedStorage const&) : params(&params) {}
  Params const* params;

  template <class ThrCoords, class Residue>
  struct Callbacks : detail::TargetCallbacks<ThrCoords, Residue, Params const*> {
    using detail::TargetCallbacks<ThrCoords, Residue, Params const*>::TargetCallbacks;
    using detail::TargetCallbacks<ThrCoords, Residue, Params const*>::tCcD;
    using detail::TargetCallbacks<ThrCoords, Residue, Params const*>::target;

    template <class ElementAcc, int FragmentSize>
    CUTLASS_DEVICE cutlass::Array<float, FragmentSize> visit(cutlass::Array<ElementAcc, FragmentSize> const&, int epi_v,
                                                             int epi_m, int epi_n) {
      auto coords = tCcD(_, _, _, epi_m, epi_n);
      cutlass::Array<float, FragmentSize> out;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < FragmentSize; ++i) {
        // Rows past M have no target: their values are masked at the stores.
        out[i] = int(get<1>(coords(epi_v * FragmentSize + i))) == target(epi_m, (i / 2) % 2) ? 1.f : 0.f;
      }
      return out;
    }
  };

  template <bool ReferenceSrc, class... Args>
  CUTLASS_DEVICE auto get_consumer_store_callbacks(ConsumerStoreArgs<Args...> const& args) {
    detail::assert_two_rows<decltype(args.tCcD)>();
    return detail::coord_callbacks<Callbacks>(args, params);
  }
};

template <class Element>
struct RankOneArgs {
  Element* ptr = nullptr;
};

// Stores a value that is uniform along one dimension, or over groups of
// columns, once: Dim 0, a row-uniform value as out[m] (written by the
// threads holding column 0); Dim 1, a column-uniform value as out[n]
// (written by those holding row 0); Dim 2, a value uniform over each group
// of G columns (group reductions, row vectors, scalars) as
// out[(n / G) * M + m], M fastest: the layout of a blockwise-scaled GEMM's
// a_scale, so that a quantised output's scales feed the next FP8 GEMM as
// they are (written by the threads holding each group's first column).
template <class Element, int Dim, int G = 1>
struct RankOneStore : PlainNode<RankOneArgs<Element>> {
  using Base = PlainNode<RankOneArgs<Element>>;
  using typename Base::Arguments;
  using typename Base::Params;
  using typename Base::SharedStorage;
  static_assert(Dim == 0 || Dim == 1 || Dim == 2, "Dim 0 stores per row, Dim 1 per column, Dim 2 per group of G columns");

  template <class ProblemShape>
  static bool can_implement(ProblemShape const&, Arguments const& args) {
    return args.ptr != nullptr;
  }

  CUTLASS_HOST_DEVICE RankOneStore() {}
  CUTLASS_HOST_DEVICE RankOneStore(Params const& params, SharedStorage const&) : params(&params) {}
  Params const* params;

  template <class ThrCoords, class Residue>
  struct Callbacks : detail::CoordCallbacks<ThrCoords, Residue, Element*> {
    using detail::CoordCallbacks<ThrCoords, Residue, Element*>::CoordCallbacks;
    using detail::CoordCallbacks<ThrCoords, Residue, Element*>::tCcD;
    using detail::CoordCallbacks<ThrCoords, Residue, Element*>::residue;
    using detail::CoordCallbacks<ThrCoords, Residue, Element*>::row0;
    using detail::CoordCallbacks<ThrCoords, Residue, Element*>::col0;
    using detail::CoordCallbacks<ThrCoords, Residue, Element*>::params;

    template <class ElementAcc, class ElementIn, int FragmentSize>
    CUTLASS_DEVICE cutlass::Array<ElementIn, FragmentSize> visit(cutlass::Array<ElementAcc, FragmentSize> const&,
                                                                 int epi_v, int epi_m, int epi_n,
                                                                 cutlass::Array<ElementIn, FragmentSize> const& x) {
      auto coords = tCcD(_, _, _, epi_m, epi_n);
      cutlass::NumericConverter<Element, ElementIn> cvt;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < FragmentSize; ++i) {
        auto rc = coords(epi_v * FragmentSize + i);
        int64_t m = row0 + int64_t(get<0>(rc)), n = col0 + int64_t(get<1>(rc));
        if constexpr (Dim == 2) {
          int64_t const M = row0 + int64_t(get<0>(residue));  // residue = (M, N) minus the thread's first element
          if (n % G == 0 && elem_less(rc, residue)) params[(n / G) * M + m] = cvt(x[i]);
        } else {
          if ((Dim == 0 ? n : m) == 0 && elem_less(rc, residue)) params[Dim == 0 ? m : n] = cvt(x[i]);
        }
      }
      return x;
    }
  };

  template <bool ReferenceSrc, class... Args>
  CUTLASS_DEVICE auto get_consumer_store_callbacks(ConsumerStoreArgs<Args...> const& args) {
    return detail::coord_callbacks<Callbacks>(args, params->ptr);
  }
};

}  // namespace coda::sm90
