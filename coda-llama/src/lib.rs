//! The non-attention part of a Llama block as GEMM-epilogue programs.
//!
//! Forward (the paper's ablation block): o_proj → +residual → RMSNorm →
//! gate_up → SwiGLU → down → +residual → RMSNorm → qkv → RoPE, as four fused
//! GEMM launches and two aux reductions:
//!
//! 1. `x1 = attn · Woᵀ + x0`, `u1 = x1 ⊙ γ1`, Σx1² partials → `r1`;
//! 2. `y1 = SwiGLU(r1 ⊙ (u1 · Wguᵀ))` (and the pre-activation `z1` saved);
//! 3. `x2 = y1 · Wdᵀ + x1`, `u2 = x2 ⊙ γ2`, Σx2² partials → `r2`;
//! 4. `qkv = RoPE(r2 ⊙ (u2 · Wqkvᵀ))`, or with [`BlockConfig::qk_norm`]
//!    `RoPE(QkNorm(z2))` of `z2 = r2 ⊙ (u2 · Wqkvᵀ)`, each q and k head
//!    RMS-normalised in the same epilogue (one more aux launch lays the norm
//!    weights over the qkv columns).
//!
//! Layouts: activations row-major `[M, *]` bf16; weights like a PyTorch
//! `Linear` (`[out, in]`), with the gate/up rows interleaved and each head's
//! RoPE pairs adjacent ([`layout`] converts ordinary checkpoints).
//!
//! The weights, states and gradients hold their tensors in a [`Storage`]:
//! [`Owned`] tensors this crate allocates (`new`, `upload`), or memory
//! borrowed from a framework ([`Borrowed`], e.g. PyTorch's through DLPack,
//! put together with `from_parts`), both checked against the config.

mod backward;
pub mod blas;
mod head;
pub mod layout;
pub mod programs;

pub use backward::{BackwardInputs, BackwardState, BlockGrads, WeightGrad, block_backward};
pub use head::{
    HeadBackwardState, HeadGrads, HeadLoss, HeadState, HeadWeights, head_backward, head_backward_launches, head_forward, head_forward_launches,
    head_forward_backward, head_forward_backward_launches,
};

use std::marker::PhantomData;

use coda_runtime::{AnyTensor, Error, Launches, RawTensor, RowPartials, RowSlices, Stream, Tensor, TensorMut, TensorRef, aux, bf16};
use programs::{
    linear_residual_rms_partial as residual_norm, linear_rowscale_qk_norm_rope as qk_norm_rope, linear_rowscale_rope as rope,
    linear_rowscale_swiglu_save as swiglu,
};

/// Shapes of one block.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockConfig {
    /// Hidden size `d`.
    pub hidden: usize,
    /// FFN width `f`.
    pub ffn: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub eps: f32,
    pub rope_theta: f32,
    /// QK-norm (Qwen3, OLMo 2): each q and k head RMS-normalised over its
    /// `head_dim` columns (with `eps`) and scaled by [`QkNorm`]'s weights,
    /// before RoPE, inside the qkv GEMM's epilogue. Needs `head_dim` = 128.
    pub qk_norm: bool,
}

impl From<&BlockConfig> for layout::FfnDims {
    fn from(c: &BlockConfig) -> Self {
        layout::FfnDims { ffn: c.ffn, hidden: c.hidden }
    }
}

impl From<&BlockConfig> for layout::QkvDims {
    fn from(c: &BlockConfig) -> Self {
        layout::QkvDims { heads: c.heads, kv_heads: c.kv_heads, head_dim: c.head_dim, hidden: c.hidden }
    }
}

/// QK-norm's two `[head_dim]` vectors: the weights (in the kernels' pair
/// order: [`layout::rope_pairs_adjacent`] of a checkpoint's `q_norm.weight`
/// as one head of one column), or their gradients.
#[derive(Clone, Debug, PartialEq)]
pub struct QkNorm<T> {
    pub q: T,
    pub k: T,
}

