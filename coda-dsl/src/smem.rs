//! Shared-memory budget: each TMA-staged tile input or output takes shared
//! memory that CUTLASS carves out of the mainloop's pipeline stages. A
//! program whose epilogue leaves room for fewer than two stages would fail
//! deep inside CUTLASS (a static_assert in the mainloop); this estimate
//! mirrors the sizes of CUTLASS 4.2's `SharedStorage` structs and the
//! builder's stage count (`compute_stage_count_or_override`), rounding up
//! where member order decides the padding, and rejects it first. The
//! `smem_estimate` test in coda-codegen checks it against the sizes nvcc
//! computes for generated programs.

use crate::ir::{Collective, Config, DType, InputKind, OperandScale, OutputKind, Schedule};

/// The SM90 per-CTA shared-memory capacity CUTLASS plans against.
pub const CAPACITY: usize = 232_448;
/// The alignment of the epilogue's storage (128-byte-swizzled TMA tiles).
const ALIGN: usize = 1024;
/// Each mainloop stage's pipeline barriers (`PipelineTmaAsync<1>::SharedStorage`).
const STAGE_BARRIERS: usize = 16;

/// The epilogue subtile of a program in a config: 128 (cooperative) or 64
/// (ping-pong) rows × the builder's columns ([`builder_cols`]), × one group
/// for a program with group reductions, or × [`MAP_COLS`] for a map program
/// where that fits ([`subtile`]); the D stages CUTLASS's builder derives from how many
/// subtiles a CTA tile holds (`sm90_get_tma_dispatch_policy`), and the load
/// stages: the buffers of C and of each tile input (the builder's
/// `StagesC`, up to 4; `coda::sm90::Gemm` takes fewer where that gives the
/// mainloop a stage).
#[derive(Clone, Copy, Debug)]
pub struct Subtile {
    pub config: Config,
    pub rows: usize,
    pub cols: usize,
    pub load_stages: usize,
}

/// The columns of a map program's subtile where they fit: a map has no
/// mainloop to overlap, and its consumer warps wait on their own loads and
/// dependency chains (Nsight Compute, bench/NOTES.md sessions 27 and 28:
/// `cross_entropy_grad` 211.7 → 181.3 µs with 64 columns, eligible warps a
/// scheduler 0.61 → 0.72), so each thread gets twice the independent
/// elements between the pipeline's waits. A map bound by its own
/// arithmetic (`rope_backward`'s angles) gains little.
pub const MAP_COLS: usize = 64;

/// The columns of CUTLASS's own epilogue tile (`EpilogueTileAuto`,
/// `sm90_compute_tile_shape_or_override`): 32, but 64 in ping-pong where the
/// collective's element (`Collective::element`) is 8-bit. The codegen names
/// its subtile only where it differs from this one.
pub fn builder_cols(config: &Config, element: DType) -> usize {
    if config.schedule == Schedule::Pingpong && element.bytes() == 1 && config.tile_n % 64 == 0 { 64 } else { 32 }
}

/// The subtile the codegen gives a program with these inputs and outputs
/// (a map program has no `Acc` input): [`Subtile::of`], but [`MAP_COLS`]
/// wide for a map program without group reductions whose tiles, at the
/// fewest load stages, leave the mainloop two stages that wide, and whose
/// `DoubleTile` inputs stay staged by TMA ([`pairs_staged`]) if they were.
pub fn subtile(config: &Config, group: Option<usize>, inputs: &[InputKind], outputs: &[OutputKind]) -> Subtile {
    let narrow = Subtile::of(config, group, Collective::of(inputs, outputs).element);
    if group.is_some() || inputs.contains(&InputKind::Acc) || narrow.cols >= MAP_COLS {
        return narrow;
    }
    let wide = Subtile::with_cols(config, MAP_COLS);
    let (base, items) = usage(&wide.fewest_load_stages(inputs, outputs), inputs, outputs);
    let fits = stages_left(config, base + items.iter().sum::<usize>()) >= 2;
    if fits && pairs_staged(&wide, inputs, outputs) == pairs_staged(&narrow, inputs, outputs) { wide } else { narrow }
}

