use coda_runtime as coda;

#[coda::epilogue]
fn swiglu(acc: Acc) -> HalfTile<bf16> {
    let (g, u) = unpair(acc);
    let y = silu(g) * u + acc;
    y
}

fn main() {}