impl BlockConfig {
    /// Width of the attention output, the o_proj input: `heads · head_dim`
    /// (saturating: a config whose widths overflow fails [`BlockConfig::check`]).
    pub fn attn_width(&self) -> usize {
        self.heads.saturating_mul(self.head_dim)
    }
    /// Width of the qkv projection: `(heads + 2 · kv_heads) · head_dim` (saturating).
    pub fn qkv_width(&self) -> usize {
        self.heads.saturating_add(self.kv_heads.saturating_mul(2)).saturating_mul(self.head_dim)
    }

    /// Checks the rules the kernels need; names the field that breaks one.
    /// Every GEMM dimension (`hidden`, `2 · ffn`, the qkv width, which is at
    /// least the attention width) must fit the launchers' `int`.
    pub fn check(&self) -> Result<(), Error> {
        let rule = |name: &str, ok: bool, why: &str| if ok { Ok(()) } else { Err(Error::arg(name, why)) };
        let gemm_dim = |w: usize| w <= i32::MAX as usize;
        rule("hidden", self.hidden > 0 && self.hidden % 8 == 0, "must be a positive multiple of 8")?;
        rule("hidden", gemm_dim(self.hidden), "must be ≤ 2^31 − 1 (a GEMM dimension)")?;
        rule("ffn", self.ffn > 0 && self.ffn % 8 == 0, "must be a positive multiple of 8")?;
        rule("ffn", gemm_dim(self.ffn.saturating_mul(2)), "2 · ffn must be ≤ 2^31 − 1 (a GEMM dimension)")?;
        rule("head_dim", self.head_dim > 0 && self.head_dim % 8 == 0, "must be a positive multiple of 8")?;
        rule("heads", self.heads > 0, "must be ≥ 1")?;
        rule("kv_heads", self.kv_heads > 0 && self.heads % self.kv_heads == 0, "must divide heads (GQA)")?;
        rule("heads", gemm_dim(self.qkv_width()), "(heads + 2 · kv_heads) · head_dim must be ≤ 2^31 − 1 (a GEMM dimension)")?;
        rule("eps", self.eps.is_finite() && self.eps > 0.0, "must be finite and > 0")?;
        rule("qk_norm", !self.qk_norm || self.head_dim == 128, "needs head_dim = 128 (the epilogue normalises each head as one group of 128 columns)")?;
        // An infinite θ would make every frequency past the first 0, which the
        // programs read as a v column's (not rotated, not normalised).
        rule("rope_theta", self.rope_theta.is_finite() && self.rope_theta > 1.0, "must be finite and > 1")
    }

    /// The RoPE frequency of every qkv output column: `θ^(−2i/head_dim)` for
    /// pair `i` of a q or k head (both columns of the pair), 0 for v. A
    /// config that fails [`BlockConfig::check`] is its [`Error::Arg`].
    pub fn rope_freq(&self) -> Result<Vec<f32>, Error> {
        self.check()?;
        let rotated = (self.heads + self.kv_heads) * self.head_dim;
        Ok((0..self.qkv_width())
            .map(|n| {
                if n >= rotated {
                    return 0.0;
                }
                let i = (n % self.head_dim) / 2;
                (self.rope_theta as f64).powf(-2.0 * i as f64 / self.head_dim as f64) as f32
            })
            .collect())
    }

    /// `part` (QK-norm's weights, state or gradients) is given exactly when `qk_norm` is set.
    fn check_qk_norm<T>(&self, name: &str, part: Option<&T>) -> Result<(), Error> {
        match (self.qk_norm, part.is_some()) {
            (true, false) => Err(Error::arg(name, "is needed: the config has qk_norm set")),
            (false, true) => Err(Error::arg(name, "must be None: the config has no qk_norm")),
            _ => Ok(()),
        }
    }

    /// QK-norm's weights or their gradients: given exactly when `qk_norm` is set, `[head_dim]` each.
    fn check_qk_vectors<T: AnyTensor>(&self, v: Option<&QkNorm<T>>) -> Result<(), Error> {
        self.check_qk_norm("qk_norm", v)?;
        if let Some(n) = v {
            shaped("qk_norm.q", &n.q, &[self.head_dim])?;
            shaped("qk_norm.k", &n.k, &[self.head_dim])?;
        }
        Ok(())
    }
}

