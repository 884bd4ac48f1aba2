//! The block backward: the forward's four GEMMs again, transposed, each with
//! its backward epilogue, plus the weight gradients as plain GEMMs.
//!
//! With `dx2` (the gradient of the residual output) and `dqkv` (of the
//! rotated q, k, v, e.g. from attention's backward):
//!
//! 1. `dz2 = RoPE⁻¹(dqkv)` and `Σ dqkv ⊙ qkv` partials → `s2` (a map program);
//!    with QK-norm, `dz2 = QkNorm⁻ᵀ(RoPE⁻¹(dqkv))` from the saved `z2`,
//!    `Σ dz2 ⊙ z2` partials → `s2` and the norm weights' column partials,
//!    summed over the q heads and over the k heads (two aux launches);
//! 2. `dh2 = dx2 + RMSNorm₂ᵀ(dz2 · Wqkv)` with `dγ2` partials and `x̂2 ⊙ γ2`;
//!    `dWqkv = dz2ᵀ · (x̂2 ⊙ γ2)`;
//! 3. `dz1 = dSwiGLU(dh2 · Wd; z1)` with `Σ dz1 ⊙ z1` partials → `s1`;
//!    `dWd = dh2ᵀ · y1`;
//! 4. `dx0 = dh1 = dh2 + RMSNorm₁ᵀ(dz1 · Wgu)` with `dγ1` partials and
//!    `x̂1 ⊙ γ1`; `dWgu = dz1ᵀ · (x̂1 ⊙ γ1)`;
//! 5. `dattn = dh1 · Wo`; `dWo = dh1ᵀ · attn`.
//!
//! Five fused launches, four aux reductions (six with QK-norm), four cuBLAS
//! weight-gradient GEMMs. Norm-weight gradients are f32; weight matrices'
//! gradients f32 or bf16 ([`WeightGrad`]).

use super::programs::{linear_dswiglu as dswiglu, matmul, qk_norm_rope_backward, rmsnorm_backward as norm_backward, rope_backward};
use std::sync::Arc;

use super::{BlockConfig, BlockState, BlockWeights, Owned, QkNorm, Storage, shaped, tokens_of};
use crate::blas::Cublas;
use coda_runtime::{AnyTensor, Choice, ColPartials, Error, Launches, Problem, RowPartials, Stream, Tensor, TensorMut, TensorRef, aux, bf16, tune};

impl BlockConfig {
    /// Launches per backward.
    pub fn backward_launches(&self) -> Launches {
        Launches { fused: 5, aux: 4 + 2 * self.qk_norm as usize, blas: 4 }
    }
}

/// A weight matrix's gradient `dW = dyᵀ · x`, summed in f32 by cuBLAS and
/// written in f32 or in the weights' bf16 (rounded once, nothing to convert
/// after; bench/NOTES.md, session 25); or added to what the tensor holds
/// ([`BlockGrads::accumulate`], best in f32: a bf16 sum over many
/// micro-batches rounds at each).
pub enum WeightGrad<B, F> {
    Bf16(B),
    F32(F),
    /// A frozen weight: its gradient is not computed (one cuBLAS GEMM of the
    /// backward's four fewer; [`BlockConfig::backward_launches`] counts all four).
    Frozen,
}

impl<B: TensorMut<bf16>, F: TensorMut<f32>> WeightGrad<B, F> {
    fn tensor(&self) -> Option<&dyn AnyTensor> {
        match self {
            WeightGrad::Bf16(t) => Some(t),
            WeightGrad::F32(t) => Some(t),
            WeightGrad::Frozen => None,
        }
    }

    fn compute(&mut self, stream: &Stream, blas: &Cublas, dy: &dyn TensorRef<bf16>, x: &dyn TensorRef<bf16>, accumulate: bool) -> Result<(), Error> {
        match self {
            WeightGrad::Bf16(t) => blas.weight_grad(stream, dy, x, t, accumulate),
            WeightGrad::F32(t) => blas.weight_grad(stream, dy, x, t, accumulate),
            WeightGrad::Frozen => Ok(()),
        }
    }
}

