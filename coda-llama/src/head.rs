//! The LM-head tail: final RMSNorm → LM head → cross-entropy, forward and
//! backward, without ever holding the `M × V` logits.
//!
//! Forward: `u = x ⊙ γ` and `Σ x²` partials (a map program: in a full model
//! the last down projection's epilogue produces them) → `r`; the head GEMM's
//! epilogue keeps online log-sum-exp partials and gathers the target logit
//! → `lse`, per-row loss and its mean over non-ignored rows.
//!
//! Backward, in chunks of rows so that only `chunk × V` gradients exist at
//! once: the head GEMM again, its epilogue writing `dlogits = (softmax −
//! onehot) / n_valid` and `Σ dlogits ⊙ logits` partials → `s`; then `dx`
//! from `dlogits · W` with the norm's backward in its epilogue (`dγ`
//! partials, `x̂ ⊙ γ`), and `dW += dlogitsᵀ · (x̂ ⊙ γ)` in f32 over the
//! chunks (the first chunk's GEMM and column sums overwrite `dW` and `dγ`:
//! each call writes them anew, unless [`HeadGrads::accumulate`]).
//!
//! Training calls both at once: [`head_forward_backward`] keeps each chunk's
//! logits (bf16) from the forward GEMM's epilogue and takes the gradient from
//! them with a map program, so the head GEMM runs once, not twice.
//!
//! [`HeadLoss`] (the weights' `loss`) adds soft-capped logits, z-loss and
//! label smoothing, each through its own programs (the plain loss runs the
//! plain ones); the logits stay unstored all the same.

use std::ops::Range;
use std::sync::Arc;

use super::programs::{
    cross_entropy_grad as ce_grad, cross_entropy_grad_softcap as ce_grad_softcap, cross_entropy_grad_terms as ce_grad_terms,
    linear_cross_entropy as ce_forward, linear_cross_entropy_backward as ce_backward,
    linear_cross_entropy_backward_softcap as ce_backward_softcap, linear_cross_entropy_backward_terms as ce_backward_terms,
    linear_cross_entropy_save as ce_save, linear_cross_entropy_save_softcap as ce_save_softcap,
    linear_cross_entropy_softcap as ce_forward_softcap, rms_input, rmsnorm_backward_head as norm_backward, scaled_row_dot,
    weight_col_sums,
};
use super::{Owned, Storage, shaped, tokens_of};
use crate::blas::Cublas;
use coda_runtime::{AnyTensor, ColPartials, Error, Launches, LsePartials, RowPartials, RowSlices, Stream, Tensor, TensorRef, aux, bf16};

/// Launches of [`head_forward`] under `loss`: label smoothing adds two
/// fused and two aux launches ([`linear_row_sums`]), or one aux launch if
/// soft-capped.
pub fn head_forward_launches(loss: &HeadLoss) -> Launches {
    let (fused, aux) = loss.row_sum_launches(1);
    Launches { fused: 2 + fused, aux: 3 + aux, blas: 0 }
}

/// Launches of [`head_backward`] with `chunks` row chunks (saturating: no
/// stream counts that many).
pub fn head_backward_launches(chunks: usize) -> Launches {
    let per = |n: usize, fixed: usize| chunks.saturating_mul(n).saturating_add(fixed);
    Launches { fused: per(2, 0), aux: per(2, 1), blas: chunks }
}

/// Launches of [`head_forward_backward`] with `chunks` row chunks under
/// `loss` (saturating; label smoothing adds two fused and two aux launches,
/// or one aux launch per chunk if soft-capped).
pub fn head_forward_backward_launches(chunks: usize, loss: &HeadLoss) -> Launches {
    let per = |n: usize, fixed: usize| chunks.saturating_mul(n).saturating_add(fixed);
    let (fused, aux) = loss.row_sum_launches(chunks);
    Launches { fused: per(3, 1).saturating_add(fused), aux: per(3, 3).saturating_add(aux), blas: chunks }
}

/// The final norm's weight and the LM head `[V, d]` (a `Linear` weight),
/// and the loss they are trained with.
pub struct HeadWeights<S: Storage = Owned> {
    pub gamma: S::Bf16,
    pub w: S::Bf16,
    pub eps: f32,
    /// Plain cross-entropy unless set (checked at each launch).
    pub loss: HeadLoss,
}

/// The tail's loss per non-ignored row, with `y` the logits (soft-capped
/// to `cap · tanh(z / cap)` if `softcap` is set) and `lse` their log-sum-exp:
/// `lse − (1 − ε) · y[target] − (ε / V) · Σ_j y_j + λ · lse²`, averaged
/// over the rows as plain cross-entropy is. PyTorch's
/// `cross_entropy(softcap(z), target, label_smoothing=ε)` plus
/// `λ · mean(lse²)`; the default is plain cross-entropy.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HeadLoss {
    /// Gemma's final-logit soft-capping: a positive, finite `cap`.
    pub softcap: Option<f32>,
    /// PaLM's z-loss weight `λ`: finite, ≥ 0.
    pub z_loss: f32,
    /// The share `ε` of each target's probability spread over the vocabulary, in `[0, 1]`.
    pub label_smoothing: f32,
}