/// The rule of a token count: the M of every GEMM, so `1..=2^31 − 1`.
pub(crate) fn check_tokens(tokens: usize) -> Result<(), Error> {
    if tokens == 0 || tokens > i32::MAX as usize {
        return Err(Error::arg("tokens", format!("{tokens} must be in 1..=2^31 − 1 (a GEMM's M)")));
    }
    Ok(())
}

/// Where a block's or the tail's tensors live: the types of its bf16, f32
/// and i32 tensors, each usable as a launch's input and output, whole or
/// by runs of rows.
pub trait Storage {
    type Bf16: RowSlices<bf16> + TensorMut<bf16>;
    type F32: RowSlices<f32> + TensorMut<f32>;
    type I32: RowSlices<i32> + TensorMut<i32>;
}

/// Device tensors this crate allocated ([`Tensor`]).
pub enum Owned {}

impl Storage for Owned {
    type Bf16 = Tensor<bf16>;
    type F32 = Tensor<f32>;
    type I32 = Tensor<i32>;
}

/// Device memory borrowed for `'a` from elsewhere ([`RawTensor`], whose
/// safety contract its creator has kept).
pub struct Borrowed<'a>(PhantomData<&'a ()>);

impl<'a> Storage for Borrowed<'a> {
    type Bf16 = RawTensor<'a, bf16>;
    type F32 = RawTensor<'a, f32>;
    type I32 = RawTensor<'a, i32>;
}

/// `t` must have shape `want`: the rule named after the field.
fn shaped(name: &str, t: &(impl AnyTensor + ?Sized), want: &[usize]) -> Result<(), Error> {
    if t.dims() == want {
        Ok(())
    } else {
        Err(Error::arg(name, format!("shape {:?} must be {want:?}", t.dims())))
    }
}

/// The rows of a state's first tensor, `[M, …]`: its token count, checked.
fn tokens_of(name: &str, t: &impl AnyTensor) -> Result<usize, Error> {
    let tokens = t.dims().first().copied().unwrap_or(0);
    check_tokens(tokens).map_err(|_| Error::arg(name, format!("shape {:?} must be [M, …] with M in 1..=2^31 − 1", t.dims())))?;
    Ok(tokens)
}

/// The weights of one block, on the device, in the kernels' layout. The
/// fields are public (to borrow, swap or load tensors); each op checks the
/// config and every shape again. `rope_freq` holds the config's frequencies
/// as device memory: a `rope_theta` changed after construction is not seen.
pub struct BlockWeights<S: Storage = Owned> {
    pub config: BlockConfig,
    /// o_proj `[d, heads · head_dim]`
    pub wo: S::Bf16,
    pub gamma1: S::Bf16,
    /// gate_up `[2f, d]`, rows interleaved `[g0, u0, g1, u1, …]`
    pub w_gate_up: S::Bf16,
    /// down `[d, f]`
    pub w_down: S::Bf16,
    pub gamma2: S::Bf16,
    /// qkv `[(heads + 2·kv_heads) · head_dim, d]`, each head's RoPE pairs adjacent
    pub w_qkv: S::Bf16,
    /// Per-column RoPE frequencies `[qkv_width]`, the values [`BlockConfig::rope_freq`] gives.
    pub rope_freq: S::F32,
    /// QK-norm's weights, `[head_dim]` each, exactly when the config's `qk_norm`.
    pub qk_norm: Option<QkNorm<S::Bf16>>,
}

/// Host weights in the kernels' layout (see [`layout`] for checkpoint conversion).
pub struct HostWeights {
    pub wo: Vec<bf16>,
    pub gamma1: Vec<bf16>,
    pub w_gate_up: Vec<bf16>,
    pub w_down: Vec<bf16>,
    pub gamma2: Vec<bf16>,
    pub w_qkv: Vec<bf16>,
    /// QK-norm's weights, exactly when the config's `qk_norm`.
    pub qk_norm: Option<QkNorm<Vec<bf16>>>,
}

