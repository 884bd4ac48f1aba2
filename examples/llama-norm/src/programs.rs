//! The two epilogue programs of the RMSNorm deferral.

use coda_runtime as coda;

#[coda::epilogue]
/// o_proj epilogue: residual add, RMSNorm weight, partial sum of squares.
pub fn residual_rms_partial(acc: Acc, z: Tile<bf16>, gamma: PerCol<bf16>) -> (Tile<bf16>, Tile<bf16>, RowPartial<f32>) {
    let h = acc + z;
    let u = h * gamma;
    let sq = row_sum(h * h);
    (h, u, sq)
}

#[coda::epilogue]
/// The consumer GEMM's epilogue: the deferred RMSNorm row scale `r`.
pub fn rowscale(acc: Acc, r: PerRow<f32>) -> Tile<bf16> {
    let y = acc * r;
    y
}