/// The programs' scalars for a checked [`HeadLoss`].
#[derive(Clone, Copy)]
struct LossScalars {
    cap: Option<(f32, f32)>,
    z2: f32,
    keep: f32,
    spread: f32,
    terms: aux::LossTerms,
    /// The loss needs `Σ_j y_j` per row ([`HeadLoss::smooths`]).
    sums: bool,
}

impl HeadLoss {
    /// The loss needs `Σ_j y_j` per row.
    fn smooths(&self) -> bool {
        self.label_smoothing != 0.0
    }

    /// (fused, aux) launches the row sums add to a pass over `chunks` row
    /// chunks: the partial's finisher per chunk if soft-capped, else
    /// [`linear_row_sums`] once.
    fn row_sum_launches(&self, chunks: usize) -> (usize, usize) {
        match (self.smooths(), self.softcap) {
            (false, _) => (0, 0),
            (true, Some(_)) => (0, chunks),
            (true, None) => (2, 2),
        }
    }

    /// The scalars the programs take for a vocabulary of `v`, or [`Error::Arg`]
    /// naming `loss` and the rule a field breaks.
    fn scalars(&self, v: usize) -> Result<LossScalars, Error> {
        let HeadLoss { softcap, z_loss, label_smoothing: eps } = *self;
        if let Some(cap) = softcap
            && !(cap.is_finite() && cap > 0.0)
        {
            return Err(Error::arg("loss", format!("softcap {cap} must be positive and finite")));
        }
        if !(z_loss.is_finite() && z_loss >= 0.0) {
            return Err(Error::arg("loss", format!("z_loss {z_loss} must be finite and ≥ 0")));
        }
        if !(0.0..=1.0).contains(&eps) {
            return Err(Error::arg("loss", format!("label_smoothing {eps} must be in [0, 1]")));
        }
        let spread = eps / v as f32;
        Ok(LossScalars {
            cap: softcap.map(|c| (c, 1.0 / c)),
            z2: 2.0 * z_loss,
            keep: 1.0 - eps,
            spread,
            terms: aux::LossTerms { target: 1.0 - eps, sum: spread, lse_squared: z_loss },
            sums: self.smooths(),
        })
    }
}

/// Which program of a family a loss runs: the plain one, the one with the
/// z-loss and smoothing terms (the gradient's), or the soft-capped one.
/// Partials belong to the program that writes them, so the state keeps one
/// set per variant.
const PLAIN: usize = 0;
const TERMS: usize = 1;
const SOFTCAP: usize = 2;

impl LossScalars {
    /// The variant of the forward programs: `PLAIN`, or `SOFTCAP` (which
    /// also writes the row sums' partials; uncapped, [`linear_row_sums`]).
    fn forward(&self) -> usize {
        if self.cap.is_some() { SOFTCAP } else { PLAIN }
    }
    /// The variant of the gradient programs.
    fn gradient(&self) -> usize {
        if self.cap.is_some() {
            SOFTCAP
        } else if self.z2 != 0.0 || self.spread != 0.0 {
            TERMS
        } else {
            PLAIN
        }
    }
}

impl HeadWeights {
    /// With the rules of [`HeadWeights::from_parts`].
    pub fn new(gamma: Tensor<bf16>, w: Tensor<bf16>, eps: f32) -> Result<HeadWeights, Error> {
        HeadWeights::from_parts(gamma, w, eps)
    }
}

impl<S: Storage> HeadWeights<S> {
    /// `gamma` `[d]` and `w` `[V, d]`, V and d multiples of 8, and `eps`
    /// finite and > 0, else [`Error::Arg`] naming the one at fault.
    pub fn from_parts(gamma: S::Bf16, w: S::Bf16, eps: f32) -> Result<Self, Error> {
        let h = HeadWeights { gamma, w, eps, loss: HeadLoss::default() };
        h.check()?;
        Ok(h)
    }

    /// The rules of [`HeadWeights::from_parts`] and the loss's: at
    /// construction and, the fields being public, at each op.
    fn check(&self) -> Result<(), Error> {
        let eps = self.eps;
        if !(eps.is_finite() && eps > 0.0) {
            return Err(Error::arg("eps", format!("{eps} must be finite and > 0")));
        }
        let d = match *self.gamma.dims() {
            [d] if d > 0 && d % 8 == 0 => d,
            _ => return Err(Error::arg("gamma", format!("shape {:?} must be [d], d a positive multiple of 8", self.gamma.dims()))),
        };
        match *self.w.dims() {
            [v, k] if k == d && v > 0 && v % 8 == 0 => Ok(()),
            _ => Err(Error::arg("w", format!("shape {:?} must be [V, d] with d = {d} (gamma's length), V a multiple of 8", self.w.dims()))),
        }
    }
    pub fn hidden(&self) -> usize {
        // The fields are public: a tensor since replaced by a rank-0 one has
        // no rows (and every launch refuses it), rather than a panic here.
        self.gamma.dims().first().copied().unwrap_or(0)
    }
    pub fn vocab(&self) -> usize {
        self.w.dims().first().copied().unwrap_or(0)
    }
}

