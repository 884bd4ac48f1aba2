//! The Llama block's epilogue programs, written in our own DSL and compiled
//! by this crate's build script. Own configs: what the timed search picked most
//! at the block's and `coda bench`'s shapes on an H200 (bench/NOTES.md), mostly
//! ping-pong 128×128 c1×2 (one warpgroup's epilogue hides under the other's
//! mainloop); build.rs adds the other winners, the files in `tuning/` say where.

use coda_runtime as coda;

#[coda::epilogue(tile = (128, 128), cluster = (1, 2), schedule = pingpong)]
/// o_proj / down epilogue: residual add, RMSNorm weight, partial Σh² for the
/// deferred norm (`h = acc + residual`, `u = h ⊙ γ`).
pub fn linear_residual_rms_partial(acc: Acc, residual: Tile<bf16>, gamma: PerCol<bf16>)
    -> (Tile<bf16>, Tile<bf16>, RowPartial<f32>) {
    let h = acc + residual;
    let u = h * gamma;
    let sq = row_sum(h * h);
    (h, u, sq)
}

#[coda::epilogue(tile = (128, 128), cluster = (1, 2), schedule = pingpong)]
/// gate_up epilogue: the deferred RMSNorm row scale, then SwiGLU over the
/// interleaved (gate, up) columns: `[M, 2f]` accumulator → `[M, f]`.
pub fn linear_rowscale_swiglu(acc: Acc, r: PerRow<f32>) -> HalfTile<bf16> {
    let z = acc * r;
    let (g, u) = unpair(z);
    let y = silu(g) * u;
    y
}

#[coda::epilogue(tile = (128, 128), cluster = (1, 2), schedule = pingpong)]
/// As `linear_rowscale_swiglu`, also saving the pre-activation `z` for the backward.
pub fn linear_rowscale_swiglu_save(acc: Acc, r: PerRow<f32>) -> (Tile<bf16>, HalfTile<bf16>) {
    let z = acc * r;
    let (g, u) = unpair(z);
    let y = silu(g) * u;
    (z, y)
}

#[coda::epilogue(tile = (128, 128), cluster = (1, 2), schedule = pingpong)]
/// qkv epilogue: the deferred row scale, then RoPE on adjacent column pairs by
/// `pos[m] · freq[n]` (`freq` is 0 on the v columns, which stay as they are).
pub fn linear_rowscale_rope(acc: Acc, r: PerRow<f32>, pos: PerRow<f32>, freq: PerCol<f32>) -> Tile<bf16> {
    let q = acc * r;
    let (x0, x1) = unpair(q);
    // One angle per column pair: sin and cos once per pair, not per column.
    let (angle, _) = unpair(pos * freq);
    let c = cos(angle);
    let s = sin(angle);
    let y = pair(x0 * c - x1 * s, x0 * s + x1 * c);
    y
}

#[coda::epilogue(tile = (128, 128), cluster = (1, 2), schedule = pingpong)]
/// LM-head forward: the deferred row scale, online log-sum-exp partials and
/// the target logit; the logits are never written.
pub fn linear_cross_entropy(acc: Acc, r: PerRow<f32>, target: PerRow<i32>) -> (LsePartial<f32>, PerRow<f32>) {
    let logits = acc * r;
    let lse = row_lse(logits);
    let target_logit = gather(logits, target);
    (lse, target_logit)
}

#[coda::epilogue(tile = (128, 128), cluster = (1, 2), schedule = pingpong, b_layout = kn)]
/// RMSNorm backward in the epilogue of `g = dy · W` (B is the weight `W`
/// `[N_out, d]` read as `[K, N]`): with `x̂ = r ⊙ h`,
/// `dx = dres + r ⊙ (g ⊙ γ − x̂ ⊙ s)` (added into the residual gradient),
/// `dγ` partials `Σ_m g ⊙ x̂`, and `x̂ ⊙ γ` stored for the weight gradient.
pub fn rmsnorm_backward(acc: Acc, h: Tile<bf16>, r: PerRow<f32>, s: PerRow<f32>, gamma: PerCol<bf16>, dres: Tile<bf16>)
    -> (Tile<bf16>, ColPartial<f32>, Tile<bf16>) {
    let xhat = h * r;
    let dx = dres + r * (acc * gamma - xhat * s);
    let dgamma = col_sum(acc * xhat);
    let xg = xhat * gamma;
    (dx, dgamma, xg)
}

