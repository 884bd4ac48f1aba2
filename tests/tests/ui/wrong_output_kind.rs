use coda_runtime as coda;

#[coda::epilogue]
fn partials(acc: Acc, z: Tile<bf16>) -> (Tile<bf16>, Tile<f32>) {
    let h = acc + z;
    let sq = row_sum(h * h);
    (h, sq)
}

fn main() {}