impl BlockConfig {
    /// The weights' shapes, by field name, in [`BlockWeights`]' order.
    fn weight_shapes(&self) -> [(&'static str, Vec<usize>); 7] {
        let (d, f) = (self.hidden, self.ffn);
        [
            ("wo", vec![d, self.attn_width()]),
            ("gamma1", vec![d]),
            ("w_gate_up", vec![2 * f, d]),
            ("w_down", vec![d, f]),
            ("gamma2", vec![d]),
            ("w_qkv", vec![self.qkv_width(), d]),
            ("rope_freq", vec![self.qkv_width()]),
        ]
    }
}

impl BlockWeights {
    /// A `config` that fails [`BlockConfig::check`], or a weight of the wrong
    /// length, is [`Error::Arg`], before anything is copied.
    pub fn upload(stream: &Stream, config: BlockConfig, w: &HostWeights) -> Result<BlockWeights, Error> {
        config.check()?;
        config.check_qk_norm("qk_norm", w.qk_norm.as_ref())?;
        let [wo, gamma1, w_gate_up, w_down, gamma2, w_qkv, rope_freq] = config.weight_shapes();
        let qk = w.qk_norm.as_ref().map(|n| [(("qk_norm.q", vec![config.head_dim]), &n.q), (("qk_norm.k", vec![config.head_dim]), &n.k)]);
        let all = [(&wo, &w.wo), (&gamma1, &w.gamma1), (&w_gate_up, &w.w_gate_up), (&w_down, &w.w_down), (&gamma2, &w.gamma2), (&w_qkv, &w.w_qkv)];
        for ((name, shape), v) in all.into_iter().chain(qk.iter().flatten().map(|(s, v)| (s, *v))) {
            if v.len() != shape.iter().product::<usize>() {
                return Err(Error::arg(name, format!("{} elements, shape {shape:?} needs {}", v.len(), shape.iter().product::<usize>())));
            }
        }
        let up = |(_, shape): (&str, Vec<usize>), v: &[bf16]| Tensor::from_host(stream, v, &shape);
        BlockWeights::from_parts(
            config,
            up(wo, &w.wo)?,
            up(gamma1, &w.gamma1)?,
            up(w_gate_up, &w.w_gate_up)?,
            up(w_down, &w.w_down)?,
            up(gamma2, &w.gamma2)?,
            up(w_qkv, &w.w_qkv)?,
            Tensor::from_host(stream, &config.rope_freq()?, &rope_freq.1)?,
            match &w.qk_norm {
                Some(n) => Some(QkNorm { q: up(("qk_norm.q", vec![config.head_dim]), &n.q)?, k: up(("qk_norm.k", vec![config.head_dim]), &n.k)? }),
                None => None,
            },
        )
    }
}

impl<S: Storage> BlockWeights<S> {
    /// The weights from tensors already on the device, in the kernels'
    /// layout; a `config` that fails [`BlockConfig::check`] or a tensor of
    /// another shape is [`Error::Arg`] naming it, as is `qk_norm` given
    /// where the config has none or missing where it has. `rope_freq` must
    /// hold [`BlockConfig::rope_freq`]'s values (not checked: it is device
    /// memory; with QK-norm its zeros also mark the v columns, which are not normalised).
    #[allow(clippy::too_many_arguments)]
    pub fn from_parts(
        config: BlockConfig,
        wo: S::Bf16,
        gamma1: S::Bf16,
        w_gate_up: S::Bf16,
        w_down: S::Bf16,
        gamma2: S::Bf16,
        w_qkv: S::Bf16,
        rope_freq: S::F32,
        qk_norm: Option<QkNorm<S::Bf16>>,
    ) -> Result<Self, Error> {
        let w = BlockWeights { config, wo, gamma1, w_gate_up, w_down, gamma2, w_qkv, rope_freq, qk_norm };
        w.check()?;
        Ok(w)
    }