impl Subtile {
    /// `group`: the program's group size ([`crate::Program::group_size`]);
    /// `element`: the collective's ([`builder_cols`]); the builder's load
    /// stages (up to 4 subtiles ahead).
    pub fn of(config: &Config, group: Option<usize>, element: DType) -> Subtile {
        Subtile::with_cols(config, group.unwrap_or_else(|| builder_cols(config, element)))
    }
    /// A subtile `cols` wide.
    fn with_cols(config: &Config, cols: usize) -> Subtile {
        let rows = if config.schedule == Schedule::Cooperative { 128 } else { 64 };
        let mut t = Subtile { config: *config, rows, cols, load_stages: 0 };
        t.load_stages = t.per_tile().min(4).max(t.stages_d() + 1);
        t
    }
    fn elems(&self) -> usize {
        self.rows * self.cols
    }
    fn per_tile(&self) -> usize {
        (self.config.tile_m / self.rows).max(1) * (self.config.tile_n / self.cols)
    }
    /// The D stages (also those of every tile store).
    fn stages_d(&self) -> usize {
        self.per_tile().min(2)
    }
    /// The same subtile with the fewest load stages the collective takes
    /// for these inputs and outputs: double buffering, and where C shares
    /// D's buffers one more than D's stages. Any program that fits with
    /// these fits, as `coda::sm90::Gemm` picks from this many up.
    pub fn fewest_load_stages(self, inputs: &[InputKind], outputs: &[OutputKind]) -> Subtile {
        let fewest = if c_shares_d(inputs, outputs) { self.stages_d() + 1 } else { 2 };
        Subtile { load_stages: self.load_stages.min(fewest), ..self }
    }
}

/// Whether the collective's C operand shares D's shared-memory buffers
/// (CUTLASS's `ReuseSmemC`: C present, 16- or 32-bit).
fn c_shares_d(inputs: &[InputKind], outputs: &[OutputKind]) -> bool {
    let coll = Collective::of(inputs, outputs);
    coll.c.is_some() && coll.element.bytes() > 1
}

/// Bytes of one mainloop stage: 128 bytes of K of each row of the A and B
/// tiles (64 bf16 or 128 8-bit elements), and with blockwise scales their f32
/// scales, one per row of A and one per 128 columns of B.
pub fn mainloop_stage(c: &Config) -> usize {
    let scales = match c.operands.scale {
        OperandScale::Blockwise => (c.tile_m + c.tile_n / OperandScale::BLOCKWISE_B.0) * 4,
        OperandScale::None => 0,
    };
    (c.tile_m + c.tile_n) * 128 + scales
}

/// Shared memory the D stages always take (the collective's store buffer,
/// also the reduction scratch), with `elem` the D or first stored element.
pub fn base(t: &Subtile, elem: DType) -> usize {
    // And one aligned block more: CUTLASS's storage runs up to 2 KB past the
    // tiles and barriers (measured by the `smem_estimate` tests: a
    // cooperative 128 × 128 subtile with a C operand, an f32 D without one).
    t.stages_d() * t.elems() * elem.bytes() + ALIGN
}

/// Extra shared memory of one input; `is_c` for the collective's C operand
/// (sharing D's buffers unless 8-bit); `pairs_staged` as [`pairs_staged`]
/// decides for the program (a staged `DoubleTile` is a tile of 32-bit words).
/// A `PerCol` vector is staged through shared memory (CUTLASS's
/// `Sm90RowBroadcast`: one element per tile column), counted with the
/// padding a following 1024-aligned tile may add.
pub fn input(t: &Subtile, kind: InputKind, is_c: bool, pairs_staged: bool) -> usize {
    match kind {
        InputKind::Tile(d) if is_c && d.bytes() > 1 => (t.load_stages - t.stages_d()) * t.elems() * d.bytes(),
        InputKind::Tile(d) => t.load_stages * t.elems() * d.bytes(),
        InputKind::DoubleTile(d) if pairs_staged => t.load_stages * t.elems() * 2 * d.bytes(),
        InputKind::PerCol(d) => (t.config.tile_n * d.bytes()).next_multiple_of(ALIGN),
        _ => 0,
    }
}

