use coda_runtime as coda;

#[coda::epilogue]
/// o_proj epilogue: residual add, RMSNorm weight, partial sum of squares.
pub fn residual_rms_partial(acc: Acc, z: Tile<bf16>, gamma: PerCol<bf16>)
    -> (Tile<bf16>, Tile<bf16>, RowPartial<f32>) {
    let h = acc + z;
    let u = h * gamma;
    let sq = row_sum(h * h);
    (h, u, sq)
}