/// What the forward writes for `tokens` rows; the backward reads `u`, `r`, `lse`.
pub struct HeadState<S: Storage = Owned> {
    pub tokens: usize,
    /// `x ⊙ γ`, the head GEMM's input, `[M, d]`.
    pub u: S::Bf16,
    sq_partials: RowPartials,
    pub r: S::F32,
    /// Per forward variant (`PLAIN`, `SOFTCAP`; `TERMS`'s stays empty).
    lse_partials: [LsePartials; 3],
    pub lse: S::F32,
    pub target_logit: S::F32,
    /// The soft-capped forward's `Σ_j y_j` partials (label smoothing).
    sum_partials: RowPartials,
    /// `Σ_j y_j` per row for label smoothing, allocated on first use.
    row_sum: Option<Tensor<f32>>,
    /// The buffers of [`linear_row_sums`] (label smoothing, uncapped).
    linear_sums: LinearSums,
    /// The loss variant of the last forward through this state, so that a
    /// backward under weights whose `loss` changed since is refused.
    forward_loss: Option<HeadLoss>,
    /// Per-row loss, 0 for ignored rows, `[M]`.
    pub loss: S::F32,
    /// Mean loss over non-ignored rows, `[1]`.
    pub mean: S::F32,
}

impl HeadState {
    /// `tokens` outside `1..=2^31 − 1` is [`Error::Arg`], before anything is allocated.
    pub fn new<W: Storage>(stream: &Stream, h: &HeadWeights<W>, tokens: usize) -> Result<HeadState, Error> {
        super::check_tokens(tokens)?;
        let (m, d) = (tokens, h.hidden());
        let f32s = |n: usize| Tensor::zeros(stream, &[n]);
        HeadState::from_parts(h, Tensor::zeros(stream, &[m, d])?, f32s(m)?, f32s(m)?, f32s(m)?, f32s(m)?, f32s(1)?)
    }
}

impl<S: Storage> HeadState<S> {
    /// The state in tensors allocated elsewhere (`tokens` = `u`'s rows), each
    /// of the shape [`HeadState::new`] allocates, or [`Error::Arg`] naming the
    /// first that is not.
    pub fn from_parts<W: Storage>(
        h: &HeadWeights<W>,
        u: S::Bf16,
        r: S::F32,
        lse: S::F32,
        target_logit: S::F32,
        loss: S::F32,
        mean: S::F32,
    ) -> Result<Self, Error> {
        super::ship_tuning()?;
        let m = tokens_of("u", &u)?;
        shaped("u", &u, &[m, h.hidden()])?;
        shaped("r", &r, &[m])?;
        shaped("lse", &lse, &[m])?;
        shaped("target_logit", &target_logit, &[m])?;
        shaped("loss", &loss, &[m])?;
        shaped("mean", &mean, &[1])?;
        Ok(HeadState {
            tokens: m,
            u,
            sq_partials: RowPartials::new(),
            r,
            lse_partials: Default::default(),
            lse,
            target_logit,
            sum_partials: RowPartials::new(),
            row_sum: None,
            linear_sums: LinearSums::default(),
            forward_loss: None,
            loss,
            mean,
        })
    }
}

impl HeadState {

    pub fn poison(&mut self) -> Result<(), Error> {
        self.u.poison()?;
        for t in [&mut self.r, &mut self.lse, &mut self.target_logit, &mut self.loss, &mut self.mean] {
            t.poison()?;
        }
        self.sq_partials.poison()?;
        self.sum_partials.poison()?;
        self.row_sum.as_mut().map_or(Ok(()), Tensor::poison)?;
        self.linear_sums.poison()?;
        self.lse_partials.iter_mut().try_for_each(LsePartials::poison)
    }
}

/// The tail forward for the residual stream `x` `[M, d]` and `targets` `[M]`
/// (class ids, or any id outside `[0, V)` such as −100 to ignore a row).
pub fn head_forward<W: Storage, S: Storage>(
    stream: &Stream,
    h: &HeadWeights<W>,
    x: &impl RowSlices<bf16>,
    targets: &impl RowSlices<i32>,
    s: &mut HeadState<S>,
) -> Result<(), Error> {
    h.check()?;
    let loss = h.loss.scalars(h.vocab())?;
    check_targets(targets, s.tokens)?;
    norm_input(stream, h, x, s)?;
    let v = loss.forward();
    let (a, b, r, target, target_logit) = (&s.u, &h.w, &s.r, targets, &mut s.target_logit);
    let lse = &mut s.lse_partials[v];
    match loss.cap {
        Some((cap, inv_cap)) => {
            let sum = &mut s.sum_partials;
            ce_forward_softcap::launch(stream, ce_forward_softcap::Args { a, b, r, target, lse, target_logit, sum, cap, inv_cap })?
        }
        None => ce_forward::launch(stream, ce_forward::Args { a, b, r, target, lse, target_logit })?,
    }
    aux::lse_from_partials(stream, &s.lse_partials[v], &mut s.lse)?;
    let row_sum = match loss.sums {
        true => {
            let row_sum = vector_on_first_use(stream, &mut s.row_sum, s.tokens)?;
            match loss.cap {
                Some(_) => aux::row_sums(stream, &s.sum_partials, 1.0, row_sum)?,
                None => linear_row_sums(stream, &h.w, &s.u, &s.r, &mut s.linear_sums, row_sum)?,
            }
            Some(&*row_sum as &dyn TensorRef<f32>)
        }
        false => None,
    };
    aux::cross_entropy_loss_with(stream, &s.lse, &s.target_logit, row_sum, targets, h.vocab(), loss.terms, &mut s.loss, &mut s.mean)?;
    s.forward_loss = Some(h.loss);
    Ok(())
}

