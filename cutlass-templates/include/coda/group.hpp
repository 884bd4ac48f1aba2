// Group reductions: each row's sum, mean or maximum over a fixed group of
// G consecutive columns (a head, a quantisation block), broadcast back to
// the group's columns within the same epilogue.
//
// A program with group reductions has an epilogue subtile one group wide,
// (128 or 64 rows) × G (codegen names the EpilogueTile), so that each
// thread's visit() fragment is its whole subtile: 2 rows × G/4 columns,
// slots (r, r, r+8, r+8, ...) as every SM90 fragment
// (cutlass-sm90-epilogue-notes.md, section C), and the 4 lanes of its quad
// hold the rest of both rows' groups. A group is then a reduction over the
// thread's slots and two xor-shuffles (lane masks 1 and 2); no shared memory.
// Columns at or past N contribute nothing (the mean divides by the group's
// columns below N); rows past M are computed and never stored.
#pragma once

#include <math_constants.h>

#include "cute/tensor.hpp"
#include "coda/rowstate.hpp"

namespace coda::sm90 {

using namespace cute;
using namespace cutlass::epilogue::fusion;

enum class GroupOp { Sum, Mean, Max };

struct GroupArgs {};

template <GroupOp Op, int G>
struct GroupReduce : PlainNode<GroupArgs> {
  template <class ProblemShape>
  static bool can_implement(ProblemShape const&, Arguments const&) {
    return true;
  }

  CUTLASS_HOST_DEVICE GroupReduce() {}
  CUTLASS_HOST_DEVICE GroupReduce(Params const& params, SharedStorage const&) : params(&params) {}
  // Not an empty class: cute::tuple gives empty members no address, and the
  // visitor takes each node by reference.
  Params const* params = nullptr;

  template <class ThrCoords, class Residue>
  struct Callbacks : EmptyConsumerStoreCallbacks {
    ThrCoords tCcD;
    Residue residue;  // (M, N) minus the thread's first element

    CUTLASS_DEVICE Callbacks(ThrCoords c, Residue r) : tCcD(c), residue(r) {}

    CUTLASS_DEVICE static float combine(float a, float b) {
      if constexpr (Op == GroupOp::Max) {
        return fmaxf(a, b);
      } else {
        return a + b;
      }
    }

    template <class ElementAcc, class ElementIn, int FragmentSize>
    CUTLASS_DEVICE cutlass::Array<float, FragmentSize> visit(cutlass::Array<ElementAcc, FragmentSize> const&, int epi_v,
                                                             int epi_m, int epi_n,
                                                             cutlass::Array<ElementIn, FragmentSize> const& x) {
      static_assert(cute::size(decltype(tCcD(_, _, _, _0{}, _0{}).layout()){}) == FragmentSize,
                    "a group reduction needs each thread's whole subtile in one fragment");
      static_assert(FragmentSize * 4 == 2 * G, "the subtile must be one group of columns wide");
      float const identity = Op == GroupOp::Max ? -CUDART_INF_F : 0.f;
      auto coords = tCcD(_, _, _, epi_m, epi_n);
      float r[2] = {identity, identity};
      int valid = 0;  // the thread's columns below N (the same for both rows)
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < FragmentSize; ++i) {
        auto c = coords(epi_v * FragmentSize + i);
        if (get<1>(c) < get<1>(residue)) {
          r[(i / 2) % 2] = combine(r[(i / 2) % 2], float(x[i]));
          valid += (i / 2) % 2 == 0;
        }
      }
      CUTLASS_PRAGMA_UNROLL
      for (int mask = 1; mask <= 2; mask *= 2) {
        r[0] = combine(r[0], __shfl_xor_sync(0xffffffff, r[0], mask));
        r[1] = combine(r[1], __shfl_xor_sync(0xffffffff, r[1], mask));
        if constexpr (Op == GroupOp::Mean) valid += __shfl_xor_sync(0xffffffff, valid, mask);
      }
      if constexpr (Op == GroupOp::Mean) {
        float const n = float(max(valid, 1));  // a group wholly past N is never stored
        r[0] /= n;
        r[1] /= n;
      }
      cutlass::Array<float, FragmentSize> out;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < FragmentSize; ++i) out[i] = r[(i / 2) % 2];
      return out;
    }
  };

  template <bool ReferenceSrc, class... Args>
  CUTLASS_DEVICE auto get_consumer_store_callbacks(ConsumerStoreArgs<Args...> const& args) {
    detail::assert_two_rows<decltype(args.tCcD)>();
    return Callbacks<decltype(args.tCcD), decltype(args.residue_tCcD)>(args.tCcD, args.residue_tCcD);
  }
};

}  // namespace coda::sm90