#[coda::epilogue(b_layout = kn)]
/// As `rmsnorm_backward` for a norm whose input has no other consumer (the
/// final norm before the LM head): `dx = r ⊙ (g ⊙ γ − x̂ ⊙ s)`.
pub fn rmsnorm_backward_head(acc: Acc, h: Tile<bf16>, r: PerRow<f32>, s: PerRow<f32>, gamma: PerCol<bf16>)
    -> (Tile<bf16>, ColPartial<f32>, Tile<bf16>) {
    let xhat = h * r;
    let dx = r * (acc * gamma - xhat * s);
    let dgamma = col_sum(acc * xhat);
    let xg = xhat * gamma;
    (dx, dgamma, xg)
}

#[coda::epilogue]
/// RoPE backward, a map program over the gradient `dy` of the rotated qkv
/// `y`: the inverse rotation gives `dz`, and `Σ dy ⊙ y` partials give the
/// norm statistic `s` (rotation is orthogonal: `Σ dz ⊙ z = Σ dy ⊙ y`).
pub fn rope_backward(dy: Tile<bf16>, y: Tile<bf16>, pos: PerRow<f32>, freq: PerCol<f32>) -> (Tile<bf16>, RowPartial<f32>) {
    let (g0, g1) = unpair(dy);
    let (angle, _) = unpair(pos * freq);
    let c = cos(angle);
    let s = sin(angle);
    let dz = pair(g0 * c + g1 * s, g1 * c - g0 * s);
    let dot = row_sum(dy * y);
    (dz, dot)
}

#[coda::epilogue(b_layout = kn)]
/// SwiGLU backward in the epilogue of `dy = dh · W_down` (`[M, f]`): with the
/// saved pre-activation pairs `z = (g, u)`, writes `dz` interleaved `[M, 2f]`
/// and the `Σ dz ⊙ z` partials for the norm before gate_up.
pub fn linear_dswiglu(acc: Acc, z: DoubleTile<bf16>) -> (DoubleTile<bf16>, RowPartial<f32>) {
    let (g, u) = unpair(z);
    let sg = sigmoid(g);
    let dg = acc * u * sg * (1.0 + g * (1.0 - sg));
    let du = acc * g * sg;
    let dz = pair(dg, du);
    let dot = row_sum(dg * g + du * u);
    (dz, dot)
}

#[coda::epilogue(tile = (128, 128), cluster = (1, 2), schedule = pingpong)]
/// LM-head backward for a chunk of rows: recomputes the logits `r ⊙ acc`,
/// writes `dlogits = (softmax − onehot(target)) · w` (`w[m]`: the loss's
/// gradient for row m, 0 for ignored rows) and the `Σ dlogits ⊙ logits`
/// partials for the final norm.
pub fn linear_cross_entropy_backward(acc: Acc, r: PerRow<f32>, lse: PerRow<f32>, target: PerRow<i32>, w: PerRow<f32>)
    -> (Tile<bf16>, RowPartial<f32>) {
    let logits = acc * r;
    let dlogits = (exp(logits - lse) - onehot(target)) * w;
    let dot = row_sum(dlogits * logits);
    (dlogits, dot)
}

#[coda::epilogue]
/// The final norm's input half when no GEMM before it is ours: `u = x ⊙ γ`
/// and the `Σ x²` partials (a map program over the residual stream `x`).
pub fn rms_input(x: Tile<bf16>, gamma: PerCol<bf16>) -> (Tile<bf16>, RowPartial<f32>) {
    let u = x * gamma;
    let sq = row_sum(x * x);
    (u, sq)
}

#[coda::epilogue(tile = (128, 128), cluster = (1, 2), schedule = pingpong, b_layout = kn)]
/// A plain GEMM `A · B` (e.g. the o_proj input gradient `dh · W_o`).
pub fn matmul(acc: Acc) -> Tile<bf16> {
    let y = acc;
    y
}