    /// The config's rules and every tensor's shape under it: at construction
    /// and, the fields being public, at each forward and backward.
    pub(crate) fn check(&self) -> Result<(), Error> {
        let c = &self.config;
        c.check()?;
        let [wo, gamma1, w_gate_up, w_down, gamma2, w_qkv, rope_freq] = c.weight_shapes();
        shaped(wo.0, &self.wo, &wo.1)?;
        shaped(gamma1.0, &self.gamma1, &gamma1.1)?;
        shaped(w_gate_up.0, &self.w_gate_up, &w_gate_up.1)?;
        shaped(w_down.0, &self.w_down, &w_down.1)?;
        shaped(gamma2.0, &self.gamma2, &gamma2.1)?;
        shaped(w_qkv.0, &self.w_qkv, &w_qkv.1)?;
        shaped(rope_freq.0, &self.rope_freq, &rope_freq.1)?;
        c.check_qk_vectors(self.qk_norm.as_ref())
    }
}

/// Each input `(name, tensor, shape)` of an op for `m` tokens has its shape.
pub(crate) fn check_inputs<const N: usize>(m: usize, inputs: [(&str, &dyn AnyTensor, Vec<usize>); N]) -> Result<(), Error> {
    for (name, t, want) in inputs {
        if t.dims() != want.as_slice() {
            return Err(Error::arg(name, format!("shape {:?} must be {want:?} (state for {m} tokens)", t.dims())));
        }
    }
    Ok(())
}

/// Everything the forward writes, for `tokens` rows, reused across calls:
/// the outputs (`x2`, `qkv`) and the tensors the backward needs.
pub struct BlockState<S: Storage = Owned> {
    pub tokens: usize,
    /// Residual stream after o_proj, `[M, d]`.
    pub x1: S::Bf16,
    /// `x1 ⊙ γ1`, `[M, d]`.
    pub u1: S::Bf16,
    /// Σx1² partials.
    pub sq1: RowPartials,
    /// Inverse RMS of `x1`, `[M]`.
    pub r1: S::F32,
    /// gate_up pre-activation (interleaved), `[M, 2f]`.
    pub z1: S::Bf16,
    /// SwiGLU output, `[M, f]`.
    pub y1: S::Bf16,
    /// Residual stream after down, the block's residual output, `[M, d]`.
    pub x2: S::Bf16,
    pub u2: S::Bf16,
    pub sq2: RowPartials,
    pub r2: S::F32,
    /// Rotated q, k and v, `[M, (heads + 2·kv_heads) · head_dim]`.
    pub qkv: S::Bf16,
    /// What QK-norm saves, exactly when the config's `qk_norm`.
    pub qk_norm: Option<QkNormState<S>>,
}

/// The forward's QK-norm tensors.
pub struct QkNormState<S: Storage = Owned> {
    /// The qkv before QK-norm and RoPE, `[M, qkv_width]`: the backward's input.
    pub z2: S::Bf16,
    /// The norm weights laid over the qkv columns, `[qkv_width]` (q's over the
    /// q heads, k's over the k heads, 0 on v), written by each forward.
    pub gamma: S::Bf16,
}

impl BlockState {
    /// A config that fails [`BlockConfig::check`], or `tokens` outside
    /// `1..=2^31 − 1`, is [`Error::Arg`], before anything is allocated.
    pub fn new(stream: &Stream, c: &BlockConfig, tokens: usize) -> Result<BlockState, Error> {
        c.check()?;
        check_tokens(tokens)?;
        let (m, d, f) = (tokens, c.hidden, c.ffn);
                BlockState::from_parts(
            c,
            Tensor::zeros(stream, &[m, d])?,
            Tensor::zeros(stream, &[m, d])?,
            Tensor::zeros(stream, &[m])?,
            Tensor::zeros(stream, &[m, 2 * f])?,
            Tensor::zeros(stream, &[m, f])?,
            Tensor::zeros(stream, &[m, d])?,
            Tensor::zeros(stream, &[m, d])?,
            Tensor::zeros(stream, &[m])?,
            Tensor::zeros(stream, &[m, c.qkv_width()])?,
            match c.qk_norm {
                true => Some(QkNormState { z2: Tensor::zeros(stream, &[m, c.qkv_width()])?, gamma: Tensor::zeros(stream, &[c.qkv_width()])? }),
                false => None,
            },
        )
    }