impl WeightGrad<Tensor<bf16>, Tensor<f32>> {
    fn zeros(stream: &Stream, dims: &[usize], bf16: bool) -> Result<Self, Error> {
        Ok(if bf16 { WeightGrad::Bf16(Tensor::zeros(stream, dims)?) } else { WeightGrad::F32(Tensor::zeros(stream, dims)?) })
    }

    fn poison(&mut self) -> Result<(), Error> {
        match self {
            WeightGrad::Bf16(t) => t.poison(),
            WeightGrad::F32(t) => t.poison(),
            WeightGrad::Frozen => Ok(()),
        }
    }
}

/// The gradients of the block's inputs and weights.
pub struct BlockGrads<S: Storage = Owned> {
    /// Of the attention output, `[M, heads · head_dim]`.
    pub dattn: S::Bf16,
    /// Of the residual input `x0`, `[M, d]`.
    pub dx0: S::Bf16,
    pub dwo: WeightGrad<S::Bf16, S::F32>,
    pub dgamma1: S::F32,
    /// Rows interleaved like `w_gate_up`.
    pub dw_gate_up: WeightGrad<S::Bf16, S::F32>,
    pub dw_down: WeightGrad<S::Bf16, S::F32>,
    pub dgamma2: S::F32,
    /// Rows in `w_qkv`'s layout (RoPE pairs adjacent).
    pub dw_qkv: WeightGrad<S::Bf16, S::F32>,
    /// QK-norm's weight gradients, `[head_dim]` each, exactly when the config's `qk_norm`.
    pub qk_norm: Option<QkNorm<S::F32>>,
    /// Whether the backward adds the weights' gradients (the four matrices'
    /// and the norm weights') to what their tensors hold instead of writing
    /// them: gradient accumulation over micro-batches, without a pass of
    /// its own (cuBLAS's `beta = 1`, the column sums' `+=`). `dattn` and
    /// `dx0` are always written. Off as constructed. A backward refused
    /// after its first launch (an argument a later launch checks, such as a
    /// borrowed tensor's 16-byte alignment) may have added some of them:
    /// zero them before a retry.
    pub accumulate: bool,
}

/// The backward's intermediate tensors, for `tokens` rows, reused across calls.
pub struct BackwardState<S: Storage = Owned> {
    pub tokens: usize,
    /// Gradient of the pre-RoPE qkv, `[M, qkv_width]`.
    pub dz2: S::Bf16,
    pub s2_partials: RowPartials,
    pub s2: S::F32,
    /// Gradient of the residual stream `x2` (after the second norm's backward), `[M, d]`.
    pub dh2: S::Bf16,
    /// `dγ2` partials.
    pub dgamma2_partials: ColPartials,
    /// `x̂2 ⊙ γ2`, the qkv GEMM's input, `[M, d]`.
    pub xg2: S::Bf16,
    /// Gradient of the gate_up pre-activation, interleaved, `[M, 2f]`.
    pub dz1: S::Bf16,
    pub s1_partials: RowPartials,
    pub s1: S::F32,
    pub dgamma1_partials: ColPartials,
    /// `x̂1 ⊙ γ1`, the gate_up GEMM's input, `[M, d]`.
    pub xg1: S::Bf16,
    /// QK-norm's weight-gradient partials over the qkv columns (0 on v).
    pub qk_gamma_partials: ColPartials,
    /// Both norm backwards run the config chosen for the larger one (`dz1 · W_gate_up`).
    norm_choice: Choice,
    blas: Arc<Cublas>,
}

