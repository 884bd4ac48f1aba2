//! Shared-memory budget: each TMA-staged tile input or output takes shared
//! memory that CUTLASS carves out of the mainloop's pipeline stages. A
//! program whose epilogue leaves room for fewer than two stages would fail
//! deep inside CUTLASS (a static_assert in the mainloop); this estimate
//! mirrors the sizes of CUTLASS 4.2's `SharedStorage` structs and the
//! builder's stage count (`compute_stage_count_or_override`), rounding up
//! where member order decides the padding, and rejects it first. The
//! `smem_estimate` test in coda-codegen checks it against the sizes nvcc
//! computes for generated programs.

use crate::ir::{Collective, Config, DType, InputKind, OutputKind, Schedule};

/// The SM90 per-CTA shared-memory capacity CUTLASS plans against.
pub const CAPACITY: usize = 232_448;
/// The alignment of the epilogue's storage (128-byte-swizzled TMA tiles).
const ALIGN: usize = 1024;
/// Each mainloop stage's pipeline barriers (`PipelineTmaAsync<1>::SharedStorage`).
const STAGE_BARRIERS: usize = 16;

/// The epilogue subtile: 128 (cooperative) or 64 (ping-pong) rows × 32 columns.
fn epi_tile(c: &Config) -> usize {
    let rows = if c.schedule == Schedule::Cooperative { 128 } else { 64 };
    rows * 32
}

/// Bytes of one mainloop stage: a (tile_m × 64) A tile and a (tile_n × 64) B tile of bf16.
pub fn mainloop_stage(c: &Config) -> usize {
    (c.tile_m + c.tile_n) * 64 * 2
}

/// Shared memory the D stages always take (the collective's store buffer,
/// also the reduction scratch), with `elem` the D or first stored element.
pub fn base(c: &Config, elem: DType) -> usize {
    2 * epi_tile(c) * elem.bytes()
}

/// Extra shared memory of one input; `is_c` for the collective's C operand.
/// A `PerCol` vector is staged through shared memory (CUTLASS's
/// `Sm90RowBroadcast`: one element per tile column), counted with the
/// padding a following 1024-aligned tile may add.
pub fn input(c: &Config, kind: InputKind, is_c: bool) -> usize {
    match kind {
        InputKind::Tile(d) if is_c => 2 * epi_tile(c) * d.bytes(),
        InputKind::Tile(d) => 4 * epi_tile(c) * d.bytes(),
        InputKind::PerCol(d) => (c.tile_n * d.bytes()).next_multiple_of(ALIGN),
        _ => 0,
    }
}

/// Extra shared memory of one output; `is_d` for the collective's D operand.
pub fn output(c: &Config, kind: OutputKind, is_d: bool) -> usize {
    match kind {
        OutputKind::Tile(_) if is_d => 0,
        OutputKind::Tile(d) => 2 * epi_tile(c) * d.bytes(),
        OutputKind::HalfTile(d) => epi_tile(c) * d.bytes(),
        OutputKind::DoubleTile(d) => 4 * epi_tile(c) * d.bytes(),
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
pub fn usage(c: &Config, inputs: &[InputKind], outputs: &[OutputKind]) -> (usize, Vec<usize>) {
    let coll = Collective::of(inputs, outputs);
    let items = inputs
        .iter()
        .enumerate()
        .map(|(i, &k)| input(c, k, Some(i) == coll.c))
        .chain(outputs.iter().enumerate().map(|(i, &k)| output(c, k, Some(i) == coll.d)))
        .collect();
    (base(c, coll.element), items)
}
