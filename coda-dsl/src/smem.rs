//! Shared-memory budget: each TMA-staged tile input or output takes shared
//! memory that CUTLASS carves out of the mainloop's pipeline stages. A
//! program whose epilogue leaves room for fewer than two stages would fail
//! deep inside CUTLASS; this estimate, calibrated on the builder's rules and
//! measured sizes (`cutlass-sm90-epilogue-notes.md`, F.4), rejects it first.

use crate::ir::{Config, DType, InputKind, OutputKind, Schedule};

/// The SM90 per-CTA shared-memory capacity CUTLASS plans against.
pub const CAPACITY: usize = 232_448;
/// Barriers, tensor-map prefetch and alignment slack not counted below.
const SLACK: usize = 1024;

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

/// Extra shared memory of one tile input; `is_c` for the collective's C operand.
pub fn input(c: &Config, kind: InputKind, is_c: bool) -> usize {
    match kind {
        InputKind::Tile(d) if is_c => 2 * epi_tile(c) * d.bytes(),
        InputKind::Tile(d) => 4 * epi_tile(c) * d.bytes(),
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

/// Mainloop stages left when the epilogue takes `epilogue` bytes.
pub fn stages_left(c: &Config, epilogue: usize) -> usize {
    CAPACITY.saturating_sub(epilogue + SLACK) / mainloop_stage(c)
}