    /// Every tensor, for poisoning before a checked run.
    pub fn poison(&mut self) -> Result<(), Error> {
        for t in [&mut self.x1, &mut self.u1, &mut self.z1, &mut self.y1, &mut self.x2, &mut self.u2, &mut self.qkv] {
            t.poison()?;
        }
        if let Some(n) = &mut self.qk_norm {
            n.z2.poison()?;
            n.gamma.poison()?;
        }
        for t in [&mut self.r1, &mut self.r2] {
            t.poison()?;
        }
        self.sq1.poison()?;
        self.sq2.poison()
    }
}

impl<S: Storage> BlockState<S> {
    /// The state in tensors allocated elsewhere (`tokens` = `x1`'s rows),
    /// each of the shape [`BlockState::new`] allocates (`qk_norm` exactly
    /// when the config's), or [`Error::Arg`] naming the first that is not.
    #[allow(clippy::too_many_arguments)]
    pub fn from_parts(
        c: &BlockConfig,
        x1: S::Bf16,
        u1: S::Bf16,
        r1: S::F32,
        z1: S::Bf16,
        y1: S::Bf16,
        x2: S::Bf16,
        u2: S::Bf16,
        r2: S::F32,
        qkv: S::Bf16,
        qk_norm: Option<QkNormState<S>>,
    ) -> Result<Self, Error> {
        c.check()?;
        ship_tuning()?;
        let m = tokens_of("x1", &x1)?;
        let (d, f) = (c.hidden, c.ffn);
        let s = BlockState { tokens: m, x1, u1, sq1: RowPartials::new(), r1, z1, y1, x2, u2, sq2: RowPartials::new(), r2, qkv, qk_norm };
        shaped("x1", &s.x1, &[m, d])?;
        shaped("u1", &s.u1, &[m, d])?;
        shaped("r1", &s.r1, &[m])?;
        shaped("z1", &s.z1, &[m, 2 * f])?;
        shaped("y1", &s.y1, &[m, f])?;
        shaped("x2", &s.x2, &[m, d])?;
        shaped("u2", &s.u2, &[m, d])?;
        shaped("r2", &s.r2, &[m])?;
        shaped("qkv", &s.qkv, &[m, c.qkv_width()])?;
        c.check_qk_norm("qk_norm", s.qk_norm.as_ref())?;
        if let Some(n) = &s.qk_norm {
            shaped("qk_norm.z2", &n.z2, &[m, c.qkv_width()])?;
            shaped("qk_norm.gamma", &n.gamma, &[c.qkv_width()])?;
        }
        Ok(s)
    }
}

/// Registers the timed searches shipped for this crate's programs
/// ([`SHIPPED_TUNING`]) with the tuner; an entry counts on the GPU it was run
/// on, where this build compiled the same source. The ops' states call it;
/// call it yourself before launching [`programs`] directly.
pub fn ship_tuning() -> Result<(), Error> {
    SHIPPED_TUNING.iter().try_for_each(|&entries| coda_runtime::tune::ship(entries))
}

/// The shipped searches, one file a GPU (`tuning/<gpu>.json`, as the tuning
/// cache file holds them; bench/NOTES.md says how each was run).
pub const SHIPPED_TUNING: &[&str] = include!(concat!(env!("OUT_DIR"), "/shipped_tuning.rs"));

impl BlockConfig {
    /// Launches per forward: four fused GEMMs and two aux reductions, and
    /// with `qk_norm` the aux launch that lays its weights over the columns.
    pub fn forward_launches(&self) -> Launches {
        Launches { fused: 4, aux: 2 + self.qk_norm as usize, blas: 0 }
    }
}

/// The block forward's inputs, named: `attn` and `x0` have one type and, where
/// `heads · head_dim = d` (Llama's shapes), one shape, so positional
/// arguments swapped would run and give a wrong block.
#[derive(Clone, Copy)]
pub struct ForwardInputs<'a> {
    /// The attention output, `[M, heads·head_dim]`.
    pub attn: &'a dyn TensorRef<bf16>,
    /// The residual stream, `[M, d]`.
    pub x0: &'a dyn TensorRef<bf16>,
    /// Token positions, `[M]`.
    pub pos: &'a dyn TensorRef<f32>,
}

