//! Epilogue programs of the kinds the README describes, written from the
//! README alone and built as a user's crate builds them: `#[coda::epilogue]`
//! with no options (each program in the default config pair the build
//! compiles), no tuning cache. `coda bench` times them against the bare cuBLASLt GEMM of
//! their shape (the untuned suite); `tests/gpu_user.rs` checks them against
//! the interpreter.

use coda_runtime as coda;

#[cfg(feature = "heldout")]
pub mod heldout;

#[coda::epilogue]
/// GeGLU (tanh form) over interleaved (gate, up) columns.
pub fn geglu(acc: Acc) -> HalfTile<bf16> {
    let (g, u) = unpair(acc);
    let y = gelu(g) * u;
    y
}

#[coda::epilogue]
/// Squared ReLU after a bias (Primer).
pub fn relu2_bias(acc: Acc, bias: PerCol<bf16>) -> Tile<bf16> {
    let h = max(acc + bias, 0.0);
    let y = h * h;
    y
}

#[coda::epilogue]
/// Residual add with LayerNorm's statistics: per-row partial Σh and Σh².
pub fn layernorm_stats(acc: Acc, res: Tile<bf16>) -> (Tile<bf16>, RowPartial<f32>, RowPartial<f32>) {
    let h = acc + res;
    let s1 = row_sum(h);
    let s2 = row_sum(h * h);
    (h, s1, s2)
}

#[coda::epilogue]
/// Soft-capped logits (Gemma) into the log-sum-exp partials and the target
/// logit, the logits never stored.
pub fn softcap_lse(acc: Acc, target: PerRow<i32>, cap: Scalar) -> (LsePartial<f32>, PerRow<f32>) {
    let z = cap * tanh(acc / cap);
    let lse = row_lse(z);
    let t = gather(z, target);
    (lse, t)
}

#[coda::epilogue]
/// BLAS's `α·A·Bᵀ + β·C`.
pub fn alpha_beta(acc: Acc, c: Tile<bf16>, alpha: Scalar, beta: Scalar) -> Tile<bf16> {
    let y = alpha * acc + beta * c;
    y
}

#[coda::epilogue]
/// Dequantisation by a row and a column scale, a sigmoid gate, and
/// per-column partial sums of the gated value.
pub fn dequant_sigmoid(acc: Acc, row_scale: PerRow<f32>, col_scale: PerCol<f32>) -> (Tile<bf16>, ColPartial<f32>) {
    let x = acc * row_scale * col_scale;
    let y = x * sigmoid(x);
    let s = col_sum(y);
    (y, s)
}

#[coda::epilogue]
/// The SwiGLU backward: the incoming gradient (the accumulator) against the
/// saved (gate, up) pairs gives the interleaved (d gate, d up) pairs.
pub fn swiglu_backward(acc: Acc, gu: DoubleTile<bf16>) -> DoubleTile<bf16> {
    let (g, u) = unpair(gu);
    let s = sigmoid(g);
    let dg = acc * u * s * (1.0 + g * (1.0 - s));
    let du = acc * g * s;
    let d = pair(dg, du);
    d
}

#[coda::epilogue]
/// SwiGLU with its pre-activation kept for the backward.
pub fn swiglu_keep(acc: Acc) -> (Tile<bf16>, HalfTile<bf16>) {
    let pre = acc;
    let (g, u) = unpair(acc);
    let y = silu(g) * u;
    (pre, y)
}

#[coda::epilogue]
/// Bias then the erf GELU (BERT-style MLPs), an f32 output.
pub fn bias_gelu_exact(acc: Acc, bias: PerCol<f32>) -> Tile<f32> {
    let y = gelu_exact(acc + bias);
    y
}

#[coda::epilogue]
/// A residual branch with a per-channel layer scale (CaiT), and the next
/// RMSNorm's partial sums of squares.
pub fn layer_scale_rms(acc: Acc, x: Tile<bf16>, ls: PerCol<bf16>) -> (Tile<bf16>, RowPartial<f32>) {
    let h = x + ls * acc;
    let sq = row_sum(h * h);
    (h, sq)
}

#[coda::epilogue]
/// A positive step size from a projection (state-space models' Δ).
pub fn softplus_bias(acc: Acc, bias: PerCol<f32>) -> Tile<f32> {
    let dt = softplus(acc + bias);
    dt
}

#[coda::epilogue]
/// QuickGELU (`x·σ(1.702x)`) times a second branch.
pub fn quick_gelu_mul(acc: Acc, x: Tile<bf16>) -> Tile<bf16> {
    let y = acc * sigmoid(1.702 * acc) * x;
    y
}

#[coda::epilogue]
/// Several outputs: the scaled value in f32, its tanh in bf16, and per-row sums.
pub fn scaled_tanh_sums(acc: Acc, r: PerRow<bf16>) -> (Tile<f32>, Tile<bf16>, RowPartial<f32>) {
    let y = acc * r;
    let t = tanh(y);
    let s = row_sum(y);
    (y, t, s)
}

#[coda::epilogue]
/// A gated RMSNorm's input (Mamba-2): `acc ⊙ silu(z)` and its per-row Σ².
pub fn gated_rms_input(acc: Acc, z: Tile<bf16>) -> (Tile<bf16>, RowPartial<f32>) {
    let y = acc * silu(z);
    let sq = row_sum(y * y);
    (y, sq)
}

/// Every program of this crate: its name, kernel and IR.
pub fn all() -> Vec<(&'static str, &'static coda::Kernel, coda::dsl::Program)> {
    vec![
        ("geglu", &geglu::KERNEL, geglu::program()),
        ("relu2_bias", &relu2_bias::KERNEL, relu2_bias::program()),
        ("layernorm_stats", &layernorm_stats::KERNEL, layernorm_stats::program()),
        ("softcap_lse", &softcap_lse::KERNEL, softcap_lse::program()),
        ("alpha_beta", &alpha_beta::KERNEL, alpha_beta::program()),
        ("dequant_sigmoid", &dequant_sigmoid::KERNEL, dequant_sigmoid::program()),
        ("swiglu_backward", &swiglu_backward::KERNEL, swiglu_backward::program()),
        ("swiglu_keep", &swiglu_keep::KERNEL, swiglu_keep::program()),
        ("bias_gelu_exact", &bias_gelu_exact::KERNEL, bias_gelu_exact::program()),
        ("layer_scale_rms", &layer_scale_rms::KERNEL, layer_scale_rms::program()),
        ("softplus_bias", &softplus_bias::KERNEL, softplus_bias::program()),
        ("quick_gelu_mul", &quick_gelu_mul::KERNEL, quick_gelu_mul::program()),
        ("scaled_tanh_sums", &scaled_tanh_sums::KERNEL, scaled_tanh_sums::program()),
        ("gated_rms_input", &gated_rms_input::KERNEL, gated_rms_input::program()),
    ]
}
