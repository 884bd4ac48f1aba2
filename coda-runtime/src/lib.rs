//! The CODA runtime: launch GEMM-epilogue programs compiled by `coda-codegen`
//! on a CUDA stream, with every argument checked first, and finish their
//! partial statistics with aux reductions. Model-free: the Llama block lives
//! in `coda-llama`.
//!
//! ```text
//! use coda_runtime as coda;
//!
//! #[coda::epilogue]
//! fn residual_rms(acc: Acc, z: Tile<bf16>) -> (Tile<bf16>, RowPartial<f32>) {
//!     let h = acc + z;
//!     let sq = row_sum(h * h);
//!     (h, sq)
//! }
//!
//! let stream = coda::Stream::new(0)?;
//! let mut sq = coda::RowPartials::new();   // sized by the launch's config
//! residual_rms::launch(&stream, residual_rms::Args { a: &x, b: &w, z: &z, h: &mut h, sq: &mut sq })?;
//! coda::aux::rms_from_partials(&stream, &sq, d, 1e-5, &mut r)?;
//! ```
//!
//! Layers, each using only those before it: [`tensor`](Tensor) and
//! [`Stream`] → [`Kernel`] (checked launches in a resolved [`Choice`]) →
//! [`tune`] (which choice a shape runs; the generated `launch` asks it) and
//! [`partials`] → [`aux`] (finishers of partials).

pub mod aux;
pub mod bench;
mod borrowed;
mod dlpack;
mod error;
pub mod ffi;
mod kernel;
pub mod partials;
mod stream;
mod tensor;
pub mod tune;

pub use coda_dsl as dsl;
pub use cudarc;
pub use dlpark;
pub use coda_macros::epilogue;
pub use borrowed::{RawTensor, TensorView, TensorViewMut};
pub use error::Error;
pub use half::bf16;
/// The 8-bit float formats of FP8 operands and outputs (OCP e4m3fn, e5m2).
pub use float8::{F8E4M3 as e4m3, F8E5M2 as e5m2};
pub use kernel::{ArgDesc, Choice, Kernel, MAP_K, ParamInfo, Problem, Raster, Span, Variant, check_args, check_disjoint, gemm_problem, scale_dims};
pub use partials::{ColMaxPartials, ColPartials, LsePartials, RowMaxPartials, RowPartials};
pub use stream::{LaunchKind, Launches, PoolUsage, Stream};
pub use tensor::{AnyTensor, AnyTensorMut, Element, RowSlices, Rows, RowsMut, Tensor, TensorArg, TensorMut, TensorRef};