/// The block forward on `stream`, no host synchronisation.
pub fn block_forward<W: Storage, S: Storage>(
    stream: &Stream,
    w: &BlockWeights<W>,
    inputs: ForwardInputs<'_>,
    s: &mut BlockState<S>,
) -> Result<(), Error> {
    let ForwardInputs { attn, x0, pos } = inputs;
    let c = &w.config;
    let m = s.tokens;
    w.check()?;
    check_inputs(m, [("attn", attn, vec![m, c.attn_width()]), ("x0", x0, vec![m, c.hidden]), ("pos", pos, vec![m])])?;
    if w.qk_norm.is_some() != s.qk_norm.is_some() {
        // The weights match their config (checked above), so the state is the part that differs.
        return Err(Error::arg("s", "must have QK-norm's tensors exactly when the weights' config has qk_norm"));
    }
    residual_norm::launch(
        stream,
        residual_norm::Args { a: attn, b: &w.wo, residual: x0, gamma: &w.gamma1, h: &mut s.x1, u: &mut s.u1, sq: &mut s.sq1 },
    )?;
    aux::rms_from_partials(stream, &s.sq1, c.hidden, c.eps, &mut s.r1)?;
    swiglu::launch(stream, swiglu::Args { a: &s.u1, b: &w.w_gate_up, r: &s.r1, z: &mut s.z1, y: &mut s.y1 })?;
    residual_norm::launch(
        stream,
        residual_norm::Args { a: &s.y1, b: &w.w_down, residual: &s.x1, gamma: &w.gamma2, h: &mut s.x2, u: &mut s.u2, sq: &mut s.sq2 },
    )?;
    aux::rms_from_partials(stream, &s.sq2, c.hidden, c.eps, &mut s.r2)?;
    // Both QK-norm parts or neither (checked above).
    match (&w.qk_norm, &mut s.qk_norm) {
        (Some(wn), Some(sn)) => {
            aux::repeat_two(stream, &wn.q, c.heads, &wn.k, c.kv_heads, &mut sn.gamma)?;
            let (r, freq) = (&s.r2, &w.rope_freq);
            qk_norm_rope::launch(stream, qk_norm_rope::Args { a: &s.u2, b: &w.w_qkv, r, gamma: &sn.gamma, eps: c.eps, pos, freq, z: &mut sn.z2, y: &mut s.qkv })
        }
        _ => rope::launch(stream, rope::Args { a: &s.u2, b: &w.w_qkv, r: &s.r2, pos, freq: &w.rope_freq, y: &mut s.qkv }),
    }
}

