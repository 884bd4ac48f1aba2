//! The CODA runtime: launch GEMM-epilogue programs compiled by `coda-codegen`
//! on a CUDA stream, with every argument checked first, and finish their
//! partial statistics with aux reductions.
//!
//! ```text
//! use coda_runtime as coda;
//!
//! #[coda::epilogue]
//! fn rowscale(acc: Acc, r: PerRow<f32>) -> Tile<bf16> {
//!     let y = acc * r;
//!     y
//! }
//!
//! let stream = coda::Stream::new(0)?;
//! rowscale::launch(&stream, rowscale::Args { a: &x, b: &w, r: &r, y: &mut y })?;
//! ```

// The Llama ops use our own macro, whose expansion names `::coda_runtime`.
extern crate self as coda_runtime;

pub mod aux;
pub mod blas;
pub mod bench;
mod error;
pub mod ffi;
pub mod llama;
mod kernel;
mod stream;
mod tensor;
pub mod tune;

pub use coda_dsl as dsl;
pub use cudarc;
pub use coda_macros::epilogue;
pub use error::Error;
pub use half::bf16;
pub use kernel::{ArgDesc, Choice, Kernel, MAP_K, ParamInfo, Problem, Raster, Variant, check_args, gemm_problem};
pub use stream::{Launches, Stream};
pub use tensor::{AnyTensor, Element, Rows, RowsMut, Tensor, TensorArg, TensorMut, TensorRef};