/// The buffers of [`linear_row_sums`]: the partials of both programs and
/// `Σ_v w_v` (allocated on first use; `w`'s partials are ⌈V/128⌉ × d f32,
/// 64 MiB at V = 256k, d = 8192, for a state's life).
#[derive(Default)]
struct LinearSums {
    w_partials: ColPartials,
    w_sums: Option<Tensor<f32>>,
    dot_partials: RowPartials,
}

impl LinearSums {
    fn poison(&mut self) -> Result<(), Error> {
        self.w_partials.poison()?;
        self.dot_partials.poison()?;
        self.w_sums.as_mut().map_or(Ok(()), Tensor::poison)
    }
}

/// Label smoothing's `Σ_j y_j` per row of the uncapped logits `y = r ⊙ (u ·
/// wᵀ)` into `out` `[M]`: `r ⊙ (u · Σ_v w_v)` (two map programs and their
/// finishers; see [`weight_col_sums`]).
fn linear_row_sums<W: TensorRef<bf16>, U: TensorRef<bf16>, R: TensorRef<f32>>(
    stream: &Stream,
    w: &W,
    u: &U,
    r: &R,
    b: &mut LinearSums,
    out: &mut Tensor<f32>,
) -> Result<(), Error> {
    weight_col_sums::launch(stream, weight_col_sums::Args { w, sums: &mut b.w_partials })?;
    let d = *w.dims().last().expect("a checked [V, d] weight");
    let c = vector_on_first_use(stream, &mut b.w_sums, d)?;
    aux::col_sums(stream, &b.w_partials, c)?;
    scaled_row_dot::launch(stream, scaled_row_dot::Args { u, r, c: &*c, dot: &mut b.dot_partials })?;
    aux::row_sums(stream, &b.dot_partials, 1.0, out)
}

/// The f32 vector of `len` in `slot` (the state's `Σ_j y_j`, `Σ_v w_v`), allocated on first use.
fn vector_on_first_use<'a>(stream: &Stream, slot: &'a mut Option<Tensor<f32>>, len: usize) -> Result<&'a mut Tensor<f32>, Error> {
    if slot.is_none() {
        *slot = Some(Tensor::zeros(stream, &[len])?);
    }
    Ok(slot.as_mut().expect("allocated above"))
}

/// The final norm's input half: `u = x ⊙ γ` and `r`, for `x` `[M, d]`.
fn norm_input<W: Storage, S: Storage>(
    stream: &Stream,
    h: &HeadWeights<W>,
    x: &impl RowSlices<bf16>,
    s: &mut HeadState<S>,
) -> Result<(), Error> {
    let m = s.tokens;
    if x.dims() != [m, h.hidden()] {
        return Err(Error::arg("x", format!("shape {:?} must be [{m}, {}]", x.dims(), h.hidden())));
    }
    rms_input::launch(stream, rms_input::Args { x, gamma: &h.gamma, u: &mut s.u, sq: &mut s.sq_partials })?;
    aux::rms_from_partials(stream, &s.sq_partials, h.hidden(), h.eps, &mut s.r)
}

/// `targets` must have one class id per row of the `m` tokens.
fn check_targets(targets: &impl RowSlices<i32>, m: usize) -> Result<(), Error> {
    shaped("targets", targets, &[m])
}

/// The backward's buffers and gradients must be for the forward's tokens.
fn check_backward<W: Storage, B: Storage, G: Storage>(
    stream: &Stream,
    h: &HeadWeights<W>,
    m: usize,
    bs: &HeadBackwardState<B>,
    g: &HeadGrads<G>,
) -> Result<(), Error> {
    if bs.tokens != m {
        return Err(Error::arg("bs", format!("backward buffers for {} tokens, the forward's are {m}", bs.tokens)));
    }
    if g.dx.dims() != [m, h.hidden()] {
        return Err(Error::arg("g", format!("dx of shape {:?} must be [{m}, {}] (the forward's tokens)", g.dx.dims(), h.hidden())));
    }
    bs.blas.check_stream(stream)?;
    Ok(())
}

/// The gradients of the tail's input and weights, for the mean loss.
pub struct HeadGrads<S: Storage = Owned> {
    pub dx: S::Bf16,
    pub dgamma: S::F32,
    pub dw: S::F32,
    /// Whether the backward adds `dgamma` and `dw` to what they hold instead
    /// of writing them (gradient accumulation over micro-batches); `dx` is
    /// always written. Off as constructed. A backward refused after its
    /// first chunk may have added some chunks: zero them before a retry.
    pub accumulate: bool,
}

impl HeadGrads {
    /// `tokens` outside `1..=2^31 − 1` is [`Error::Arg`], before anything is allocated.
    pub fn new<W: Storage>(stream: &Stream, h: &HeadWeights<W>, tokens: usize) -> Result<HeadGrads, Error> {
        super::check_tokens(tokens)?;
        let d = h.hidden();
        HeadGrads::from_parts(h, Tensor::zeros(stream, &[tokens, d])?, Tensor::zeros(stream, &[d])?, Tensor::zeros(stream, &[h.vocab(), d])?)
    }
}

