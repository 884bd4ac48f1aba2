// Pairwise epilogue nodes: values over adjacent column pairs (2j, 2j+1).
//
// On SM90 each thread's visit() fragment holds column pairs (n, n+1), n even,
// in slots (2k, 2k+1) (cutlass-sm90-epilogue-notes.md, section C); every node
// here static_asserts that on the real fragment layout. A "half-width" value
// (one per pair) travels duplicated in both slots of its pair.
//
// - ResizedTileStore: stores an [M, N/2] (one input, a half-width value) or an
//   [M, 2N] (two inputs, interleaved) tile through shared memory and its own
//   TMA descriptor, piggybacking on the collective's store pipeline exactly as
//   Sm90AuxStore does (smem writes in postreduce, TMA in tma_store).
// - PairTileLoad: an [M, 2N] bf16 tile as a full-width value whose slot for
//   column n holds the bits of elements (2n, 2n+1), both halves packed in one
//   32-bit word; pair_half<Part> (inlined into the `unpair`'s consumers)
//   takes one half out. One node per input, so each word is loaded once.
#pragma once

#include "cute/tensor.hpp"
#include "coda/sm90_gemm.hpp"

namespace coda::sm90 {

using namespace cute;
using namespace cutlass::epilogue::fusion;

namespace detail {

// Slots (2k, 2k+1) of a static thread coordinate layout are (r, c), (r, c+1) with c even.
template <class CoordLayout, int... K>
constexpr bool pairs_adjacent(cute::integer_sequence<int, K...>) {
  return ((get<0>(CoordLayout{}(Int<2 * K + 1>{})) == get<0>(CoordLayout{}(Int<2 * K>{})) &&
           get<1>(CoordLayout{}(Int<2 * K + 1>{})) == get<1>(CoordLayout{}(Int<2 * K>{})) + Int<1>{} &&
           get<1>(CoordLayout{}(Int<2 * K>{})) % Int<2>{} == Int<0>{}) &&
          ...);
}

template <class ThrCoordTensor>
CUTLASS_DEVICE constexpr void assert_column_pairs() {
  using Sub = decltype(ThrCoordTensor{}(_, _, _, _0{}, _0{}).layout());
  static_assert(cute::is_static_v<Sub>, "the epilogue's thread coordinates must be static");
  static_assert(size(Sub{}) % 2 == 0, "fragments hold whole column pairs");
  static_assert(pairs_adjacent<Sub>(cute::make_integer_sequence<int, size(Sub{}) / 2>{}),
                "each thread's fragment must hold adjacent column pairs (n, n+1), n even, in slots (2k, 2k+1)");
}

}  // namespace detail

// Stores an [M, N·Num/Den] row-major tile: Num/Den = 1/2 (one half-width
// input) or 2/1 (two full-width inputs: even and odd output columns).
template <int Stages, class EpilogueTile, class Element, int Num, int Den>
struct ResizedTileStore {
  static_assert((Num == 1 && Den == 2) || (Num == 2 && Den == 1), "only half and double width");
  static constexpr int EpiM = size<0>(EpilogueTile{});
  static constexpr int EpiN = size<1>(EpilogueTile{}) * Num / Den;
  static_assert(EpiN * sizeof_bits_v<Element> % 128 == 0, "TMA rows must be multiples of 16 bytes");

  using SmemLayoutStage = Layout<Shape<Int<EpiM>, Int<EpiN>>, Stride<Int<EpiN>, _1>>;
  using SmemLayout = Layout<Shape<Int<EpiM>, Int<EpiN>, Int<Stages>>, Stride<Int<EpiN>, _1, Int<EpiM * EpiN>>>;
  using StrideOut = Stride<int64_t, _1, int64_t>;

