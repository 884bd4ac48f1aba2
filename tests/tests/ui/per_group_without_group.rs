use coda_runtime as coda;

#[coda::epilogue]
fn scales(acc: Acc, r: PerRow<f32>) -> (Tile<bf16>, PerGroup<f32>) {
    let y = acc * r;
    let s = r * 2.0;
    (y, s)
}

fn main() {}
