//! What an epilogue does per accumulator element, for the tuner's cost
//! model (`coda_runtime::tune`): the bytes it moves and the instructions its
//! maps issue. The instruction counts follow the device code the maps lower
//! to (`cutlass-templates/include/coda/math.hpp`): special-function-unit
//! operations (`ex2`, `lg2`, `rcp`, `rsqrt`, `tanh`) apart from the FP32
//! ALU operations around them, since the SFU issues at an eighth of the
//! ALU's rate. They are estimates to rank configs by, not a timing.

use serde::{Deserialize, Serialize};

use crate::ir::{BinaryOp, InputKind, Op, OutputKind, Program, UnaryOp, Width};

/// Per element of the `M × N` accumulator (a half-width value counts half,
/// a double-width one twice).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Work {
    /// Bytes of `Tile` and `DoubleTile` inputs: staged through shared memory
    /// by TMA (a `DoubleTile` where that fits: `crate::smem::pairs_staged`).
    pub tile_load_bytes: f32,
    /// Bytes of tile outputs (`Tile`, `HalfTile`, `DoubleTile`).
    pub store_bytes: f32,
    /// Special-function-unit operations.
    pub sfu: f32,
    /// FP32 ALU operations (adds, multiplies, compares, selects, conversions).
    pub alu: f32,
}

/// (SFU, ALU) operations of one unary map.
fn unary(op: UnaryOp) -> (f32, f32) {
    match op {
        UnaryOp::Neg | UnaryOp::Abs => (0.0, 1.0),
        UnaryOp::Exp | UnaryOp::Log => (1.0, 1.0),
        UnaryOp::Rsqrt | UnaryOp::Tanh => (1.0, 0.0),
        UnaryOp::Sqrt => (1.0, 3.0),
        // e = 2^(−|z|·log₂e), r = rcp(1 + e), a select.
        UnaryOp::Sigmoid => (2.0, 5.0),
        UnaryOp::Silu => (2.0, 6.0),
        // x·sigmoid(2u) with u a cubic.
        UnaryOp::Gelu => (2.0, 10.0),
        // A fitted erfc: t = rcp(1 + a/2), a degree-7 polynomial in t, ex2, a select.
        UnaryOp::GeluExact => (2.0, 15.0),
        // max(x, 0) + log1p(e^−|x|), a series near zero.
        UnaryOp::Softplus => (2.0, 10.0),
        // π/2 reduction and two short polynomials (sin and cos of one angle share them).
        UnaryOp::Cos | UnaryOp::Sin => (0.0, 18.0),
    }
}

impl Work {
    /// No epilogue work: a bare GEMM's.
    pub const ZERO: Work = Work {
        tile_load_bytes: 0.0,
        store_bytes: 0.0,
        sfu: 0.0,
        alu: 0.0,
    };

    /// The work of `program`'s epilogue.
    pub fn of(program: &Program) -> Work {
        let widths = program.widths();
        let per = |w: Width| match w {
            Width::Half => 0.5,
            Width::Double => 2.0,
            Width::Uniform => 0.0,
            Width::Row | Width::Col | Width::Full => 1.0,
        };
        let mut work = Work::default();
        for input in &program.inputs {
            match input.kind {
                InputKind::Tile(d) => work.tile_load_bytes += d.bytes() as f32,
                InputKind::DoubleTile(d) => work.tile_load_bytes += 2.0 * d.bytes() as f32,
                _ => {}
            }
        }
        for output in &program.outputs {
            work.store_bytes += match output.kind {
                OutputKind::Tile(d) => d.bytes() as f32,
                OutputKind::HalfTile(d) => d.bytes() as f32 / 2.0,
                OutputKind::DoubleTile(d) => 2.0 * d.bytes() as f32,
                _ => 0.0,
            };
        }
        for (node, &w) in program.nodes.iter().zip(&widths) {
            let (sfu, alu) = match node.op {
                Op::Input(_) | Op::Const(_) | Op::Unpair(..) | Op::Pair(..) => (0.0, 0.0),
                Op::Unary(op, _) => unary(op),
                // x · rcp(y), with y rescaled where 1/y would leave the normal range.
                Op::Binary(BinaryOp::Div, ..) => (1.0, 4.0),
                // A compare and a select.
                Op::Binary(op, ..) if op.comparison().is_some() => (0.0, 2.0),
                Op::Binary(..) => (0.0, 1.0),
                Op::Select(..) | Op::Gather(..) | Op::OneHot(_) => (0.0, 2.0),
                Op::RowSum(_) | Op::ColSum(_) | Op::RowMax(_) | Op::ColMax(_) => (0.0, 1.0),
                // The thread's partial, two shuffles per row, the broadcast (and the mean's divide).
                Op::Group(..) => (0.0, 2.0),
                // The running maximum, a rescale and e^(x − max), NaN tracking.
                Op::RowLse(_) => (1.0, 6.0),
            };
            work.sfu += sfu * per(w);
            work.alu += alu * per(w);
        }
        work
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn work(src: &str) -> Work {
        let f: syn::ItemFn = syn::parse_str(src).unwrap();
        Work::of(&crate::lower_fn(&f, Default::default()).unwrap())
    }

    /// Bytes by input and output kind, maps by their lowering, widths weighted.
    #[test]
    fn counts_bytes_and_operations() {
        let w = work(
            "fn p(acc: Acc, z: Tile<bf16>, r: PerRow<f32>) -> (Tile<bf16>, HalfTile<bf16>, RowPartial<f32>) {
                let h = acc + z;
                let (g, u) = unpair(h * r);
                let y = silu(g) * u;
                let s = row_sum(h * h);
                (h, y, s)
            }",
        );
        assert_eq!((w.tile_load_bytes, w.store_bytes), (2.0, 3.0));
        // silu on half width: 2 SFU ops per pair of columns.
        assert_eq!(w.sfu, 1.0);
        // add, mul (full); silu 6 and mul (half); mul and row_sum (full).
        assert_eq!(w.alu, 1.0 + 1.0 + 0.5 * 7.0 + 2.0);
        let pairs = work(
            "fn q(acc: Acc, z: DoubleTile<bf16>) -> DoubleTile<bf16> {
                let (a, b) = unpair(z);
                let d = pair(acc * sigmoid(a), acc / b);
                d
            }",
        );
        assert_eq!((pairs.tile_load_bytes, pairs.store_bytes, pairs.sfu), (4.0, 4.0, 3.0));
    }
}