/// Whether a program's `DoubleTile` inputs are staged by TMA in this config:
/// as `[M, N]` tiles of 32-bit words (each word a pair), through the
/// epilogue's load pipeline like any tile input, where that still leaves the
/// mainloop two stages at the fewest load stages; otherwise (e.g. a group
/// reduction's 128-column subtile in the cooperative config) each thread
/// loads its pairs from global memory and they take no shared memory.
pub fn pairs_staged(t: &Subtile, inputs: &[InputKind], outputs: &[OutputKind]) -> bool {
    if !inputs.iter().any(|k| matches!(k, InputKind::DoubleTile(_))) {
        return false;
    }
    let t = t.fewest_load_stages(inputs, outputs);
    let (base, items) = usage_with(&t, inputs, outputs, true);
    stages_left(&t.config, base + items.iter().sum::<usize>()) >= 2
}

/// Extra shared memory of one output; `is_d` for the collective's D operand.
pub fn output(t: &Subtile, kind: OutputKind, is_d: bool) -> usize {
    let stage = t.stages_d() * t.elems();
    match kind {
        OutputKind::Tile(_) if is_d => 0,
        OutputKind::Tile(d) => stage * d.bytes(),
        OutputKind::HalfTile(d) => stage * d.bytes() / 2,
        OutputKind::DoubleTile(d) => 2 * stage * d.bytes(),
        _ => 0,
    }
}

/// Bytes of one mainloop stage with its pipeline barriers, as the builder counts it.
pub fn stage_bytes(c: &Config) -> usize {
    mainloop_stage(c) + STAGE_BARRIERS
}

/// The epilogue's `SharedStorage` when its tiles take `tiles` bytes: those
/// rounded to the alignment, then the load pipeline's barriers (≤ 64
/// bytes, one more aligned block).
pub fn epilogue_bytes(tiles: usize) -> usize {
    tiles.next_multiple_of(ALIGN) + ALIGN
}

/// Mainloop stages left when the epilogue's tiles take `tiles` bytes.
pub fn stages_left(c: &Config, tiles: usize) -> usize {
    CAPACITY.saturating_sub(epilogue_bytes(tiles)) / stage_bytes(c)
}

/// What the epilogue of a program with these inputs and outputs takes:
/// the D stages, then each input's and each output's bytes in order (the
/// frontend names the first item that leaves fewer than two stages).
pub fn usage(t: &Subtile, inputs: &[InputKind], outputs: &[OutputKind]) -> (usize, Vec<usize>) {
    usage_with(t, inputs, outputs, pairs_staged(t, inputs, outputs))
}

fn usage_with(t: &Subtile, inputs: &[InputKind], outputs: &[OutputKind], pairs_staged: bool) -> (usize, Vec<usize>) {
    let coll = Collective::of(inputs, outputs);
    let items = inputs
        .iter()
        .enumerate()
        .map(|(i, &k)| input(t, k, Some(i) == coll.c, pairs_staged))
        .chain(outputs.iter().enumerate().map(|(i, &k)| output(t, k, Some(i) == coll.d)))
        .collect();
    (base(t, coll.element), items)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `DoubleTile` input is staged where the mainloop keeps two stages
    /// beside it: not beside a cooperative config's 128-column group subtiles.
    #[test]
    fn pairs_are_staged_where_they_fit() {
        let (coop, pp) = (Config::from_name("coop_128x256_c1x1").unwrap(), Config::from_name("pp_128x128_c1x2").unwrap());
        let pairs = [InputKind::Acc, InputKind::DoubleTile(DType::Bf16)];
        let out = [OutputKind::Tile(DType::Bf16)];
        let staged = |c: &Config, group| pairs_staged(&Subtile::of(c, group, DType::Bf16), &pairs, &out);
        assert!(staged(&coop, None) && staged(&pp, None) && staged(&pp, Some(128)));
        assert!(!staged(&coop, Some(128)));
        // Loaded by each thread, the pairs take no shared memory; staged, a 32-bit word tile.
        let t = Subtile::of(&coop, Some(128), DType::Bf16).fewest_load_stages(&pairs, &out);
        assert_eq!(usage(&t, &pairs, &out).1, [0, 0, 0]);
        let t = Subtile::of(&pp, Some(128), DType::Bf16).fewest_load_stages(&pairs, &out);
        assert_eq!(usage(&t, &pairs, &out).1, [0, t.load_stages * 64 * 128 * 4, 0]);
        assert!(!pairs_staged(&Subtile::of(&coop, None, DType::Bf16), &[InputKind::Acc], &out));
    }
}