  struct SharedStorage {
    alignas(128) cute::array_aligned<Element, cute::cosize_v<SmemLayout>> smem;
  };
  struct Arguments {
    Element* ptr = nullptr;
  };
  struct Params {
    using Tma = decltype(make_tma_copy(SM90_TMA_STORE{},
                                       make_tensor(static_cast<Element*>(nullptr), make_shape(1, 1, 1), StrideOut{}),
                                       SmemLayoutStage{}));
    Tma tma;
  };

  template <class ProblemShape>
  static Params to_underlying_arguments(ProblemShape const& problem_shape, Arguments const& args, void*) {
    auto [M, N, K, L] = append<4>(problem_shape, 1);
    int n_out = N * Num / Den;
    auto out = make_tensor(args.ptr, make_shape(M, n_out, L), StrideOut{int64_t(n_out), _1{}, int64_t(M) * n_out});
    return {make_tma_copy(SM90_TMA_STORE{}, out, SmemLayoutStage{})};
  }
  template <class ProblemShape>
  static bool can_implement(ProblemShape const&, Arguments const& args) {
    return args.ptr != nullptr;
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

  CUTLASS_HOST_DEVICE ResizedTileStore() {}
  CUTLASS_HOST_DEVICE ResizedTileStore(Params const& params, SharedStorage const& shared)
      : params(&params), smem(const_cast<Element*>(shared.smem.data())) {}

  Params const* params;
  Element* smem;

  CUTLASS_DEVICE bool is_producer_load_needed() const { return false; }
  CUTLASS_DEVICE bool is_C_load_needed() const { return false; }
  template <class... Args>
  CUTLASS_DEVICE auto get_producer_load_callbacks(ProducerLoadArgs<Args...> const&) {
    return EmptyProducerLoadCallbacks{};
  }

  template <class ThrCoords, class SmemTensor, class TmaSrc, class TmaDst, int FragmentSize>
  struct Callbacks : EmptyConsumerStoreCallbacks {
    static constexpr int kOut = FragmentSize * Num / Den;  // output values per thread per subtile
    ThrCoords tCcD;             // thread-relative (r, c) of each fragment slot, per subtile
    int row0, col0;             // the thread's first element, relative to the CTA tile
    SmemTensor sOut;            // (EPI_M, EPI_N_out, PIPE)
    TmaSrc bSG_s;               // TMA partition of sOut
    TmaDst bSG_g;               // TMA partition of the output tile, per subtile
    Params const* params;
    cutlass::Array<Element, kOut> values;

    CUTLASS_DEVICE Callbacks(ThrCoords c, int r0, int c0, SmemTensor s, TmaSrc src, TmaDst dst, Params const* p)
        : tCcD(c), row0(r0), col0(c0), sOut(s), bSG_s(src), bSG_g(dst), params(p) {}

    template <class ElementAcc, class... In>
    CUTLASS_DEVICE auto visit(cutlass::Array<ElementAcc, FragmentSize> const&, int, int, int, In const&... in) {
      cutlass::NumericConverter<Element, float> cvt;
      if constexpr (sizeof...(In) == 1) {
        auto const& half = get_first(in...);
        CUTLASS_PRAGMA_UNROLL
        for (int k = 0; k < FragmentSize / 2; ++k) values[k] = cvt(float(half[2 * k]));
      } else {
        static_assert(sizeof...(In) == 2, "a double-width store takes (even, odd) inputs");
        store_pairs(cvt, in...);
      }
      return get_first(in...);
    }

    template <class T, class... Rest>
    CUTLASS_DEVICE static T const& get_first(T const& t, Rest const&...) {
      return t;
    }
    template <class Cvt, class E, class O>
    CUTLASS_DEVICE void store_pairs(Cvt const& cvt, E const& even, O const& odd) {
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < FragmentSize; ++i) {
        values[2 * i] = cvt(float(even[i]));
        values[2 * i + 1] = cvt(float(odd[i]));
      }
    }

    CUTLASS_DEVICE void postreduce(int epi_m, int epi_n, int store_iteration, bool issue_smem_store) {
      if (!issue_smem_store) return;
      auto stage = sOut(_, _, store_iteration % Stages);
      auto coords = tCcD(_, _, _, epi_m, epi_n);
      constexpr int EpiNIn = size<1>(EpilogueTile{});
      CUTLASS_PRAGMA_UNROLL
      for (int k = 0; k < FragmentSize / 2; ++k) {
        auto rc = coords(2 * k);  // the even column of pair k
        int r = row0 + int(get<0>(rc)) - epi_m * EpiM;
        int c = col0 + int(get<1>(rc)) - epi_n * EpiNIn;
        if constexpr (Num == 1) {
          stage(r, c / 2) = values[k];
        } else {
          // columns c and c+1 become output columns 2c .. 2c+3: one aligned
          // store (c is even), a quarter of the bank-conflicted wavefronts
          cutlass::AlignedArray<Element, 4> quad;
          CUTLASS_PRAGMA_UNROLL
          for (int j = 0; j < 4; ++j) quad[j] = values[4 * k + j];
          *reinterpret_cast<cutlass::AlignedArray<Element, 4>*>(&stage(r, 2 * c)) = quad;
        }
      }
    }

    CUTLASS_DEVICE void tma_store(int epi_m, int epi_n, int store_iteration, bool issue_tma_store) {
      if (issue_tma_store) {
        copy(params->tma, bSG_s(_, _, _, store_iteration % Stages), bSG_g(_, _, _, epi_m, epi_n));
      }
    }
  };

