//! The CPU reference interpreter: runs a [`Program`] on host arrays with the
//! exact semantics the GPU kernels must match. It is the oracle of every GPU test.
//!
//! Layouts (all row-major, `rows × n`): the accumulator and `Tile` inputs and
//! outputs are `[rows, n]`, `HalfTile` outputs `[rows, n/2]`, `DoubleTile`
//! inputs and outputs `[rows, 2n]`, `PerRow` inputs `[rows]`, `PerCol` inputs `[n]`.
//! A `PerGroup` output is `[rows, ceil(n/g)]` (the device stores it transposed).
//! A `RowPartial` or `RowMaxPartial` output is returned logically as
//! `[rows, n_tiles]` (see [`partials_from_device`] for the kernel's
//! tile-major layout), a `ColPartial` or `ColMaxPartial` as `[m_tiles, n]`.

use std::collections::HashMap;

use crate::ir::{BinaryOp, DType, GroupOp, InputKind, Op, OutputKind, Program, UnaryOp};

/// How each operation's result is rounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    /// Everything in f64: the reference.
    F64,
    /// Every operation rounded to f32, stores rounded to their dtype: what the fused kernel does.
    F32,
    /// The unfused bf16 path (what op-by-op PyTorch does): the GEMM output and
    /// every element-wise result rounded to bf16; reductions accumulate in f32.
    Bf16Unfused,
}

impl Precision {
    fn round(self, x: f64) -> f64 {
        match self {
            Precision::F64 => x,
            Precision::F32 => x as f32 as f64,
            Precision::Bf16Unfused => round_bf16(x),
        }
    }
    fn store(self, x: f64, dtype: DType) -> f64 {
        match (self, dtype) {
            // Exact but for the 8-bit formats' range, which is what their
            // stores mean (`satfinite`), not rounding; NaN stays NaN.
            (Precision::F64, DType::E4m3) => x.clamp(-448.0, 448.0),
            (Precision::F64, DType::E5m2) => x.clamp(-57344.0, 57344.0),
            (Precision::F64, _) => x,
            (_, DType::Bf16) => round_bf16(x),
            (_, DType::F32) => x as f32 as f64,
            (_, DType::I32) => x.round(),
            (_, DType::E4m3) => round_e4m3(x),
            (_, DType::E5m2) => round_e5m2(x),
        }
    }
}

/// Rounds to the nearest e4m3 (ties to even), saturated to ±448 as the
/// kernels' `cvt.rn.satfinite` does.
pub fn round_e4m3(x: f64) -> f64 {
    float8::F8E4M3::from_f64(x).to_f64()
}

/// Rounds to the nearest e5m2 (ties to even), saturated to ±57344.
pub fn round_e5m2(x: f64) -> f64 {
    float8::F8E5M2::from_f64(x).to_f64()
}

/// Rounds to the nearest bf16 (ties to even), as a GPU store does.
pub fn round_bf16(x: f64) -> f64 {
    half::bf16::from_f32(x as f32).to_f64()
}

/// Named host inputs of one evaluation.
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    /// `rows × n` accumulator values (for `Bf16Unfused`, pass the unrounded sums).
    pub acc: Vec<f64>,
    pub tensors: HashMap<String, Vec<f64>>,
    pub scalars: HashMap<String, f64>,
}

