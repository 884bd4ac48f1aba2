use coda_runtime as coda;

#[coda::epilogue]
fn clamp(acc: Acc, lo: Scalar) -> Tile<bf16> {
    let y = max(acc, lo, 0.0);
    y
}

fn main() {}