  template <bool ReferenceSrc, class... Args>
  CUTLASS_DEVICE auto get_consumer_store_callbacks(ConsumerStoreArgs<Args...> const& args) {
    using ThrCoords = decltype(args.tCcD);
    detail::assert_column_pairs<ThrCoords>();
    constexpr int FragmentSize = size(decltype(args.tCcD(_, _, _, _0{}, _0{})){}) ;
    auto [M, N, K, L] = args.problem_shape_mnkl;
    auto [m, n, k, l] = args.tile_coord_mnkl;
    auto [tile_m, tile_n, tile_k] = args.tile_shape_mnk;
    // The thread's first element, relative to the CTA tile.
    int row0 = int(M - get<0>(args.residue_tCcD)) - int(m) * int(tile_m);
    int col0 = int(N - get<1>(args.residue_tCcD)) - int(n) * int(tile_n);

    int n_out = N * Num / Den;
    Tensor mOut = params->tma.get_tma_tensor(make_shape(M, n_out, L));
    auto cta_out = make_shape(get<0>(args.tile_shape_mnk), Int<size<1>(decltype(args.tile_shape_mnk){}) * Num / Den>{});
    Tensor gOut = local_tile(mOut, cta_out, make_coord(m, n, l));
    Tensor gOut_epi = flat_divide(gOut, Shape<Int<EpiM>, Int<EpiN>>{});  // (EPI_M, EPI_N_out, #EPI_M, #EPI_N)
    Tensor sOut = make_tensor(make_smem_ptr(smem), SmemLayout{});
    ThrCopy thr = params->tma.get_slice(_0{});
    Tensor bSG_s = thr.partition_S(sOut);
    Tensor bSG_g = thr.partition_D(gOut_epi);
    return Callbacks<ThrCoords, decltype(sOut), decltype(bSG_s), decltype(bSG_g), FragmentSize>(
        args.tCcD, row0, col0, sOut, bSG_s, bSG_g, params);
  }
};

// One half of a PairTileLoad slot: the even (Part 0) or odd (Part 1) element.
// Host and device: the generated functors it is inlined into are both.
template <int Part>
CUTLASS_HOST_DEVICE float pair_half(float packed) {
  static_assert(Part == 0 || Part == 1, "Part selects the even (0) or odd (1) columns");
  uint32_t bits;
  memcpy(&bits, &packed, sizeof bits);
  // A bf16 is the high half of the f32 it widens to.
  bits = Part == 0 ? bits << 16 : bits & 0xffff0000u;
  float out;
  memcpy(&out, &bits, sizeof out);
  return out;
}

// An [M, 2N] row-major bf16 tile as a full-width value: slot n holds the
// 32-bit word of elements (m, 2n) and (m, 2n + 1), the even one in the low
// half (little-endian), as a float's bits: the visitor passes floats between
// nodes unchanged (NumericArrayConverter<float, float> is the identity), and
// only pair_half reads them. Per-thread 8-byte loads of each thread's column
// pair (4 consecutive elements), predicated on M and N. The loads are
// latency-bound (bench/NOTES.md, sessions 14 and 15), so each subtile's words
// are loaded while the previous subtile is finished (distance 1, tagged with
// their subtile so a skipped one falls back to a load in place), and begin()
// hints the tile's rows into L2 with one bulk prefetch per row. The loads are
// CUTLASS's `asm volatile` predicated loads: the compiler sinks plain loads
// past the TMA store's fence and barriers to their use (session 15's PTX),
// which exposes their whole latency again.
template <class Element>
struct PairTileLoadArgs {
  Element const* ptr = nullptr;
};

template <class Element>
struct PairTileLoad : PlainNode<PairTileLoadArgs<Element>> {
  using Base = PlainNode<PairTileLoadArgs<Element>>;
  using typename Base::Arguments;
  using typename Base::Params;
  using typename Base::SharedStorage;
  static_assert(cute::is_same_v<Element, cutlass::bfloat16_t>, "both halves of a pair fit one float slot only in bf16");