impl BackwardState {
    /// A config that fails [`BlockConfig::check`], or `tokens` outside
    /// `1..=2^31 − 1`, is [`Error::Arg`], before anything is allocated.
    pub fn new(stream: &Stream, c: &BlockConfig, tokens: usize) -> Result<BackwardState, Error> {
        c.check()?;
        super::check_tokens(tokens)?;
        let (m, d, f) = (tokens, c.hidden, c.ffn);
                let blas = Arc::new(Cublas::new(stream)?);
        BackwardState::from_parts(
            stream,
            c,
            blas,
            Tensor::zeros(stream, &[m, c.qkv_width()])?,
            Tensor::zeros(stream, &[m])?,
            Tensor::zeros(stream, &[m, d])?,
            Tensor::zeros(stream, &[m, d])?,
            Tensor::zeros(stream, &[m, 2 * f])?,
            Tensor::zeros(stream, &[m])?,
            Tensor::zeros(stream, &[m, d])?,
        )
    }
}

impl<S: Storage> BackwardState<S> {
    /// The intermediates in tensors allocated elsewhere (`tokens` = `dz2`'s
    /// rows), each of the shape [`BackwardState::new`] allocates, or
    /// [`Error::Arg`] naming the first that is not; `blas`, a cuBLAS handle
    /// on `stream` (one per stream can serve every backward on it).
    #[allow(clippy::too_many_arguments)]
    pub fn from_parts(
        stream: &Stream,
        c: &BlockConfig,
        blas: Arc<Cublas>,
        dz2: S::Bf16,
        s2: S::F32,
        dh2: S::Bf16,
        xg2: S::Bf16,
        dz1: S::Bf16,
        s1: S::F32,
        xg1: S::Bf16,
    ) -> Result<Self, Error> {
        c.check()?;
        blas.check_stream(stream)?;
        super::ship_tuning()?;
        let m = tokens_of("dz2", &dz2)?;
        let (d, f) = (c.hidden, c.ffn);
        shaped("dz2", &dz2, &[m, c.qkv_width()])?;
        shaped("s2", &s2, &[m])?;
        shaped("dh2", &dh2, &[m, d])?;
        shaped("xg2", &xg2, &[m, d])?;
        shaped("dz1", &dz1, &[m, 2 * f])?;
        shaped("s1", &s1, &[m])?;
        shaped("xg1", &xg1, &[m, d])?;
        let norm_choice = tune::choose(&norm_backward::KERNEL, stream, Problem { m, n: d, k: 2 * f })?;
        Ok(BackwardState {
            tokens: m,
            dz2,
            s2_partials: RowPartials::new(),
            s2,
            dh2,
            dgamma2_partials: ColPartials::new(),
            xg2,
            dz1,
            s1_partials: RowPartials::new(),
            s1,
            dgamma1_partials: ColPartials::new(),
            xg1,
            qk_gamma_partials: ColPartials::new(),
            norm_choice,
            blas,
        })
    }
}

impl BackwardState {

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
        self.dgamma1_partials.poison()?;
        self.qk_gamma_partials.poison()
    }
}

impl BlockGrads {
    /// With the rules of [`BackwardState::new`]; the weight gradients in f32.
    pub fn new(stream: &Stream, c: &BlockConfig, tokens: usize) -> Result<BlockGrads, Error> {
        Self::allocate(stream, c, tokens, false)
    }

    /// As [`BlockGrads::new`], the weight matrices' gradients in bf16.
    pub fn new_bf16_weights(stream: &Stream, c: &BlockConfig, tokens: usize) -> Result<BlockGrads, Error> {
        Self::allocate(stream, c, tokens, true)
    }

    fn allocate(stream: &Stream, c: &BlockConfig, tokens: usize, bf16: bool) -> Result<BlockGrads, Error> {
        c.check()?;
        super::check_tokens(tokens)?;
        let (m, d, f) = (tokens, c.hidden, c.ffn);
        let w = |dims: &[usize]| WeightGrad::zeros(stream, dims, bf16);
        BlockGrads::from_parts(
            c,
            Tensor::zeros(stream, &[m, c.attn_width()])?,
            Tensor::zeros(stream, &[m, d])?,
            w(&[d, c.attn_width()])?,
            Tensor::zeros(stream, &[d])?,
            w(&[2 * f, d])?,
            w(&[d, f])?,
            Tensor::zeros(stream, &[d])?,
            w(&[c.qkv_width(), d])?,
            match c.qk_norm {
                true => Some(QkNorm { q: Tensor::zeros(stream, &[c.head_dim])?, k: Tensor::zeros(stream, &[c.head_dim])? }),
                false => None,
            },
        )
    }
}

