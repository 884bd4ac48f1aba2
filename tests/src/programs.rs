//! Variants that exercise every load kind, f32 outputs, scalars, the other
//! schedules and tiles. Each is compiled by this crate's build script and
//! verified on the GPU by `tests/gpu.rs`.

use coda_runtime as coda;

#[coda::epilogue(tile = (128, 128), cluster = (2, 1), schedule = pingpong)]
/// No C operand, an f32 D, a TMA tile load, row and column broadcasts, a scalar.
pub fn gated_mix(acc: Acc, bias: PerCol<f32>, scale: PerRow<bf16>, gate: Tile<bf16>, alpha: Scalar)
    -> (Tile<f32>, Tile<bf16>, RowPartial<f32>) {
    let pre = acc * scale + bias;
    let act = select(max(pre, 0.0), silu(pre), tanh(pre));
    let y = max(act * sigmoid(gate), -alpha);
    let e = exp(min(y, 0.0)) / sqrt(abs(pre) + 1.0);
    let s = row_sum(e * e);
    (y, e, s)
}

#[coda::epilogue(tile = (256, 128), cluster = (1, 2))]
/// A residual C operand beside a second TMA tile load, and two partial sums.
pub fn two_partials(acc: Acc, res: Tile<bf16>, other: Tile<bf16>, eps: Scalar)
    -> (Tile<bf16>, RowPartial<f32>, RowPartial<f32>) {
    let h = acc + res;
    let g = h * rsqrt(other * other + eps);
    let sum_g = row_sum(g);
    let sum_log = row_sum(log(abs(h) + 1.0) - 0.5);
    (g, sum_g, sum_log)
}
