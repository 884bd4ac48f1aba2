//! The CODA epilogue language, shared by the proc macro (`coda-macros`) and
//! the build helper (`coda-codegen`), like cxx's syntax crate: one parser and
//! checker ([`frontend`]), one IR ([`ir`]), one reference semantics ([`interp`]).
//!
//! A program is a Rust `fn` over the GEMM accumulator and other inputs:
//!
//! ```text
//! #[coda::epilogue]
//! /// o_proj epilogue: residual add, RMSNorm weight, partial sum of squares.
//! fn residual_rms_partial(acc: Acc, z: Tile<bf16>, gamma: PerCol<bf16>)
//!     -> (Tile<bf16>, Tile<bf16>, RowPartial<f32>) {
//!     let h = acc + z;
//!     let u = h * gamma;
//!     let sq = row_sum(h * h);
//!     (h, u, sq)
//! }
//! ```
//!
//! Inputs: `Acc` (the f32 accumulator), `Tile<T>` (`[M, N]`), `PerRow<T>`
//! (`[M]`, one value per row), `PerCol<T>` (`[N]`, one value per column),
//! `Scalar` (a runtime f32). Outputs are named after the returned `let`
//! bindings: `Tile<T>` stores and `RowPartial<f32>` per-tile row sums.

pub mod frontend;
pub mod interp;
pub mod ir;
pub mod smem;
pub mod work;
/// A generator of random well-typed programs, for property tests.
#[cfg(any(test, feature = "testgen"))]
pub mod testgen;

pub use frontend::{lower_file, lower_file_variants, lower_fn, parse_config};
pub use ir::Program;

/// The C symbol prefix of one compiled config of a program:
/// `coda_<package>_<version>_<program>__<config name>`, e.g.
/// `coda_my_crate_0_1_0_rowscale__coop_128x256_c1x1`. The package and its
/// version are in it so that two crates, or two versions of one crate, that
/// define a program of the same name link into one binary.
pub fn symbol_prefix(package: &str, version: &str, program: &str, config: &ir::Config) -> String {
    let ident = |s: &str| s.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect::<String>();
    format!("coda_{}_{}_{program}__{}", ident(package), ident(version), config.name())
}