#[coda::epilogue(tile = (128, 192), cluster = (2, 1), schedule = pingpong)]
/// LM-head forward that keeps the logits (bf16) for `cross_entropy_grad`:
/// `linear_cross_entropy` plus the logits `r ⊙ acc` themselves.
pub fn linear_cross_entropy_save(acc: Acc, r: PerRow<f32>, target: PerRow<i32>)
    -> (Tile<bf16>, LsePartial<f32>, PerRow<f32>) {
    let logits = acc * r;
    let lse = row_lse(logits);
    let target_logit = gather(logits, target);
    (logits, lse, target_logit)
}

#[coda::epilogue]
/// Cross-entropy's gradient from saved logits (a map program): `dlogits =
/// (softmax − onehot(target)) · w` and the `Σ dlogits ⊙ logits` partials.
pub fn cross_entropy_grad(logits: Tile<bf16>, lse: PerRow<f32>, target: PerRow<i32>, w: PerRow<f32>)
    -> (Tile<bf16>, RowPartial<f32>) {
    let dlogits = (exp(logits - lse) - onehot(target)) * w;
    let dot = row_sum(dlogits * logits);
    (dlogits, dot)
}

// The LM-head loss variants (`HeadLoss`): soft-capped logits
// `y = cap · tanh(z / cap)` (Gemma), z-loss `λ · lse²` (PaLM) and label
// smoothing `ε` (which needs `Σ_j y_j` per row). With `ε` and `λ` the
// gradient with respect to `y` is `(softmax · (1 + 2λ·lse) − (1 − ε) ·
// onehot(target) − ε/V) · w`; the scalars are `z2 = 2λ`, `keep = 1 − ε`,
// `spread = ε / V`, `inv_cap = 1 / cap`. Logits are never stored beyond a
// chunk, as in the plain programs above.

#[coda::epilogue]
/// Label smoothing's `Σ_j y_j` per row for uncapped logits, in two map
/// programs: the logits `y = r ⊙ (u · wᵀ)` are linear in the head weight
/// `w` `[V, d]`, so `Σ_j y_j = r ⊙ (u · Σ_v w_v)`. This one: the partials
/// of `w`'s column sums. A row partial in the head GEMM's epilogue instead
/// held that kernel to a 128 × 128 tile (a larger one spills) and cost the
/// d = 2048 tail ~3% on an H100 (bench/NOTES.md, session 42). Soft-capped
/// logits are not linear in `w`: their programs keep the partial.
pub fn weight_col_sums(w: Tile<bf16>) -> ColPartial<f32> {
    let sums = col_sum(w);
    sums
}

#[coda::epilogue]
/// `r ⊙ (u · c)` partials for a column vector `c` (a map program over
/// `u` `[M, d]`): with `c = Σ_v w_v`, each row's `Σ_j y_j`.
pub fn scaled_row_dot(u: Tile<bf16>, r: PerRow<f32>, c: PerCol<f32>) -> RowPartial<f32> {
    let dot = row_sum(u * c * r);
    dot
}

#[coda::epilogue(tile = (128, 128), cluster = (1, 2), schedule = pingpong)]
/// `linear_cross_entropy` of the soft-capped logits, plus each tile's row
/// sums of them (for label smoothing).
pub fn linear_cross_entropy_softcap(acc: Acc, r: PerRow<f32>, target: PerRow<i32>, cap: Scalar, inv_cap: Scalar)
    -> (LsePartial<f32>, PerRow<f32>, RowPartial<f32>) {
    let y = cap * tanh(acc * r * inv_cap);
    let lse = row_lse(y);
    let target_logit = gather(y, target);
    let sum = row_sum(y);
    (lse, target_logit, sum)
}

#[coda::epilogue(tile = (128, 128), cluster = (1, 2), schedule = pingpong)]
/// `linear_cross_entropy_backward` with z-loss and label smoothing.
pub fn linear_cross_entropy_backward_terms(
    acc: Acc, r: PerRow<f32>, lse: PerRow<f32>, target: PerRow<i32>, w: PerRow<f32>, z2: Scalar, keep: Scalar, spread: Scalar,
) -> (Tile<bf16>, RowPartial<f32>) {
    let logits = acc * r;
    let p = exp(logits - lse) * (1.0 + z2 * lse);
    let dlogits = (p - onehot(target) * keep - spread) * w;
    let dot = row_sum(dlogits * logits);
    (dlogits, dot)
}

