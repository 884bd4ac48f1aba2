use coda_runtime as coda;
use coda_runtime::{Stream, Tensor, bf16};

#[coda::epilogue(a = e4m3, b = e4m3)]
fn fp8_scale(acc: Acc, s: Scalar) -> Tile<bf16> {
    let y = acc * s;
    y
}

fn launch(stream: &Stream, x: &Tensor<bf16>, w: &Tensor<bf16>, y: &mut Tensor<bf16>) {
    // The program's operands are e4m3: bf16 tensors are refused at compile time, naming the field.
    fp8_scale::launch(stream, fp8_scale::Args { a: x, b: w, y, s: 1.0 }).unwrap();
}

fn main() {}