#[cfg(test)]
mod subtile_tests {
    use super::*;

    fn cfg(name: &str) -> Config {
        Config::from_name(name).unwrap()
    }
    const BF16: InputKind = InputKind::Tile(DType::Bf16);
    const OUT: OutputKind = OutputKind::Tile(DType::Bf16);

    /// One decision: a group's width, else the builder's (64 columns only in
    /// ping-pong with an 8-bit element), else a map's [`MAP_COLS`] where that
    /// fits without unstaging its pairs.
    #[test]
    fn subtile_widths() {
        let (coop, pp) = (cfg("coop_128x256_c1x1"), cfg("pp_128x128_c1x2"));
        let cols = |c: &Config, group, inputs: &[InputKind], outputs: &[OutputKind]| subtile(c, group, inputs, outputs).cols;
        // GEMMs: the builder's.
        assert_eq!(cols(&coop, None, &[InputKind::Acc], &[OUT]), 32);
        assert_eq!(cols(&pp, None, &[InputKind::Acc], &[OUT]), 32);
        assert_eq!(cols(&pp, None, &[InputKind::Acc], &[OutputKind::Tile(DType::E4m3)]), 64);
        assert_eq!(cols(&coop, None, &[InputKind::Acc], &[OutputKind::Tile(DType::E4m3)]), 32);
        // A group's, map or not.
        assert_eq!(cols(&pp, Some(128), &[InputKind::Acc], &[OUT]), 128);
        assert_eq!(cols(&coop, Some(64), &[BF16], &[OUT]), 64);
        // Maps: wide where it fits.
        assert_eq!(cols(&coop, None, &[BF16], &[OUT]), MAP_COLS);
        assert_eq!(cols(&pp, None, &[BF16, BF16], &[OUT, OUT]), MAP_COLS);
        // Three tile inputs fit 32 columns wide, not 64.
        let many = [BF16; 3];
        let left = |t: Subtile| {
            let (base, items) = usage(&t.fewest_load_stages(&many, &[OUT]), &many, &[OUT]);
            stages_left(&coop, base + items.iter().sum::<usize>())
        };
        assert!(left(Subtile::with_cols(&coop, 32)) >= 2 && left(Subtile::with_cols(&coop, MAP_COLS)) < 2);
        assert_eq!(cols(&coop, None, &many, &[OUT]), 32);
    }

    /// Widening a map never turns its TMA-staged pairs into per-thread loads.
    #[test]
    fn widening_keeps_pairs_staged() {
        let coop = cfg("coop_128x256_c1x1");
        let (inputs, outputs) = ([BF16, InputKind::DoubleTile(DType::Bf16)], [OUT]);
        let narrow = Subtile::of(&coop, None, DType::Bf16);
        assert!(pairs_staged(&narrow, &inputs, &outputs));
        // 64 columns wide they would fit only unstaged.
        assert!(!pairs_staged(&Subtile::with_cols(&coop, MAP_COLS), &inputs, &outputs));
        let t = subtile(&coop, None, &inputs, &outputs);
        assert_eq!(t.cols, 32);
        assert!(pairs_staged(&t, &inputs, &outputs));
    }
}
