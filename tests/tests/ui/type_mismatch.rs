use coda_runtime as coda;

#[coda::epilogue]
fn norm(acc: Acc) -> (Tile<bf16>, RowPartial<f32>) {
    let sq = row_sum(acc * acc);
    let y = acc / sq;
    (y, sq)
}

fn main() {}