  template <class ProblemShape>
  static bool can_implement(ProblemShape const&, Arguments const& args) {
    return args.ptr != nullptr && reinterpret_cast<uintptr_t>(args.ptr) % 16 == 0;
  }

  CUTLASS_HOST_DEVICE PairTileLoad() {}
  CUTLASS_HOST_DEVICE PairTileLoad(Params const& params, SharedStorage const&) : params(&params) {}
  Params const* params;

  template <class ThrCoords, class Residue>
  struct Callbacks : EmptyConsumerStoreCallbacks {
    using Sub = decltype(ThrCoords{}(_, _, _, _0{}, _0{}).layout());
    static constexpr int kSlots = size(Sub{});  // fragment slots per subtile
    static constexpr int kEpiM = decltype(size<3>(ThrCoords{}))::value;
    static constexpr int kEpiN = decltype(size<4>(ThrCoords{}))::value;

    ThrCoords tCcD;
    Residue residue;       // (M, N) minus the thread's first element
    Element const* base;   // the thread's first element's row, column pair
    int64_t ld;            // row stride of the [M, 2N] tensor
    int prefetch_bytes;    // bytes of one tile row to hint into L2 (0: none)
    cutlass::Array<uint64_t, kSlots / 2> words;  // the subtile's column pairs
    int words_m = -1, words_n = -1;              // which subtile `words` holds

    CUTLASS_DEVICE Callbacks(ThrCoords c, Residue r, Element const* b, int64_t l, int pb)
        : tCcD(c), residue(r), base(b), ld(l), prefetch_bytes(pb) {}

    CUTLASS_DEVICE void load(int epi_m, int epi_n) {
      auto coords = tCcD(_, _, _, epi_m, epi_n);
      CUTLASS_PRAGMA_UNROLL
      for (int k = 0; k < kSlots / 2; ++k) {
        auto rc = coords(2 * k);
        words[k] = 0;
        cutlass::arch::global_load<uint64_t, 8>(words[k], base + int64_t(get<0>(rc)) * ld + 2 * int64_t(get<1>(rc)),
                                                elem_less(rc, residue));
      }
      words_m = epi_m;
      words_n = epi_n;
    }

