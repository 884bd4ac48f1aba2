//! The held-out suite: eight programs written from the README alone after
//! the compiler's defaults and cost model were last fitted, never timed
//! before they joined (session 34), so `coda bench --part heldout` checks the
//! defaults on programs nobody tuned for. Built only with the `heldout`
//! feature.

use coda_runtime as coda;

#[coda::epilogue]
/// GPT-OSS's clamped SwiGLU on the biased, interleaved gate/up projection (mlp1): gate ≤ 7, up in ±7, `g·σ(1.702g)·(u+1)`.
pub fn gptoss_swiglu_clamp(acc: Acc, bias: PerCol<bf16>) -> HalfTile<bf16> {
    let x = acc + bias;
    let (gate, up) = unpair(x);
    let gc = min(gate, 7.0);
    let uc = max(min(up, 7.0), -7.0);
    let y = gc * sigmoid(1.702 * gc) * (uc + 1.0);
    y
}

#[coda::epilogue]
/// ViT MLP fc1 under per-tensor FP8 training (Transformer Engine / torchao float8): bias, exact GELU, kept bf16 for the backward and cast to e4m3 with the delayed scale for fc2.
pub fn vit_fc1_gelu_fp8(acc: Acc, bias: PerCol<bf16>, qscale: Scalar) -> (Tile<bf16>, Tile<e4m3>) {
    let h = gelu_exact(acc + bias);
    let q = h * qscale;
    (h, q)
}

#[coda::epilogue]
/// OPT's ReLU FFN backward: dY·W2 masked by the saved ReLU output, with the fc1 bias gradient as column partials.
pub fn relu_bwd_dbias(acc: Acc, h: Tile<bf16>) -> (Tile<bf16>, ColPartial<f32>) {
    let dz = select(h, acc, 0.0);
    let db = col_sum(dz);
    (dz, db)
}

#[coda::epilogue]
/// Gemma 2's LM head with final-logit soft-capping (cap·tanh(z/cap)) and label-smoothed cross-entropy terms: LSE, the row sum of logits and the target logit.
pub fn gemma2_softcap_xent(acc: Acc, cap: Scalar, target: PerRow<i32>) -> (LsePartial<f32>, RowPartial<f32>, PerRow<f32>) {
    let z = cap * tanh(acc / cap);
    let lse = row_lse(z);
    let zsum = row_sum(z);
    let zt = gather(z, target);
    (lse, zsum, zt)
}

#[coda::epilogue]
/// CaiT's LayerScale residual with timm's drop-path (per-sample mask, 1/keep_prob), and the next LayerNorm's Σy and Σy² row partials.
pub fn cait_layerscale_droppath(acc: Acc, resid: Tile<bf16>, bias: PerCol<bf16>, ls: PerCol<f32>, mask: PerRow<bf16>, inv_keep: Scalar) -> (Tile<bf16>, RowPartial<f32>, RowPartial<f32>) {
    let y = resid + (acc + bias) * ls * (mask * inv_keep);
    let s1 = row_sum(y);
    let s2 = row_sum(y * y);
    (y, s1, s2)
}

#[coda::epilogue]
/// Mamba's dt: softplus(dt_proj + dt_bias) clamped to Mamba-2's dt_limit (dt_min, dt_min + dt_span), stored f32 for the selective scan, with the scan's input term dt·u.
pub fn mamba_softplus_dt(acc: Acc, dt_bias: PerCol<f32>, dt_min: Scalar, dt_span: Scalar, u: Tile<bf16>) -> (Tile<f32>, Tile<bf16>) {
    let dt = min(max(softplus(acc + dt_bias), dt_min), dt_min + dt_span);
    let dtu = dt * u;
    (dt, dtu)
}

#[coda::epilogue]
/// T5 v1.1's gated-GELU (tanh form) backward: dY·W_down against the saved interleaved gate/up pre-activations, giving d(gate, up) interleaved.
pub fn t5_geglu_bwd(acc: Acc, gu: DoubleTile<bf16>) -> DoubleTile<bf16> {
    let (g, u) = unpair(gu);
    let s = sigmoid(1.5957691 * (g + 0.044715 * pow(g, 3)));
    let dgelu = s + g * s * (1.0 - s) * 1.5957691 * (1.0 + 0.134145 * g * g);
    let dgu = pair(acc * u * dgelu, acc * g * s);
    dgu
}

#[coda::epilogue]
/// Persimmon-8B's per-head QK LayerNorm (head_dim 64, with weight and bias) applied in the q projection's epilogue.
pub fn persimmon_qk_layernorm(acc: Acc, gamma: PerCol<bf16>, beta: PerCol<bf16>) -> Tile<bf16> {
    let d = acc - group_mean(acc, 64);
    let y = d * rsqrt(group_mean(d * d, 64) + 0.00001) * gamma + beta;
    y
}

/// Every program of the held-out suite, as `crate::all` lists the untuned one.
pub fn all() -> Vec<(&'static str, &'static coda::Kernel, coda::dsl::Program)> {
    vec![
        ("gptoss_swiglu_clamp", &gptoss_swiglu_clamp::KERNEL, gptoss_swiglu_clamp::program()),
        ("vit_fc1_gelu_fp8", &vit_fc1_gelu_fp8::KERNEL, vit_fc1_gelu_fp8::program()),
        ("relu_bwd_dbias", &relu_bwd_dbias::KERNEL, relu_bwd_dbias::program()),
        ("gemma2_softcap_xent", &gemma2_softcap_xent::KERNEL, gemma2_softcap_xent::program()),
        ("cait_layerscale_droppath", &cait_layerscale_droppath::KERNEL, cait_layerscale_droppath::program()),
        ("mamba_softplus_dt", &mamba_softplus_dt::KERNEL, mamba_softplus_dt::program()),
        ("t5_geglu_bwd", &t5_geglu_bwd::KERNEL, t5_geglu_bwd::program()),
        ("persimmon_qk_layernorm", &persimmon_qk_layernorm::KERNEL, persimmon_qk_layernorm::program()),
    ]
}
