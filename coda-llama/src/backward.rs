//! The block backward: the forward's four GEMMs again, transposed, each with
//! its backward epilogue, plus the weight gradients as plain GEMMs.
//!
//! With `dx2` (the gradient of the residual output) and `dqkv` (of the
//! rotated q, k, v, e.g. from attention's backward):
//!
//! 1. `dz2 = RoPE⁻¹(dqkv)` and `Σ dqkv ⊙ qkv` partials → `s2` (a map program);
//! 2. `dh2 = dx2 + RMSNorm₂ᵀ(dz2 · Wqkv)` with `dγ2` partials and `x̂2 ⊙ γ2`;
//!    `dWqkv = dz2ᵀ · (x̂2 ⊙ γ2)`;
//! 3. `dz1 = dSwiGLU(dh2 · Wd; z1)` with `Σ dz1 ⊙ z1` partials → `s1`;
//!    `dWd = dh2ᵀ · y1`;
//! 4. `dx0 = dh1 = dh2 + RMSNorm₁ᵀ(dz1 · Wgu)` with `dγ1` partials and
//!    `x̂1 ⊙ γ1`; `dWgu = dz1ᵀ · (x̂1 ⊙ γ1)`;
//! 5. `dattn = dh1 · Wo`; `dWo = dh1ᵀ · attn`.
//!
//! Five fused launches, four aux reductions, four cuBLAS weight-gradient GEMMs.
//! Weight and norm-weight gradients are f32.

use super::programs::{
    linear_dswiglu as dswiglu, matmul, rmsnorm_backward as norm_backward, rope_backward,
};
use super::{BlockConfig, BlockState, BlockWeights};
use crate::blas::Cublas;
use coda_runtime::{Choice, ColPartials, Error, Launches, Problem, RowPartials, Stream, Tensor, aux, bf16, tune};

/// Launches per backward.
pub const BACKWARD_LAUNCHES: Launches = Launches { fused: 5, aux: 4, blas: 4 };

/// The gradients of the block's inputs and weights.
pub struct BlockGrads {
    /// Of the attention output, `[M, heads · head_dim]`.
    pub dattn: Tensor<bf16>,
    /// Of the residual input `x0`, `[M, d]`.
    pub dx0: Tensor<bf16>,
    pub dwo: Tensor<f32>,
    pub dgamma1: Tensor<f32>,
    /// Rows interleaved like `w_gate_up`.
    pub dw_gate_up: Tensor<f32>,
    pub dw_down: Tensor<f32>,
    pub dgamma2: Tensor<f32>,
    /// Rows in `w_qkv`'s layout (RoPE pairs adjacent).
    pub dw_qkv: Tensor<f32>,
}

/// The backward's intermediate tensors, allocated once for `tokens` rows.
pub struct BackwardState {
    pub tokens: usize,
    /// Gradient of the pre-RoPE qkv, `[M, qkv_width]`.
    pub dz2: Tensor<bf16>,
    pub s2_partials: RowPartials,
    pub s2: Tensor<f32>,
    /// Gradient of the residual stream `x2` (after the second norm's backward), `[M, d]`.
    pub dh2: Tensor<bf16>,
    /// `dγ2` partials.
    pub dgamma2_partials: ColPartials,
    /// `x̂2 ⊙ γ2`, the qkv GEMM's input, `[M, d]`.
    pub xg2: Tensor<bf16>,
    /// Gradient of the gate_up pre-activation, interleaved, `[M, 2f]`.
    pub dz1: Tensor<bf16>,
    pub s1_partials: RowPartials,
    pub s1: Tensor<f32>,
    pub dgamma1_partials: ColPartials,
    /// `x̂1 ⊙ γ1`, the gate_up GEMM's input, `[M, d]`.
    pub xg1: Tensor<bf16>,
    /// Both norm backwards run the config chosen for the larger one (`dz1 · W_gate_up`).
    norm_choice: Choice,
    blas: Cublas,
}

impl BackwardState {
    /// A config that fails [`BlockConfig::check`], or `tokens` outside
    /// `1..=2^31 − 1`, is [`Error::Arg`], before anything is allocated.
    pub fn new(stream: &Stream, c: &BlockConfig, tokens: usize) -> Result<BackwardState, Error> {
        c.check()?;
        super::check_tokens(tokens)?;
        super::ship_tuning()?;
        let (m, d, f) = (tokens, c.hidden, c.ffn);
        let norm_choice = tune::choose(&norm_backward::KERNEL, stream, Problem { m, n: d, k: 2 * f })?;
        Ok(BackwardState {
            tokens,
            dz2: Tensor::zeros(stream, &[m, c.qkv_width()])?,
            s2_partials: RowPartials::new(),
            s2: Tensor::zeros(stream, &[m])?,
            dh2: Tensor::zeros(stream, &[m, d])?,
            dgamma2_partials: ColPartials::new(),
            xg2: Tensor::zeros(stream, &[m, d])?,
            dz1: Tensor::zeros(stream, &[m, 2 * f])?,
            s1_partials: RowPartials::new(),
            s1: Tensor::zeros(stream, &[m])?,
            dgamma1_partials: ColPartials::new(),
            xg1: Tensor::zeros(stream, &[m, d])?,
            norm_choice,
            blas: Cublas::new(stream)?,
        })
    }