#[coda::epilogue(tile = (128, 128), cluster = (1, 2), schedule = pingpong)]
/// `linear_cross_entropy_backward_terms` through the soft cap: the gradient
/// with respect to `y`, times `dy/dz = 1 − tanh²(z / cap)`.
pub fn linear_cross_entropy_backward_softcap(
    acc: Acc, r: PerRow<f32>, lse: PerRow<f32>, target: PerRow<i32>, w: PerRow<f32>,
    cap: Scalar, inv_cap: Scalar, z2: Scalar, keep: Scalar, spread: Scalar,
) -> (Tile<bf16>, RowPartial<f32>) {
    let logits = acc * r;
    let t = tanh(logits * inv_cap);
    let p = exp(cap * t - lse) * (1.0 + z2 * lse);
    let dlogits = (p - onehot(target) * keep - spread) * w * (1.0 - t * t);
    let dot = row_sum(dlogits * logits);
    (dlogits, dot)
}

// The soft-capped saving variant runs 128×128 tiles: in
// `linear_cross_entropy_save`'s 128×192 the cap and the extra row partial
// spill registers (172 bytes, ptxas; 128 without the partial). A similar
// build cost ~40% on the H200 (session 10); on an H100 it ran no faster
// than 128×128 (session 42; bench/NOTES.md).
#[coda::epilogue(tile = (128, 128), cluster = (1, 2), schedule = pingpong)]
/// `linear_cross_entropy_softcap` that keeps the logits before the cap
/// (the gradient's `1 − tanh²` is computed from them, not from capped bf16).
pub fn linear_cross_entropy_save_softcap(acc: Acc, r: PerRow<f32>, target: PerRow<i32>, cap: Scalar, inv_cap: Scalar)
    -> (Tile<bf16>, LsePartial<f32>, PerRow<f32>, RowPartial<f32>) {
    let logits = acc * r;
    let y = cap * tanh(logits * inv_cap);
    let lse = row_lse(y);
    let target_logit = gather(y, target);
    let sum = row_sum(y);
    (logits, lse, target_logit, sum)
}

#[coda::epilogue]
/// `cross_entropy_grad` with z-loss and label smoothing.
pub fn cross_entropy_grad_terms(
    logits: Tile<bf16>, lse: PerRow<f32>, target: PerRow<i32>, w: PerRow<f32>, z2: Scalar, keep: Scalar, spread: Scalar,
) -> (Tile<bf16>, RowPartial<f32>) {
    let p = exp(logits - lse) * (1.0 + z2 * lse);
    let dlogits = (p - onehot(target) * keep - spread) * w;
    let dot = row_sum(dlogits * logits);
    (dlogits, dot)
}

#[coda::epilogue]
/// `cross_entropy_grad_terms` through the soft cap, from the logits before it.
pub fn cross_entropy_grad_softcap(
    logits: Tile<bf16>, lse: PerRow<f32>, target: PerRow<i32>, w: PerRow<f32>,
    cap: Scalar, inv_cap: Scalar, z2: Scalar, keep: Scalar, spread: Scalar,
) -> (Tile<bf16>, RowPartial<f32>) {
    let t = tanh(logits * inv_cap);
    let p = exp(cap * t - lse) * (1.0 + z2 * lse);
    let dlogits = (p - onehot(target) * keep - spread) * w * (1.0 - t * t);
    let dot = row_sum(dlogits * logits);
    (dlogits, dot)
}

// QK-norm ([`crate::BlockConfig::qk_norm`]): the qkv epilogue and its backward.