/// Evaluates `program` over `rows × n` accumulator elements. Returns every
/// output by name: `Tile` `[rows, n]`, `HalfTile` `[rows, n/2]`, `DoubleTile`
/// `[rows, 2n]`, `RowPartial` and `RowMaxPartial` `[rows, n_tiles]`, `ColPartial` and
/// `ColMaxPartial` `[m_tiles, n]`.
pub fn evaluate(
    program: &Program,
    rows: usize,
    n: usize,
    inputs: &Inputs,
    precision: Precision,
) -> Result<HashMap<String, Vec<f64>>, String> {
    let tile_n = program.config.tile_n;
    let n_tiles = n.div_ceil(tile_n);
    let widths = program.widths();
    if !program.is_map() {
        check_len("acc", &inputs.acc, rows * n)?;
    }
    for p in &program.inputs {
        let want = match p.kind {
            InputKind::Acc => continue,
            InputKind::Scalar => {
                if !inputs.scalars.contains_key(&p.name) {
                    return Err(format!("scalar `{}` is missing", p.name));
                }
                continue;
            }
            InputKind::Tile(_) => rows * n,
            InputKind::DoubleTile(_) => rows * 2 * n,
            InputKind::PerRow(_) => rows,
            InputKind::PerCol(_) => n,
        };
        let t = inputs.tensors.get(&p.name).ok_or_else(|| format!("input `{}` is missing", p.name))?;
        check_len(&p.name, t, want)?;
    }

    let group = program.group_size().unwrap_or(1);
    let out_cols = |k: OutputKind| match k {
        OutputKind::Tile(_) => n,
        OutputKind::HalfTile(_) => n / 2,
        OutputKind::DoubleTile(_) => 2 * n,
        OutputKind::RowPartial | OutputKind::RowMaxPartial => n_tiles,
        OutputKind::LsePartial => 2 * n_tiles,
        OutputKind::PerRow(_) => 1,
        OutputKind::ColPartial | OutputKind::ColMaxPartial | OutputKind::PerCol(_) => n,
        OutputKind::PerGroup(_) => n.div_ceil(group),
    };
    let tile_m = program.config.tile_m;
    let m_tiles = rows.div_ceil(tile_m);
    let mut outs: HashMap<String, Vec<f64>> = program
        .outputs
        .iter()
        .map(|o| {
            let (r, start) = match o.kind {
                OutputKind::ColPartial => (m_tiles, 0.0),
                OutputKind::ColMaxPartial => (m_tiles, f64::NEG_INFINITY),
                OutputKind::PerCol(_) => (1, 0.0),
                _ => (rows, 0.0),
            };
            (o.name.clone(), vec![start; r * out_cols(o.kind)])
        })
        .collect();
    let f32_sum = |s: f64, v: f64| (s as f32 + v as f32) as f64;

    // One row at a time: every node's value over its columns (one for row-uniform values).
    let mut vals: Vec<Vec<f64>> = widths.iter().map(|w| vec![0.0; w.cols(n)]).collect();
    let at = |v: &[f64], c: usize| if v.len() == 1 { v[0] } else { v[c] };
    for r in 0..rows {
        for (id, node) in program.nodes.iter().enumerate() {
            let mut v = std::mem::take(&mut vals[id]);
            match node.op {
                Op::Input(i) => {
                    let p = &program.inputs[i];
                    match p.kind {
                        InputKind::Acc => {
                            for c in 0..n {
                                v[c] = precision.round(inputs.acc[r * n + c]);
                            }
                        }
                        InputKind::Tile(_) => v.copy_from_slice(&inputs.tensors[&p.name][r * n..(r + 1) * n]),
                        InputKind::DoubleTile(_) => {
                            v.copy_from_slice(&inputs.tensors[&p.name][r * 2 * n..(r + 1) * 2 * n])
                        }
                        InputKind::PerRow(_) => v[0] = inputs.tensors[&p.name][r],
                        InputKind::PerCol(_) => v.copy_from_slice(&inputs.tensors[&p.name]),
                        InputKind::Scalar => v[0] = inputs.scalars[&p.name],
                    }
                }
                Op::Const(x) => v[0] = precision.round(x),
                Op::OneHot(target) => {
                    let t = vals[target][0];
                    for (c, x) in v.iter_mut().enumerate() {
                        *x = if t == c as f64 { 1.0 } else { 0.0 };
                    }
                }
                Op::Unary(op, a) => {
                    for c in 0..v.len() {
                        v[c] = precision.round(unary(op, at(&vals[a], c)));
                    }
                }
                Op::Binary(op, a, b) => {
                    for c in 0..v.len() {
                        v[c] = precision.round(binary(op, at(&vals[a], c), at(&vals[b], c)));
                    }
                }
                Op::Select(k, a, b) => {
                    for c in 0..v.len() {
                        v[c] = if at(&vals[k], c) != 0.0 { at(&vals[a], c) } else { at(&vals[b], c) };
                    }
                }
                Op::Unpair(a, part) => {
                    for c in 0..v.len() {
                        v[c] = vals[a][2 * c + part as usize];
                    }
                }
                Op::Pair(a, b) => {
                    for c in 0..v.len() / 2 {
                        v[2 * c] = at(&vals[a], c);
                        v[2 * c + 1] = at(&vals[b], c);
                    }
                }
                Op::Group(op, a, size) => {
                    for start in (0..v.len()).step_by(size) {
                        let cols = start..(start + size).min(v.len());
                        let xs = cols.clone().map(|c| at(&vals[a], c));
                        let r = match (op, precision) {
                            (GroupOp::Max, _) => xs.fold(f64::NEG_INFINITY, f64::max),
                            // From +0 as the device's sums start (Rust's float
                            // `sum` starts at -0, so all -0 would sum to -0).
                            (_, Precision::F64) => xs.fold(0.0, |s, x| s + x),
                            _ => xs.fold(0f32, |s, x| s + x as f32) as f64,
                        };
                        let r = if op == GroupOp::Mean { r / cols.len() as f64 } else { r };
                        v[cols].fill(precision.round(r));
                    }
                }
                // Reductions and gathers are produced when the output is stored, below.
                Op::RowSum(_) | Op::ColSum(_) | Op::RowLse(_) | Op::RowMax(_) | Op::ColMax(_) | Op::Gather(..) => {}
            }
            vals[id] = v;
        }
        for o in &program.outputs {
            let out = outs.get_mut(&o.name).expect("allocated above");
            let cols = out_cols(o.kind);
            match o.kind {
                OutputKind::Tile(dtype) | OutputKind::HalfTile(dtype) | OutputKind::DoubleTile(dtype) => {
                    for c in 0..cols {
                        out[r * cols + c] = precision.store(at(&vals[o.value], c), dtype);
                    }
                }
                OutputKind::RowPartial => {
                    let Op::RowSum(src) = program.nodes[o.value].op else {
                        return Err(format!("output `{}` is not a row_sum", o.name));
                    };
                    for t in 0..n_tiles {
                        let cols = t * tile_n..((t + 1) * tile_n).min(n);
                        out[r * n_tiles + t] = match precision {
                            Precision::F64 => cols.fold(0.0, |s, c| s + at(&vals[src], c)),
                            _ => cols.fold(0f32, |s, c| s + at(&vals[src], c) as f32) as f64,
                        };
                    }
                }
                OutputKind::ColPartial => {
                    let Op::ColSum(src) = program.nodes[o.value].op else {
                        return Err(format!("output `{}` is not a col_sum", o.name));
                    };
                    let base = (r / tile_m) * n;
                    for c in 0..n {
                        let v = at(&vals[src], c);
                        out[base + c] = match precision {
                            Precision::F64 => out[base + c] + v,
                            _ => f32_sum(out[base + c], v),
                        };
                    }
                }
                // Maxima are exact in any precision: no rounding to model.
                OutputKind::RowMaxPartial => {
                    let Op::RowMax(src) = program.nodes[o.value].op else {
                        return Err(format!("output `{}` is not a row_max", o.name));
                    };
                    for t in 0..n_tiles {
                        let cols = t * tile_n..((t + 1) * tile_n).min(n);
                        out[r * n_tiles + t] = cols.fold(f64::NEG_INFINITY, |s, c| s.max(at(&vals[src], c)));
                    }
                }
                OutputKind::ColMaxPartial => {
                    let Op::ColMax(src) = program.nodes[o.value].op else {
                        return Err(format!("output `{}` is not a col_max", o.name));
                    };
                    let base = (r / tile_m) * n;
                    for c in 0..n {
                        out[base + c] = out[base + c].max(at(&vals[src], c));
                    }
                }
                OutputKind::LsePartial => {
                    let Op::RowLse(src) = program.nodes[o.value].op else {
                        return Err(format!("output `{}` is not a row_lse", o.name));
                    };
                    for t in 0..n_tiles {
                        let cols = t * tile_n..((t + 1) * tile_n).min(n);
                        let mx = lse_max(cols.clone().map(|c| at(&vals[src], c)));
                        let se = lse_empty_or_infinite(mx).unwrap_or_else(|| {
                            let terms = cols.map(|c| (at(&vals[src], c) - mx).exp());
                            match precision {
                                Precision::F64 => terms.sum(),
                                _ => terms.fold(0f32, |s, e| s + e as f32) as f64,
                            }
                        });
                        out[r * 2 * n_tiles + 2 * t] = mx;
                        out[r * 2 * n_tiles + 2 * t + 1] = se;
                    }
                }
                OutputKind::PerRow(dtype) => {
                    out[r] = match program.nodes[o.value].op {
                        Op::Gather(src, target) => {
                            let t = vals[target][0];
                            if t >= 0.0 && (t as usize) < n {
                                precision.store(at(&vals[src], t as usize), dtype)
                            } else {
                                f64::NAN // not written
                            }
                        }
                        _ => precision.store(vals[o.value][0], dtype),
                    };
                }
                // The same for every row: any row gives it.
                OutputKind::PerCol(dtype) => {
                    for c in 0..n {
                        out[c] = precision.store(at(&vals[o.value], c), dtype);
                    }
                }
                // The same across each group: its first column gives it.
                OutputKind::PerGroup(dtype) => {
                    for j in 0..cols {
                        out[r * cols + j] = precision.store(at(&vals[o.value], j * group), dtype);
                    }
                }
            }
        }
    }
    Ok(outs)
}

