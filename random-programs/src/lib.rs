//! A batch of generated epilogue programs (see `build.rs`), compiled as a
//! user's crate would compile its own, for `tests/gpu_random.rs`.

use coda_runtime as coda;
// The generator also writes the attribute bare, as a user who imports it
// does; most batches have no such program.
#[allow(unused_imports)]
use coda::epilogue;

/// One compiled program of the batch.
pub struct Generated {
    pub name: &'static str,
    /// Its DSL source, printed when it fails.
    pub source: &'static str,
    pub kernel: &'static coda::Kernel,
    pub program: coda::dsl::Program,
}

include!(concat!(env!("OUT_DIR"), "/random_programs.rs"));

/// Ragged shapes `(M, N, K)`: M and N multiples of no tile, K of no K-tile;
/// N a multiple of 16 so half-width bf16 rows stay 16-byte aligned.
pub const SHAPES: [(usize, usize, usize); 3] = [(1000, 528, 264), (333, 272, 136), (2100, 784, 520)];