#[coda::epilogue(tile = (128, 128), cluster = (1, 2), schedule = pingpong)]
/// qkv epilogue with QK-norm ([`crate::BlockConfig::qk_norm`]): the deferred
/// row scale gives `z`, saved for the backward; each q and k head's 128
/// columns are RMS-normalised and scaled by `gamma` (the v heads, where
/// `freq` is 0, pass through), then rotated as in `linear_rowscale_rope`.
pub fn linear_rowscale_qk_norm_rope(acc: Acc, r: PerRow<f32>, gamma: PerCol<bf16>, eps: Scalar, pos: PerRow<f32>, freq: PerCol<f32>)
    -> (Tile<bf16>, Tile<bf16>) {
    let z = acc * r;
    let normed = z * rsqrt(group_mean(z * z, 128) + eps) * gamma;
    let q = select(freq, normed, z);
    let (x0, x1) = unpair(q);
    let (angle, _) = unpair(pos * freq);
    let c = cos(angle);
    let s = sin(angle);
    let y = pair(x0 * c - x1 * s, x0 * s + x1 * c);
    (z, y)
}

// 128 × 128: a 128 × 256 tile stages two Tile inputs and two PerCol
// vectors past the shared memory two mainloop stages leave.
#[coda::epilogue(tile = (128, 128))]
/// QK-norm + RoPE backward, a map program over the gradient `dy` of the
/// rotated qkv and the saved pre-norm `z`: the inverse rotation gives `dn`;
/// on the q and k heads (`freq` ≠ 0), with `ẑ = ρ z` and `ρ = rsqrt(mean(z²)
/// + eps)` over the head, `dz = ρ (dn γ − ẑ · mean(dn γ ẑ))`, on v `dz = dn`.
/// Also the `Σ dz ⊙ z` partials (the statistic `s` of the norm before the
/// qkv GEMM) and the `dγ` column partials `Σ_m dn ⊙ ẑ` (0 on v).
pub fn qk_norm_rope_backward(dy: Tile<bf16>, z: Tile<bf16>, pos: PerRow<f32>, freq: PerCol<f32>, gamma: PerCol<bf16>, eps: Scalar)
    -> (Tile<bf16>, RowPartial<f32>, ColPartial<f32>) {
    let (g0, g1) = unpair(dy);
    let (angle, _) = unpair(pos * freq);
    let c = cos(angle);
    let s = sin(angle);
    let dn = pair(g0 * c + g1 * s, g1 * c - g0 * s);
    let rho = rsqrt(group_mean(z * z, 128) + eps);
    // ẑ · mean(dn γ ẑ) = z · ρ² mean(dn (γ z)): formed from dn and z alone,
    // so no ẑ or dn γ is held across the reduction beside them.
    let k = rho * rho * group_mean(dn * (gamma * z), 128);
    let dzq = rho * (dn * gamma - z * k);
    let dz = select(freq, dzq, dn);
    let dot = row_sum(dz * z);
    let dgamma = col_sum(select(freq, dn * (z * rho), 0.0));
    (dz, dot, dgamma)
}

/// Every program of this crate (for tools: `coda inspect`, `coda tune`).
pub fn kernels() -> [&'static coda::Kernel; 24] {
    [
        &linear_residual_rms_partial::KERNEL,
        &linear_rowscale_swiglu::KERNEL,
        &linear_rowscale_swiglu_save::KERNEL,
        &linear_rowscale_rope::KERNEL,
        &linear_cross_entropy::KERNEL,
        &rmsnorm_backward::KERNEL,
        &rmsnorm_backward_head::KERNEL,
        &rope_backward::KERNEL,
        &linear_dswiglu::KERNEL,
        &linear_cross_entropy_backward::KERNEL,
        &rms_input::KERNEL,
        &matmul::KERNEL,
        &linear_cross_entropy_save::KERNEL,
        &cross_entropy_grad::KERNEL,
        &weight_col_sums::KERNEL,
        &scaled_row_dot::KERNEL,
        &linear_cross_entropy_softcap::KERNEL,
        &linear_cross_entropy_backward_terms::KERNEL,
        &linear_cross_entropy_backward_softcap::KERNEL,
        &linear_cross_entropy_save_softcap::KERNEL,
        &cross_entropy_grad_terms::KERNEL,
        &cross_entropy_grad_softcap::KERNEL,
        &linear_rowscale_qk_norm_rope::KERNEL,
        &qk_norm_rope_backward::KERNEL,
    ]
}