impl<S: Storage> HeadGrads<S> {
    /// The gradients in tensors allocated elsewhere (`dx`'s rows are the
    /// tokens), each of the shape [`HeadGrads::new`] allocates, or
    /// [`Error::Arg`] naming the first that is not.
    pub fn from_parts<W: Storage>(h: &HeadWeights<W>, dx: S::Bf16, dgamma: S::F32, dw: S::F32) -> Result<Self, Error> {
        let m = tokens_of("dx", &dx)?;
        shaped("dx", &dx, &[m, h.hidden()])?;
        shaped("dgamma", &dgamma, &[h.hidden()])?;
        shaped("dw", &dw, &[h.vocab(), h.hidden()])?;
        Ok(HeadGrads { dx, dgamma, dw, accumulate: false })
    }
}

impl HeadGrads {

    pub fn poison(&mut self) -> Result<(), Error> {
        self.dx.poison()?;
        self.dgamma.poison()?;
        self.dw.poison()
    }
}

/// The small buffers of one chunk of `rows` rows (the chunk-sized ones,
/// shared by both chunk shapes, are [`HeadBackwardState`]'s).
struct Chunk {
    rows: usize,
    /// The saving forward's partials: `lse`'s per forward variant, the row
    /// sums' (soft-capped only).
    lse_partials: [LsePartials; 3],
    sum_partials: RowPartials,
    /// `Σ dlogits ⊙ logits` partials of the `linear_cross_entropy_backward`
    /// and `cross_entropy_grad` programs, per gradient variant: one per producing program.
    s_partials: [RowPartials; 3],
    grad_s_partials: [RowPartials; 3],
    s: Tensor<f32>,
    /// The chunk's `dγ` partials, summed into the gradient after each chunk.
    dgamma_partials: ColPartials,
}

impl Chunk {
    fn new(stream: &Stream, rows: usize) -> Result<Chunk, Error> {
        Ok(Chunk {
            rows,
            lse_partials: Default::default(),
            sum_partials: RowPartials::new(),
            s_partials: Default::default(),
            grad_s_partials: Default::default(),
            s: Tensor::zeros(stream, &[rows])?,
            dgamma_partials: ColPartials::new(),
        })
    }

    /// The buffers for a chunk of `rows` rows: the full chunk's or the short last one's.
    fn pick<'a>(full: &'a mut Chunk, last: &'a mut Option<Chunk>, rows: usize) -> &'a mut Chunk {
        // `HeadBackwardState::new` allocated both for its private `tokens` and `chunk_rows`.
        if rows == full.rows { full } else { last.as_mut().expect("allocated for the short chunk") }
    }

    /// Device bytes, the partials as allocated by the launches so far.
    fn bytes(&self) -> usize {
        let allocated = |t: Option<&Tensor<f32>>| t.map_or(0, Tensor::len);
        let rows = std::iter::once(&self.sum_partials).chain(&self.s_partials).chain(&self.grad_s_partials);
        let partials = self.lse_partials.iter().map(|p| allocated(p.tensor())).sum::<usize>()
            + rows.map(|p| allocated(p.tensor())).sum::<usize>()
            + allocated(self.dgamma_partials.tensor());
        4 * (partials + self.s.len())
    }
}

/// The backward's buffers: per-row loss weights, the chunk-sized buffers
/// (`S`: allocated here, or borrowed from a framework's allocator, as
/// [`HeadBackwardState::from_parts`] takes them) and the small buffers of one
/// chunk (and of the shorter last chunk, if any, which uses the first rows of
/// the chunk-sized ones). Its sizes are private: the buffers are sized for them.
pub struct HeadBackwardState<S: Storage = Owned> {
    tokens: usize,
    chunk_rows: usize,
    row_weights: Tensor<f32>,
    /// A chunk's logits, kept by [`head_forward_backward`].
    logits: S::Bf16,
    dlogits: S::Bf16,
    /// A chunk's `x̂ ⊙ γ`, the weight gradient's right operand.
    xg: S::Bf16,
    full: Chunk,
    last: Option<Chunk>,
    blas: Arc<Cublas>,
}

impl HeadBackwardState {
    /// Buffers for `tokens` rows in chunks of `chunk_rows` (a multiple of 256):
    /// two `chunk_rows × V` bf16 buffers (logits and their gradient) and one
    /// `chunk_rows × d`. `tokens` outside `1..=2^31 − 1`, or `chunk_rows` not a
    /// positive multiple of 256, is [`Error::Arg`], before anything is allocated.
    pub fn new<W: Storage>(stream: &Stream, h: &HeadWeights<W>, tokens: usize, chunk_rows: usize) -> Result<HeadBackwardState, Error> {
        let chunk_rows = chunk_rows_for(tokens, chunk_rows)?;
        HeadBackwardState::with_blas(stream, h, tokens, chunk_rows, Arc::new(Cublas::new(stream)?))
    }

    /// As [`HeadBackwardState::new`], with `blas`, a cuBLAS handle on
    /// `stream` (one per stream can serve every backward on it).
    pub fn with_blas<W: Storage>(
        stream: &Stream,
        h: &HeadWeights<W>,
        tokens: usize,
        chunk_rows: usize,
        blas: Arc<Cublas>,
    ) -> Result<HeadBackwardState, Error> {
        let rows = HeadBackwardState::buffer_rows(tokens, chunk_rows)?;
        let (v, d) = (h.vocab(), h.hidden());
        // Poisoned (NaN): every launch writes these before it reads them,
        // and a kernel that read one first would show in its results.
        let buffer = |cols| -> Result<Tensor<bf16>, Error> {
            let mut t = Tensor::zeros(stream, &[rows, cols])?;
            t.poison()?;
            Ok(t)
        };
        HeadBackwardState::from_parts(stream, h, tokens, chunk_rows, blas, buffer(v)?, buffer(v)?, buffer(d)?)
    }