impl<S: Storage> BlockGrads<S> {
    /// The gradients in tensors allocated elsewhere (`dx0`'s rows are the
    /// tokens), each of the shape [`BlockGrads::new`] allocates (`qk_norm`
    /// exactly when the config's), or [`Error::Arg`] naming the first that is not.
    #[allow(clippy::too_many_arguments)]
    pub fn from_parts(
        c: &BlockConfig,
        dattn: S::Bf16,
        dx0: S::Bf16,
        dwo: WeightGrad<S::Bf16, S::F32>,
        dgamma1: S::F32,
        dw_gate_up: WeightGrad<S::Bf16, S::F32>,
        dw_down: WeightGrad<S::Bf16, S::F32>,
        dgamma2: S::F32,
        dw_qkv: WeightGrad<S::Bf16, S::F32>,
        qk_norm: Option<QkNorm<S::F32>>,
    ) -> Result<Self, Error> {
        c.check()?;
        let m = tokens_of("dx0", &dx0)?;
        let g = BlockGrads { dattn, dx0, dwo, dgamma1, dw_gate_up, dw_down, dgamma2, dw_qkv, qk_norm, accumulate: false };
        g.check(c, m)?;
        Ok(g)
    }

    /// Every tensor of the shape [`BlockGrads::new`] allocates for `m`
    /// tokens: at construction and, the fields being public, at each backward.
    fn check(&self, c: &BlockConfig, m: usize) -> Result<(), Error> {
        let (d, f) = (c.hidden, c.ffn);
        shaped("dattn", &self.dattn, &[m, c.attn_width()])?;
        shaped("dx0", &self.dx0, &[m, d])?;
        shaped("dgamma1", &self.dgamma1, &[d])?;
        shaped("dgamma2", &self.dgamma2, &[d])?;
        let weights = [("dwo", &self.dwo, [d, c.attn_width()]), ("dw_gate_up", &self.dw_gate_up, [2 * f, d]), ("dw_down", &self.dw_down, [d, f]), ("dw_qkv", &self.dw_qkv, [c.qkv_width(), d])];
        for (name, g, dims) in weights {
            if let Some(t) = g.tensor() {
                shaped(name, t, &dims)?;
            }
        }
        c.check_qk_vectors(self.qk_norm.as_ref())
    }
}

impl BlockGrads {

    pub fn poison(&mut self) -> Result<(), Error> {
        self.dattn.poison()?;
        self.dx0.poison()?;
        for t in [&mut self.dgamma1, &mut self.dgamma2] {
            t.poison()?;
        }
        for w in [&mut self.dwo, &mut self.dw_gate_up, &mut self.dw_down, &mut self.dw_qkv] {
            w.poison()?;
        }
        if let Some(n) = &mut self.qk_norm {
            n.q.poison()?;
            n.k.poison()?;
        }
        Ok(())
    }
}

/// The block backward's inputs, named (`attn` and `dx2` have one type and,
/// at Llama's shapes, one shape): two of the forward's, the gradients of its outputs.
#[derive(Clone, Copy)]
pub struct BackwardInputs<'a> {
    /// The forward's attention output, `[M, heads·head_dim]`.
    pub attn: &'a dyn TensorRef<bf16>,
    /// The forward's token positions, `[M]`.
    pub pos: &'a dyn TensorRef<f32>,
    /// The gradient of the residual output `x2`, `[M, d]`.
    pub dx2: &'a dyn TensorRef<bf16>,
    /// The gradient of `qkv`, `[M, qkv_width]`.
    pub dqkv: &'a dyn TensorRef<bf16>,
}

