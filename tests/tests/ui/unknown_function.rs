use coda_runtime as coda;

#[coda::epilogue]
fn act(acc: Acc) -> Tile<bf16> {
    let y = mish(acc);
    y
}

fn main() {}