    /// The rows of the chunk-sized buffers for `tokens` rows in chunks of
    /// `chunk_rows` (what [`HeadBackwardState::from_parts`] takes), or
    /// [`Error::Arg`] where [`HeadBackwardState::new`] refuses the two.
    pub fn buffer_rows(tokens: usize, chunk_rows: usize) -> Result<usize, Error> {
        Ok(chunk_rows_for(tokens, chunk_rows)?.min(tokens))
    }
}

impl<S: Storage> HeadBackwardState<S> {
    /// As [`HeadBackwardState::with_blas`], with the chunk-sized buffers
    /// allocated elsewhere (e.g. by PyTorch's caching allocator, so that its
    /// accounting holds them and it reuses their memory after the call):
    /// `logits` and `dlogits` `[rows, V]`, `xg` `[rows, d]` bf16, where `rows`
    /// is `min(chunk_rows, tokens)`; their contents are overwritten before they
    /// are read. A shape that differs is [`Error::Arg`] naming the buffer.
    #[allow(clippy::too_many_arguments)]
    pub fn from_parts<W: Storage>(
        stream: &Stream,
        h: &HeadWeights<W>,
        tokens: usize,
        chunk_rows: usize,
        blas: Arc<Cublas>,
        logits: S::Bf16,
        dlogits: S::Bf16,
        xg: S::Bf16,
    ) -> Result<HeadBackwardState<S>, Error> {
        blas.check_stream(stream)?;
        let rows = HeadBackwardState::buffer_rows(tokens, chunk_rows)?;
        let chunk_rows = chunk_rows_for(tokens, chunk_rows)?;
        shaped("logits", &logits, &[rows, h.vocab()])?;
        shaped("dlogits", &dlogits, &[rows, h.vocab()])?;
        shaped("xg", &xg, &[rows, h.hidden()])?;
        super::ship_tuning()?;
        let rest = tokens % chunk_rows;
        Ok(HeadBackwardState {
            tokens,
            chunk_rows,
            row_weights: Tensor::zeros(stream, &[tokens])?,
            logits,
            dlogits,
            xg,
            full: Chunk::new(stream, rows)?,
            last: if rest > 0 && tokens > chunk_rows { Some(Chunk::new(stream, rest)?) } else { None },
            blas,
        })
    }

    pub fn tokens(&self) -> usize {
        self.tokens
    }

    /// Rows per chunk: as asked, or `tokens` rounded up to 256 if fewer.
    pub fn chunk_rows(&self) -> usize {
        self.chunk_rows
    }

    pub fn chunks(&self) -> usize {
        self.tokens.div_ceil(self.chunk_rows)
    }

    fn chunk_ranges(&self) -> impl Iterator<Item = Range<usize>> + use<S> {
        let (m, step) = (self.tokens, self.chunk_rows);
        (0..m).step_by(step).map(move |r0| r0..(r0 + step).min(m))
    }

    /// Device bytes of the chunk buffers: what the backward holds beyond its
    /// inputs and outputs, `O(chunk_rows · V)`.
    pub fn chunk_bytes(&self) -> usize {
        let elems = |t: &S::Bf16| t.dims().iter().product::<usize>();
        let chunk_sized = 2 * (elems(&self.logits) + elems(&self.dlogits) + elems(&self.xg));
        chunk_sized + self.full.bytes() + self.last.as_ref().map_or(0, Chunk::bytes)
    }
}

/// The rows per chunk for `tokens` rows in chunks of `chunk_rows`: `tokens`
/// in `1..=2^31 − 1` (a GEMM's M), `chunk_rows` a positive multiple of 256,
/// clamped to `tokens` rounded up to 256 (no buffer larger than needed).
fn chunk_rows_for(tokens: usize, chunk_rows: usize) -> Result<usize, Error> {
    super::check_tokens(tokens)?;
    if chunk_rows == 0 || chunk_rows % 256 != 0 {
        return Err(Error::arg("chunk_rows", format!("{chunk_rows} must be a positive multiple of 256")));
    }
    // `tokens` < 2^31: rounding it up cannot overflow.
    Ok(chunk_rows.min(tokens.div_ceil(256) * 256))
}