fn check_len(name: &str, v: &[f64], want: usize) -> Result<(), String> {
    if v.len() == want { Ok(()) } else { Err(format!("`{name}` has {} elements, expected {want}", v.len())) }
}

pub fn unary(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Neg => -x,
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Rsqrt => 1.0 / x.sqrt(),
        UnaryOp::Abs => x.abs(),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        UnaryOp::Silu => x / (1.0 + (-x).exp()),
        UnaryOp::Cos => x.cos(),
        UnaryOp::Sin => x.sin(),
        // 0.5·x·(1 + tanh u) as x·σ(2u) and 0.5·x·(1 + erf(x/√2)) with erfc:
        // the forms with 1 + … cancel in f64 too, for x below about −7.
        UnaryOp::Gelu => x / (1.0 + (-2.0 * (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).exp()),
        UnaryOp::GeluExact => 0.5 * x * libm::erfc(-x * std::f64::consts::FRAC_1_SQRT_2),
        UnaryOp::Softplus => x.max(0.0) + (-x.abs()).exp().ln_1p(),
    }
}

pub fn binary(op: BinaryOp, a: f64, b: f64) -> f64 {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Max => a.max(b),
        BinaryOp::Min => a.min(b),
        BinaryOp::Gt => f64::from(u8::from(a > b)),
        BinaryOp::Ge => f64::from(u8::from(a >= b)),
        BinaryOp::Lt => f64::from(u8::from(a < b)),
        BinaryOp::Le => f64::from(u8::from(a <= b)),
        BinaryOp::Eq => f64::from(u8::from(a == b)),
        BinaryOp::Ne => f64::from(u8::from(a != b)),
    }
}

