use coda_runtime as coda;

#[coda::epilogue(tile = (64, 64))]
fn scale(acc: Acc, r: PerRow<f32>) -> Tile<bf16> {
    let y = acc * r;
    y
}

fn main() {}