/// The tail backward for the mean loss: `x` and `targets` as given to
/// [`head_forward`], `fwd` its state.
pub fn head_backward<W: Storage, F: Storage, B: Storage, G: Storage>(
    stream: &Stream,
    h: &HeadWeights<W>,
    x: &impl RowSlices<bf16>,
    targets: &impl RowSlices<i32>,
    fwd: &HeadState<F>,
    bs: &mut HeadBackwardState<B>,
    g: &mut HeadGrads<G>,
) -> Result<(), Error> {
    h.check()?;
    let loss = h.loss.scalars(h.vocab())?;
    check_backward(stream, h, fwd.tokens, bs, g)?;
    if let Some(l) = fwd.forward_loss.filter(|l| *l != h.loss) {
        return Err(Error::arg("fwd", format!("holds a forward of the loss {l:?}; the weights' is now {:?}", h.loss)));
    }
    if x.dims() != fwd.u.dims() {
        return Err(Error::arg("x", format!("shape {:?} must be the forward's {:?}", x.dims(), fwd.u.dims())));
    }
    check_targets(targets, fwd.tokens)?;
    aux::cross_entropy_row_weights(stream, targets, h.vocab(), &mut bs.row_weights)?;
    for (i, rows) in bs.chunk_ranges().enumerate() {
        let c = Chunk::pick(&mut bs.full, &mut bs.last, rows.len());
        let (a, b, r) = (&fwd.u.row_slice(rows.clone())?, &h.w, &fwd.r.row_slice(rows.clone())?);
        let (lse, target, w) = (&fwd.lse.row_slice(rows.clone())?, &targets.row_slice(rows.clone())?, &bs.row_weights.rows(rows.clone())?);
        let (LossScalars { z2, keep, spread, .. }, v) = (loss, loss.gradient());
        {
            let (dlogits, dot) = (&mut bs.dlogits.row_slice_mut(0..rows.len())?, &mut c.s_partials[v]);
            match loss.cap {
                Some((cap, inv_cap)) => ce_backward_softcap::launch(
                    stream,
                    ce_backward_softcap::Args { a, b, r, lse, target, w, dlogits, dot, cap, inv_cap, z2, keep, spread },
                )?,
                None if v == TERMS => {
                    ce_backward_terms::launch(stream, ce_backward_terms::Args { a, b, r, lse, target, w, dlogits, dot, z2, keep, spread })?
                }
                None => ce_backward::launch(stream, ce_backward::Args { a, b, r, lse, target, w, dlogits, dot })?,
            }
        }
        aux::row_sums(stream, &c.s_partials[v], 1.0 / h.hidden() as f32, &mut c.s)?;
        input_and_weight_grads(stream, h, x, fwd, bs, rows, i == 0, g)?;
    }
    Ok(())
}

/// Forward and backward of the tail for the mean loss in one pass over row
/// chunks: the head GEMM's epilogue keeps the chunk's logits beside the
/// log-sum-exp partials, and the gradient comes from them (a map program),
/// so each chunk runs the head GEMM once. Writes everything [`head_forward`]
/// and [`head_backward`] do.
pub fn head_forward_backward<W: Storage, F: Storage, B: Storage, G: Storage>(
    stream: &Stream,
    h: &HeadWeights<W>,
    x: &impl RowSlices<bf16>,
    targets: &impl RowSlices<i32>,
    fs: &mut HeadState<F>,
    bs: &mut HeadBackwardState<B>,
    g: &mut HeadGrads<G>,
) -> Result<(), Error> {
    h.check()?;
    let loss = h.loss.scalars(h.vocab())?;
    check_backward(stream, h, fs.tokens, bs, g)?;
    check_targets(targets, fs.tokens)?;
    norm_input(stream, h, x, fs)?;
    if loss.sums {
        let row_sum = vector_on_first_use(stream, &mut fs.row_sum, fs.tokens)?;
        if loss.cap.is_none() {
            linear_row_sums(stream, &h.w, &fs.u, &fs.r, &mut fs.linear_sums, row_sum)?;
        }
    }
    aux::cross_entropy_row_weights(stream, targets, h.vocab(), &mut bs.row_weights)?;
    for (i, rows) in bs.chunk_ranges().enumerate() {
        let c = Chunk::pick(&mut bs.full, &mut bs.last, rows.len());
        let target = &targets.row_slice(rows.clone())?;
        let (a, b, r) = (&fs.u.row_slice(rows.clone())?, &h.w, &fs.r.row_slice(rows.clone())?);
        let (fv, gv) = (loss.forward(), loss.gradient());
        {
            let (logits, lse) = (&mut bs.logits.row_slice_mut(0..rows.len())?, &mut c.lse_partials[fv]);
            let target_logit = &mut fs.target_logit.row_slice_mut(rows.clone())?;
            match loss.cap {
                Some((cap, inv_cap)) => {
                    let sum = &mut c.sum_partials;
                    ce_save_softcap::launch(stream, ce_save_softcap::Args { a, b, r, target, logits, lse, target_logit, sum, cap, inv_cap })?
                }
                None => ce_save::launch(stream, ce_save::Args { a, b, r, target, logits, lse, target_logit })?,
            }
        }
        aux::lse_from_partials(stream, &c.lse_partials[fv], &mut fs.lse.row_slice_mut(rows.clone())?)?;
        if let Some(row_sum) = fs.row_sum.as_mut().filter(|_| loss.sums && loss.cap.is_some()) {
            aux::row_sums(stream, &c.sum_partials, 1.0, &mut row_sum.rows_mut(rows.clone())?)?;
        }
        {
            let (logits, lse, w) = (&bs.logits.row_slice(0..rows.len())?, &fs.lse.row_slice(rows.clone())?, &bs.row_weights.rows(rows.clone())?);
            let LossScalars { z2, keep, spread, .. } = loss;
            let (dlogits, dot) = (&mut bs.dlogits.row_slice_mut(0..rows.len())?, &mut c.grad_s_partials[gv]);
            match loss.cap {
                Some((cap, inv_cap)) => ce_grad_softcap::launch(
                    stream,
                    ce_grad_softcap::Args { logits, lse, target, w, dlogits, dot, cap, inv_cap, z2, keep, spread },
                )?,
                None if gv == TERMS => {
                    ce_grad_terms::launch(stream, ce_grad_terms::Args { logits, lse, target, w, dlogits, dot, z2, keep, spread })?
                }
                None => ce_grad::launch(stream, ce_grad::Args { logits, lse, target, w, dlogits, dot })?,
            }
        }
        aux::row_sums(stream, &c.grad_s_partials[gv], 1.0 / h.hidden() as f32, &mut c.s)?;
        input_and_weight_grads(stream, h, x, fs, bs, rows, i == 0, g)?;
    }
    let row_sum = fs.row_sum.as_ref().filter(|_| loss.sums).map(|t| t as &dyn TensorRef<f32>);
    aux::cross_entropy_loss_with(stream, &fs.lse, &fs.target_logit, row_sum, targets, h.vocab(), loss.terms, &mut fs.loss, &mut fs.mean)?;
    fs.forward_loss = Some(h.loss);
    Ok(())
}

