//! `RMSNorm(x·Woᵀ + z; γ)·W1ᵀ` as two GEMM-epilogue programs and one aux
//! reduction, written against CODA exactly as an outside crate would:
//!
//! 1. `residual_rms_partial`: `h = x·Woᵀ + z`, `u = h ⊙ γ`, per-tile Σh²;
//! 2. `rms_from_partials`: `r[m] = rsqrt(Σ_t sq[t, m] / d + eps)`;
//! 3. `rowscale`: `y = r ⊙_row (u · W1ᵀ)`, which equals `RMSNorm(h; γ) · W1ᵀ`.

pub mod programs;
pub mod timing;
pub mod verify;

use coda_runtime::{Error, RowPartials, Stream, Tensor, aux, bf16};

pub use programs::{residual_rms_partial, rowscale};

/// Outputs and saved tensors of [`norm_linear`], allocated once and reused.
pub struct NormLinear {
    /// The residual stream `h = x·Woᵀ + z`, `[M, d]`.
    pub h: Tensor<bf16>,
    /// `u = h ⊙ γ`, the un-scaled input of the next GEMM, `[M, d]`.
    pub u: Tensor<bf16>,
    /// Σh² partials (laid out for the config the launch runs).
    pub sq: RowPartials,
    /// The inverse RMS, `[M]`.
    pub r: Tensor<f32>,
    /// `y = RMSNorm(h; γ) · W1ᵀ`, `[M, f]`.
    pub y: Tensor<bf16>,
}

impl NormLinear {
    /// Buffers for `M` rows through `Wo` `[d, K]` and `W1` `[f, d]`.
    pub fn new(stream: &Stream, m: usize, d: usize, f: usize) -> Result<Self, Error> {
        Ok(NormLinear {
            h: Tensor::zeros(stream, &[m, d])?,
            u: Tensor::zeros(stream, &[m, d])?,
            sq: RowPartials::new(),
            r: Tensor::zeros(stream, &[m])?,
            y: Tensor::zeros(stream, &[m, f])?,
        })
    }
}

/// The weights of one norm-then-linear step.
pub struct Weights {
    /// `[d, K]`
    pub wo: Tensor<bf16>,
    /// `[d]`
    pub gamma: Tensor<bf16>,
    /// `[f, d]`
    pub w1: Tensor<bf16>,
    pub eps: f32,
}

/// Runs the three launches on `stream` (no host synchronisation).
pub fn norm_linear(stream: &Stream, x: &Tensor<bf16>, z: &Tensor<bf16>, w: &Weights, out: &mut NormLinear) -> Result<(), Error> {
    residual_rms_partial::launch(
        stream,
        residual_rms_partial::Args { a: x, b: &w.wo, z, gamma: &w.gamma, h: &mut out.h, u: &mut out.u, sq: &mut out.sq },
    )?;
    let d = w.wo.shape()[0];
    aux::rms_from_partials(stream, &out.sq, d, w.eps, &mut out.r)?;
    rowscale::launch(stream, rowscale::Args { a: &out.u, b: &w.w1, r: &out.r, y: &mut out.y })
}