    // For each of the thread's rows (its slots in its first column), one bulk
    // prefetch of the row's part of the tile: a hint, nothing depends on it.
    CUTLASS_DEVICE void begin() {
      if (prefetch_bytes > 0) {
        auto first = tCcD(0, 0, 0, 0, 0);
        CUTLASS_PRAGMA_UNROLL
        for (int em = 0; em < kEpiM; ++em) {
          auto coords = tCcD(_, _, _, em, 0);
          CUTLASS_PRAGMA_UNROLL
          for (int k = 0; k < kSlots; ++k) {
            auto rc = coords(k);
            if (get<1>(rc) == get<1>(first) && get<0>(rc) < get<0>(residue)) {
              Element const* row = base + int64_t(get<0>(rc)) * ld;
              asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(row), "r"(prefetch_bytes) : "memory");
            }
          }
        }
      }
      load(0, 0);
    }

    template <class ElementAcc, int FragmentSize>
    CUTLASS_DEVICE cutlass::Array<float, FragmentSize> visit(cutlass::Array<ElementAcc, FragmentSize> const&, int epi_v, int epi_m,
                                                   int epi_n) {
      static_assert(kSlots % FragmentSize == 0 && FragmentSize % 2 == 0, "visits cover whole column pairs");
      if (words_m != epi_m || words_n != epi_n) load(epi_m, epi_n);
      cutlass::Array<float, FragmentSize> out;
      CUTLASS_PRAGMA_UNROLL
      for (int k = 0; k < FragmentSize / 2; ++k) {
        // Elements 2c .. 2c+3 of the row: the (even, odd) words of columns c and c+1.
        uint64_t w = words[(epi_v * FragmentSize) / 2 + k];
        out[2 * k] = __uint_as_float(uint32_t(w));
        out[2 * k + 1] = __uint_as_float(uint32_t(w >> 32));
      }
      // After the subtile's last visit: the next subtile's loads, in the
      // collective's order (epi_m inner), in flight while this one is stored.
      if (epi_v == kSlots / FragmentSize - 1) {
        if (epi_m + 1 < kEpiM) {
          load(epi_m + 1, epi_n);
        } else if (epi_n + 1 < kEpiN) {
          load(0, epi_n + 1);
        }
      }
      return out;
    }
  };

  template <bool ReferenceSrc, class... Args>
  CUTLASS_DEVICE auto get_consumer_store_callbacks(ConsumerStoreArgs<Args...> const& args) {
    detail::assert_column_pairs<decltype(args.tCcD)>();
    auto [M, N, K, L] = args.problem_shape_mnkl;
    auto [m, n, k, l] = args.tile_coord_mnkl;
    int64_t row0 = int64_t(M - get<0>(args.residue_tCcD));
    int64_t col0 = int64_t(N - get<1>(args.residue_tCcD));
    int64_t ld = 2 * int64_t(N);
    Element const* base = params->ptr + row0 * ld + 2 * col0;
    // Threads holding the tile's first column hint its rows into L2, from
    // there to the tile's (or the tensor's) last column; the bulk prefetch
    // needs 16-byte aligned rows and a multiple of 16 bytes.
    int tile_n = int(get<1>(args.tile_shape_mnk));
    int64_t tile_col0 = int64_t(n) * tile_n;
    int64_t col_end = cute::min(tile_col0 + tile_n, int64_t(N));
    int64_t bytes = (col_end - col0) * 2 * int64_t(sizeof(Element)) / 16 * 16;
    bool aligned = (ld * int64_t(sizeof(Element))) % 16 == 0 && (2 * col0 * int64_t(sizeof(Element))) % 16 == 0;
    int prefetch_bytes = col0 == tile_col0 && aligned && bytes > 0 ? int(bytes) : 0;
    return Callbacks<decltype(args.tCcD), decltype(args.residue_tCcD)>(args.tCcD, args.residue_tCcD, base, ld,
                                                                        prefetch_bytes);
  }
};

}  // namespace coda::sm90