    /// Every tensor, for poisoning before a checked run.
    pub fn poison(&mut self) -> Result<(), Error> {
        for t in [&mut self.dz2, &mut self.dh2, &mut self.xg2, &mut self.dz1, &mut self.xg1] {
            t.poison()?;
        }
        for t in [&mut self.s2, &mut self.s1] {
            t.poison()?;
        }
        self.s2_partials.poison()?;
        self.s1_partials.poison()?;
        self.dgamma2_partials.poison()?;
        self.dgamma1_partials.poison()
    }
}

impl BlockGrads {
    /// With the rules of [`BackwardState::new`].
    pub fn new(stream: &Stream, c: &BlockConfig, tokens: usize) -> Result<BlockGrads, Error> {
        c.check()?;
        super::check_tokens(tokens)?;
        let (m, d, f) = (tokens, c.hidden, c.ffn);
        Ok(BlockGrads {
            dattn: Tensor::zeros(stream, &[m, c.attn_width()])?,
            dx0: Tensor::zeros(stream, &[m, d])?,
            dwo: Tensor::zeros(stream, &[d, c.attn_width()])?,
            dgamma1: Tensor::zeros(stream, &[d])?,
            dw_gate_up: Tensor::zeros(stream, &[2 * f, d])?,
            dw_down: Tensor::zeros(stream, &[d, f])?,
            dgamma2: Tensor::zeros(stream, &[d])?,
            dw_qkv: Tensor::zeros(stream, &[c.qkv_width(), d])?,
        })
    }

    pub fn poison(&mut self) -> Result<(), Error> {
        self.dattn.poison()?;
        self.dx0.poison()?;
        for t in [&mut self.dwo, &mut self.dgamma1, &mut self.dw_gate_up, &mut self.dw_down, &mut self.dgamma2, &mut self.dw_qkv] {
            t.poison()?;
        }
        Ok(())
    }
}

/// The block backward on `stream`, no host synchronisation. `fwd` holds the
/// tensors the forward saved for these `attn` `[M, heads·head_dim]` and `pos`
/// `[M]`; `dx2` `[M, d]` and `dqkv` `[M, qkv_width]` are the gradients of its outputs.
#[allow(clippy::too_many_arguments)]
pub fn block_backward(
    stream: &Stream,
    w: &BlockWeights,
    fwd: &BlockState,
    attn: &Tensor<bf16>,
    pos: &Tensor<f32>,
    dx2: &Tensor<bf16>,
    dqkv: &Tensor<bf16>,
    bs: &mut BackwardState,
    g: &mut BlockGrads,
) -> Result<(), Error> {
    let c = &w.config;
    let m = fwd.tokens;
    if bs.tokens != m {
        return Err(Error::arg("bs", format!("backward state for {} tokens, the forward's is for {m}", bs.tokens)));
    }
    if g.dx0.shape() != [m, c.hidden] {
        return Err(Error::arg("g", format!("gradients for shape {:?}, the forward's tokens are {m}", g.dx0.shape())));
    }
    let inv_d = 1.0 / c.hidden as f32;

    rope_backward::launch(
        stream,
        rope_backward::Args { dy: dqkv, y: &fwd.qkv, pos, freq: &w.rope_freq, dz: &mut bs.dz2, dot: &mut bs.s2_partials },
    )?;
    aux::row_sums(stream, &bs.s2_partials, inv_d, &mut bs.s2)?;
    norm_backward::launch_as(
        stream,
        &bs.norm_choice,
        norm_backward::Args {
            a: &bs.dz2,
            b: &w.w_qkv,
            h: &fwd.x2,
            r: &fwd.r2,
            s: &bs.s2,
            gamma: &w.gamma2,
            dres: dx2,
            dx: &mut bs.dh2,
            dgamma: &mut bs.dgamma2_partials,
            xg: &mut bs.xg2,
        },
    )?;
    aux::col_sums(stream, &bs.dgamma2_partials, &mut g.dgamma2)?;
    bs.blas.weight_grad(stream, &bs.dz2, &bs.xg2, &mut g.dw_qkv, false)?;

    dswiglu::launch(stream, dswiglu::Args { a: &bs.dh2, b: &w.w_down, z: &fwd.z1, dz: &mut bs.dz1, dot: &mut bs.s1_partials })?;
    aux::row_sums(stream, &bs.s1_partials, inv_d, &mut bs.s1)?;
    bs.blas.weight_grad(stream, &bs.dh2, &fwd.y1, &mut g.dw_down, false)?;

    norm_backward::launch_as(
        stream,
        &bs.norm_choice,
        norm_backward::Args {
            a: &bs.dz1,
            b: &w.w_gate_up,
            h: &fwd.x1,
            r: &fwd.r1,
            s: &bs.s1,
            gamma: &w.gamma1,
            dres: &bs.dh2,
            dx: &mut g.dx0,
            dgamma: &mut bs.dgamma1_partials,
            xg: &mut bs.xg1,
        },
    )?;
    aux::col_sums(stream, &bs.dgamma1_partials, &mut g.dgamma1)?;
    bs.blas.weight_grad(stream, &bs.dz1, &bs.xg1, &mut g.dw_gate_up, false)?;

    matmul::launch(stream, matmul::Args { a: &g.dx0, b: &w.wo, y: &mut g.dattn })?;
    bs.blas.weight_grad(stream, &g.dx0, attn, &mut g.dwo, false)
}