/// Converts the kernel's `[2, n_tiles, m_pad]` log-sum-exp partials into the
/// interpreter's logical `[rows, n_tiles, 2]` (max, sum), for the listed rows.
pub fn lse_partials_from_device(device: &[f32], m_padded: usize, n_tiles: usize, rows: &[usize]) -> Vec<f64> {
    let plane = n_tiles * m_padded;
    let mut out = Vec::with_capacity(rows.len() * n_tiles * 2);
    for &m in rows {
        for t in 0..n_tiles {
            out.push(device[t * m_padded + m] as f64);
            out.push(device[plane + t * m_padded + m] as f64);
        }
    }
    out
}

/// Converts the kernel's `[m_tiles, n_pad]` column partials into the logical `[m_tiles, n]`.
pub fn col_partials_from_device(device: &[f32], n_padded: usize, n: usize) -> Vec<f64> {
    device.chunks(n_padded).flat_map(|row| row[..n].iter().map(|&v| v as f64)).collect()
}

/// The running max of a log-sum-exp: NaN if any value is NaN (IEEE's
/// `max` would drop it, and a row of NaN logits would read as empty).
fn lse_max(values: impl Iterator<Item = f64>) -> f64 {
    values.fold(f64::NEG_INFINITY, |m, x| if m.is_nan() || x.is_nan() { f64::NAN } else { m.max(x) })
}

/// `Σ exp(x − max)` where `max` alone decides it: NaN stays NaN, an empty or
/// all −∞ row sums to 0 (its lse is −∞), and a +∞ max to 1 (its lse is +∞,
/// not the NaN of `∞ − ∞`). The kernels follow the same rules (rowstate.hpp).
fn lse_empty_or_infinite(max: f64) -> Option<f64> {
    if max.is_nan() {
        Some(f64::NAN)
    } else if max == f64::NEG_INFINITY {
        Some(0.0)
    } else if max == f64::INFINITY {
        Some(1.0)
    } else {
        None
    }
}

/// `lse[m] = max_t + log Σ_t s_t · exp(max_t − max)` from logical `[rows, n_tiles, 2]` partials.
pub fn lse_from_partials(partials: &[f64], n_tiles: usize) -> Vec<f64> {
    partials
        .chunks(2 * n_tiles)
        .map(|row| {
            let mx = lse_max(row.iter().step_by(2).copied());
            match lse_empty_or_infinite(mx) {
                Some(_) => mx,
                None => mx + row.chunks(2).map(|p| p[1] * (p[0] - mx).exp()).sum::<f64>().ln(),
            }
        })
        .collect()
}

/// Converts the kernel's tile-major partials `[n_tiles, m_padded]` (m fastest)
/// into the interpreter's logical `[rows, n_tiles]`, for the listed rows.
pub fn partials_from_device(device: &[f32], m_padded: usize, n_tiles: usize, rows: &[usize]) -> Vec<f64> {
    let mut out = Vec::with_capacity(rows.len() * n_tiles);
    for &m in rows {
        for t in 0..n_tiles {
            out.push(device[t * m_padded + m] as f64);
        }
    }
    out
}

/// The aux reduction that finishes RMSNorm: `r[m] = rsqrt(Σ_t partial[m, t] / d + eps)`,
/// over logical `[rows, n_tiles]` partials, in f64.
pub fn rms_from_partials(partials: &[f64], n_tiles: usize, d: usize, eps: f64) -> Vec<f64> {
    partials.chunks(n_tiles).map(|row| 1.0 / (row.iter().sum::<f64>() / d as f64 + eps).sqrt()).collect()
}