/// With a chunk's `dlogits` and `s` written: `dx` and the `dγ` partials of its rows (the norm's backward in the epilogue of
/// `dlogits · W`), summed into `dγ`, and `dW (+)= dlogitsᵀ · (x̂ ⊙ γ)` (`+=` after the first chunk or with [`HeadGrads::accumulate`]).
#[allow(clippy::too_many_arguments)]
fn input_and_weight_grads<W: Storage, F: Storage, B: Storage, G: Storage>(
    stream: &Stream,
    h: &HeadWeights<W>,
    x: &impl RowSlices<bf16>,
    fs: &HeadState<F>,
    bs: &mut HeadBackwardState<B>,
    rows: Range<usize>,
    first: bool,
    g: &mut HeadGrads<G>,
) -> Result<(), Error> {
    let HeadBackwardState { blas, full, last, dlogits, xg, .. } = bs;
    let c = Chunk::pick(full, last, rows.len());
    // A short last chunk uses the chunk-sized buffers' first rows.
    let n = rows.len();
    let dlogits = &dlogits.row_slice(0..n)?;
    norm_backward::launch(
        stream,
        norm_backward::Args {
            a: dlogits,
            b: &h.w,
            h: &x.row_slice(rows.clone())?,
            r: &fs.r.row_slice(rows.clone())?,
            s: &c.s,
            gamma: &h.gamma,
            dx: &mut g.dx.row_slice_mut(rows)?,
            dgamma: &mut c.dgamma_partials,
            xg: &mut xg.row_slice_mut(0..n)?,
        },
    )?;
    // Each chunk after the first adds; so does the first where the caller accumulates.
    let add = g.accumulate || !first;
    if add {
        aux::col_sums_add(stream, &c.dgamma_partials, &mut g.dgamma)?;
    } else {
        aux::col_sums(stream, &c.dgamma_partials, &mut g.dgamma)?;
    }
    blas.weight_grad(stream, dlogits, &xg.row_slice(0..n)?, &mut g.dw, add)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::refused;

    /// Chunks are clamped to the tokens rounded up to 256; token counts no
    /// GEMM takes are refused before the rounding, which would wrap to 0 and
    /// divide by it.
    #[test]
    fn chunk_rows_follow_their_rules() {
        assert_eq!(chunk_rows_for(1000, 256).unwrap(), 256);
        assert_eq!(chunk_rows_for(1000, 4096).unwrap(), 1024);
        assert_eq!(chunk_rows_for(i32::MAX as usize, 1 << 20).unwrap(), 1 << 20);
        for tokens in [0, i32::MAX as usize + 1, usize::MAX] {
            refused(chunk_rows_for(tokens, 256), "tokens", "must be in 1..=2^31 − 1");
        }
        for chunk_rows in [0, 100, 257] {
            refused(chunk_rows_for(1000, chunk_rows), "chunk_rows", "must be a positive multiple of 256");
        }
    }

    /// Launch counts of absurd chunk counts saturate instead of wrapping;
    /// label smoothing's row sums add their launches (the GPU tests count
    /// them on the stream).
    #[test]
    fn launch_counts_saturate() {
        let plain = HeadLoss::default();
        let smooth = HeadLoss { label_smoothing: 0.1, ..plain };
        let capped = HeadLoss { softcap: Some(30.0), ..smooth };
        assert_eq!(head_backward_launches(3), Launches { fused: 6, aux: 7, blas: 3 });
        assert_eq!(head_forward_backward_launches(3, &plain), Launches { fused: 10, aux: 12, blas: 3 });
        assert_eq!(head_forward_backward_launches(3, &smooth), Launches { fused: 12, aux: 14, blas: 3 });
        assert_eq!(head_forward_backward_launches(3, &capped), Launches { fused: 10, aux: 15, blas: 3 });
        assert_eq!(head_forward_launches(&smooth), Launches { fused: 4, aux: 5, blas: 0 });
        assert_eq!(head_forward_launches(&capped), Launches { fused: 2, aux: 4, blas: 0 });
        let max = Launches { fused: usize::MAX, aux: usize::MAX, blas: usize::MAX };
        assert_eq!(head_backward_launches(usize::MAX), max);
        assert_eq!(head_forward_backward_launches(usize::MAX / 3 + 1, &plain), Launches { blas: usize::MAX / 3 + 1, ..max });
        assert_eq!(head_forward_backward_launches(usize::MAX / 3 + 1, &capped), Launches { blas: usize::MAX / 3 + 1, ..max });
    }
}
