use coda_runtime as coda;

// Both operands must be 8-bit floats, or both bf16.
#[coda::epilogue(a = e4m3, b = bf16)]
fn scale(acc: Acc, r: PerRow<f32>) -> Tile<bf16> {
    let y = acc * r;
    y
}

fn main() {}