/// Asserts that `r` is an [`Error::Arg`] naming `name` whose rule mentions `rule`.
#[cfg(test)]
fn refused<T: std::fmt::Debug>(r: Result<T, Error>, name: &str, rule: &str) {
    match r {
        Err(Error::Arg { name: n, rule: r }) => assert!(n == name && r.contains(rule), "`{n}`: {r}"),
        other => panic!("expected `{name}` refused for `{rule}`, got {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn llama_8b() -> BlockConfig {
        BlockConfig { hidden: 4096, ffn: 14336, heads: 32, kv_heads: 8, head_dim: 128, eps: 1e-5, rope_theta: 500000.0, qk_norm: false }
    }

    /// Widths past a GEMM's `int` are refused by the config's check, so
    /// `rope_freq` never allocates by an overflowed width; the width
    /// accessors saturate instead of wrapping.
    #[test]
    fn config_widths_fit_a_gemm() {
        let c = llama_8b();
        c.check().unwrap();
        assert_eq!(c.rope_freq().unwrap().len(), c.qkv_width());
        let huge = BlockConfig { heads: 1 << 62, kv_heads: 1 << 62, head_dim: 8, ..c };
        assert_eq!((huge.attn_width(), huge.qkv_width()), (usize::MAX, usize::MAX));
        refused(huge.check(), "heads", "(heads + 2 · kv_heads) · head_dim must be ≤ 2^31 − 1");
        refused(huge.rope_freq(), "heads", "must be ≤ 2^31 − 1");
        refused(BlockConfig { heads: 1 << 28, kv_heads: 1 << 28, ..c }.check(), "heads", "must be ≤ 2^31 − 1");
        refused(BlockConfig { ffn: 1 << 62, ..c }.check(), "ffn", "2 · ffn must be ≤ 2^31 − 1");
        refused(BlockConfig { ffn: 1 << 30, ..c }.check(), "ffn", "2 · ffn must be ≤ 2^31 − 1");
        refused(BlockConfig { hidden: 1 << 40, ..c }.check(), "hidden", "must be ≤ 2^31 − 1");
        refused(BlockConfig { head_dim: 0, ..c }.rope_freq(), "head_dim", "positive multiple of 8");
        BlockConfig { qk_norm: true, ..c }.check().unwrap();
        refused(BlockConfig { qk_norm: true, head_dim: 64, ..c }.check(), "qk_norm", "needs head_dim = 128");
    }

    /// `eps` and `rope_theta` are finite: an infinite θ makes every pair's
    /// frequency past the first 0, which the programs read as a v column's
    /// (QK-norm would skip those columns without an error).
    #[test]
    fn config_scalars_are_finite() {
        let c = llama_8b();
        for eps in [0.0, -1e-5, f32::INFINITY, f32::NAN] {
            refused(BlockConfig { eps, ..c }.check(), "eps", "must be finite and > 0");
        }
        for rope_theta in [1.0, f32::INFINITY, f32::NAN] {
            refused(BlockConfig { rope_theta, ..c }.rope_freq(), "rope_theta", "must be finite and > 1");
        }
        assert!(c.rope_freq().unwrap()[..c.head_dim].iter().all(|&f| f > 0.0 && f.is_finite()));
    }

    /// Token counts are a GEMM's M: 1 to 2^31 − 1.
    #[test]
    fn token_counts_fit_a_gemm() {
        check_tokens(1).unwrap();
        check_tokens(i32::MAX as usize).unwrap();
        for tokens in [0, i32::MAX as usize + 1, usize::MAX] {
            refused(check_tokens(tokens), "tokens", "must be in 1..=2^31 − 1");
        }
    }

    /// Each shipped file holds one GPU's searches of this crate's programs,
    /// each entry carrying the source key of a config this build compiles
    /// (they were run on it), so all apply; the H200's covers 72 shapes.
    #[test]
    fn shipped_tuning_applies_to_this_build() {
        let compiled = |e: &coda_runtime::tune::Entry| {
            programs::kernels().iter().any(|k| {
                k.name() == e.program && k.variants().iter().any(|v| v.config().name() == e.config && v.key() == e.key)
            })
        };
        let mut gpus = vec![];
        for text in SHIPPED_TUNING {
            let entries: Vec<coda_runtime::tune::Entry> = serde_json::from_str(text).unwrap();
            let gpu = &entries[0].gpu;
            assert!(entries.iter().all(|e| &e.gpu == gpu && e.program.starts_with("coda-llama::")), "{gpu}");
            assert_eq!(entries.iter().filter(|e| compiled(e)).count(), entries.len(), "{gpu}");
            gpus.push((gpu.clone(), entries.len()));
        }
        assert!(gpus.contains(&("NVIDIA H200".to_string(), 72)), "{gpus:?}");
        ship_tuning().unwrap();
        ship_tuning().unwrap();
    }
}
