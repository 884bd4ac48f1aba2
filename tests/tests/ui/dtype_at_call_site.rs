use coda_runtime as coda;
use coda_runtime::{Stream, Tensor, bf16};

#[coda::epilogue]
fn rowscale(acc: Acc, r: PerRow<f32>) -> Tile<bf16> {
    let y = acc * r;
    y
}

fn launch(stream: &Stream, x: &Tensor<bf16>, w: &Tensor<bf16>, r: &Tensor<bf16>, y: &mut Tensor<bf16>) {
    // `r` is declared PerRow<f32>: a bf16 tensor is refused at compile time, naming the field.
    rowscale::launch(stream, rowscale::Args { a: x, b: w, r, y }).unwrap();
}

fn main() {}