/// The block backward on `stream`, no host synchronisation; `fwd` holds the
/// tensors the forward saved for `inputs.attn` and `inputs.pos`.
pub fn block_backward<W: Storage, F: Storage, B: Storage, G: Storage>(
    stream: &Stream,
    w: &BlockWeights<W>,
    fwd: &BlockState<F>,
    inputs: BackwardInputs<'_>,
    bs: &mut BackwardState<B>,
    g: &mut BlockGrads<G>,
) -> Result<(), Error> {
    let BackwardInputs { attn, pos, dx2, dqkv } = inputs;
    let c = &w.config;
    let m = fwd.tokens;
    // Everything before the first launch, so that a refusal writes nothing.
    w.check()?;
    crate::check_inputs(m, [("attn", attn, vec![m, c.attn_width()]), ("pos", pos, vec![m]), ("dx2", dx2, vec![m, c.hidden]), ("dqkv", dqkv, vec![m, c.qkv_width()])])?;
    if bs.tokens != m {
        return Err(Error::arg("bs", format!("backward state for {} tokens, the forward's is for {m}", bs.tokens)));
    }
    g.check(c, m)?;
    bs.blas.check_stream(stream)?;
    let inv_d = 1.0 / c.hidden as f32;
    let add = g.accumulate;
    let col_sums: ColSums = if add { aux::col_sums_add } else { aux::col_sums };

    match (&w.qk_norm, &fwd.qk_norm, &mut g.qk_norm) {
        (None, None, None) => rope_backward::launch(
            stream,
            rope_backward::Args { dy: dqkv, y: &fwd.qkv, pos, freq: &w.rope_freq, dz: &mut bs.dz2, dot: &mut bs.s2_partials },
        )?,
        (Some(_), Some(sn), Some(gn)) => {
            let (freq, dz, dot, dgamma) = (&w.rope_freq, &mut bs.dz2, &mut bs.s2_partials, &mut bs.qk_gamma_partials);
            let args = qk_norm_rope_backward::Args { dy: dqkv, z: &sn.z2, pos, freq, gamma: &sn.gamma, eps: c.eps, dz, dot, dgamma };
            qk_norm_rope_backward::launch(stream, args)?;
            let q_cols = c.heads * c.head_dim;
            let sums = if add { aux::col_sums_grouped_add } else { aux::col_sums_grouped };
            sums(stream, &bs.qk_gamma_partials, 0, c.heads, &mut gn.q)?;
            sums(stream, &bs.qk_gamma_partials, q_cols, c.kv_heads, &mut gn.k)?;
        }
        (wn, sn, _) => {
            // The weights match their config (from_parts): the part that differs from them is named.
            let name = if sn.is_some() != wn.is_some() { "fwd" } else { "g" };
            return Err(Error::arg(name, "must have QK-norm's tensors exactly when the weights' config has qk_norm"));
        }
    }
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
    col_sums(stream, &bs.dgamma2_partials, &mut g.dgamma2)?;
    g.dw_qkv.compute(stream, &bs.blas, &bs.dz2, &bs.xg2, add)?;

    dswiglu::launch(stream, dswiglu::Args { a: &bs.dh2, b: &w.w_down, z: &fwd.z1, dz: &mut bs.dz1, dot: &mut bs.s1_partials })?;
    aux::row_sums(stream, &bs.s1_partials, inv_d, &mut bs.s1)?;
    g.dw_down.compute(stream, &bs.blas, &bs.dh2, &fwd.y1, add)?;

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
    col_sums(stream, &bs.dgamma1_partials, &mut g.dgamma1)?;
    g.dw_gate_up.compute(stream, &bs.blas, &bs.dz1, &bs.xg1, add)?;

    matmul::launch(stream, matmul::Args { a: &g.dx0, b: &w.wo, y: &mut g.dattn })?;
    g.dwo.compute(stream, &bs.blas, &g.dx0, attn, add)
}

/// [`aux::col_sums`] or [`aux::col_sums_add`].
type ColSums = fn(&Stream, &ColPartials, &mut dyn TensorMut<f32>) -> Result<(), Error>;
