//! Property tests over generated programs ([`coda_dsl::testgen`]) and fuzzed
//! sources. Seeds are fixed, so every run checks the same cases; set
//! `CODA_PROPTEST_CASES` to run more.
//!
//! - `generated_programs_lower_and_interpret`: every generated program lowers
//!   (to one program of its name and config), its IR round-trips through
//!   JSON, and the interpreter runs it at `m = 5` and a ragged even `n` in
//!   F64, F32 and Bf16Unfused; F32 and Bf16Unfused agree with F64 within a
//!   rigorous running error bound (see [`bounds`]).
//! - `mutated_sources_never_panic` / `token_soup_never_panics`: mutated
//!   generated sources and random token streams, through `syn::parse_file`
//!   and `lower_file`, never panic; whatever lowers also round-trips through
//!   JSON and interprets without panicking.

use std::collections::HashMap;

use coda_dsl::interp::{self, Inputs, Precision, round_bf16};
use coda_dsl::ir::{DType, GroupOp, InputKind, Op, OutputKind, Program, UnaryOp};
use coda_dsl::testgen::{self, Generated};
use coda_dsl::smem;
use proptest::prelude::*;

fn lower(source: &str) -> Result<Vec<Program>, String> {
    let file = syn::parse_file(source).map_err(|e| format!("syn: {e}"))?;
    coda_dsl::lower_file(&file).map_err(|e| e.to_string())
}

/// SplitMix64: deterministic input values.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// In [-2, 2), a tenth of them 0.
    fn value(&mut self) -> f64 {
        let r = self.next();
        if r % 10 == 0 { 0.0 } else { (r >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0 }
    }
}

fn to_dtype(x: f64, d: DType) -> f64 {
    match d {
        DType::Bf16 => round_bf16(x),
        _ => x as f32 as f64,
    }
}

/// Random inputs for `p` at `m × n`: tensors exactly representable in their
/// dtype (so every precision reads the same values), targets in `[0, n)` or
/// out of range (`-100`, `n`).
fn inputs(p: &Program, m: usize, n: usize, seed: u64) -> Inputs {
    let mut rng = Rng(seed);
    let mut inp = Inputs::default();
    let vec = |len: usize, d: DType, rng: &mut Rng| (0..len).map(|_| to_dtype(rng.value(), d)).collect::<Vec<_>>();
    for i in &p.inputs {
        match i.kind {
            InputKind::Acc => inp.acc = (0..m * n).map(|_| rng.value()).collect(),
            InputKind::Tile(d) => drop(inp.tensors.insert(i.name.clone(), vec(m * n, d, &mut rng))),
            InputKind::DoubleTile(d) => drop(inp.tensors.insert(i.name.clone(), vec(m * 2 * n, d, &mut rng))),
            InputKind::PerRow(DType::I32) => {
                let t = (0..m)
                    .map(|_| match rng.next() % 8 {
                        0 => -100.0,
                        1 => n as f64,
                        r => ((r + rng.next()) % n as u64) as f64,
                    })
                    .collect();
                inp.tensors.insert(i.name.clone(), t);
            }
            InputKind::PerRow(d) => drop(inp.tensors.insert(i.name.clone(), vec(m, d, &mut rng))),
            InputKind::PerCol(d) => drop(inp.tensors.insert(i.name.clone(), vec(n, d, &mut rng))),
            InputKind::Scalar => drop(inp.scalars.insert(i.name.clone(), to_dtype(rng.value(), DType::F32))),
        }
    }
    inp
}

/// Above this a value may overflow to ±inf in f32 or bf16: no bound.
const OVERFLOW: f64 = 3.3e38;
/// An absolute term for each rounding: covers subnormal results (bf16's and f32's smallest is ≥ 2⁻¹⁴⁹).
const TINY: f64 = 1e-37;
const U_F32: f64 = 1.0 / (1u64 << 24) as f64;
const U_BF16: f64 = 1.0 / 256.0;

/// The error of rounding a value `v` known to within `e` with unit roundoff `u`.
fn rnd(u: f64, v: f64, e: f64) -> f64 {
    u * (v.abs() + e) + TINY
}

/// Infinite unless a finite bound of a value that cannot overflow.
fn clean(v: f64, e: f64) -> f64 {
    if e.is_nan() || !v.is_finite() || v.abs() + e > OVERFLOW { f64::INFINITY } else { e }
}

/// A rigorous bound on `|low − f64|` for every output element of `p`
/// evaluated in a precision whose element-wise results round with unit
/// roundoff `u` (2⁻²⁴ for F32, 2⁻⁸ for Bf16Unfused; the accumulator and
/// constants round the same way, inputs are exact), in the layout of
/// [`interp::evaluate`]'s outputs. A running (interval) error analysis over
/// the f64 values: each node carries `e ≥ |low − exact|`;
/// `+ −`: `e_a + e_b`; `×`: `|a|e_b + |b|e_a + e_a e_b`; `÷`: the interval
/// bound `(|a|e_b + |b|e_a) / (|b|(|b| − e_b))`, infinite when `|b| ≤ e_b`;
/// `max min`: `max(e_a, e_b)`; monotone unary ops (`exp log sqrt rsqrt`):
/// the larger change of `f` at `x ± e`; the others by their Lipschitz
/// constant (`neg abs tanh sigmoid cos sin softplus`: 1, `silu`: 1.1,
/// `gelu gelu_exact`: 1.13); `select`: the
/// chosen branch's `e`, or `max(e_a, e_b) + |a − b|` when `|c| ≤ e_c` (the
/// branch may flip); each rounded result adds `u(|v| + e) + TINY`, stores
/// the same with their dtype's unit roundoff; f32 sums of `k` terms add
/// `γ_k Σ(|v| + e)`, `γ_k = ku/(1 − ku)`, u = 2⁻²⁴. A value that is not
/// finite, or could exceed the f32/bf16 range, has an infinite bound, and
/// its outputs are not compared.
fn bounds(p: &Program, m: usize, n: usize, inp: &Inputs, u: f64) -> HashMap<String, Vec<f64>> {
    let widths = p.widths();
    let tile_n = p.config.tile_n;
    let n_tiles = n.div_ceil(tile_n);
    let gamma = |k: usize| k as f64 * U_F32 / (1.0 - k as f64 * U_F32);
    // Unit roundoffs of the stores (8-bit outputs: 3 and 2 mantissa bits).
    let store_u = |d: DType| match d {
        DType::Bf16 => U_BF16,
        DType::E4m3 => 2f64.powi(-4),
        DType::E5m2 => 2f64.powi(-3),
        _ => U_F32,
    };
    let at = |v: &[(f64, f64)], c: usize| if v.len() == 1 { v[0] } else { v[c] };
    let mut out: HashMap<String, Vec<f64>> = HashMap::new();
    // Column partials: Σ e and Σ (|v| + e), and the count, per column.
    let mut colsum: HashMap<String, Vec<(f64, f64)>> = HashMap::new();
    let mut colmax: HashMap<String, Vec<f64>> = HashMap::new();
    let mut vals: Vec<Vec<(f64, f64)>> = widths.iter().map(|w| vec![(0.0, 0.0); w.cols(n)]).collect();
    for r in 0..m {
        for (id, node) in p.nodes.iter().enumerate() {
            let mut v = std::mem::take(&mut vals[id]);
            match node.op {
                Op::Input(i) => {
                    let name = &p.inputs[i].name;
                    match p.inputs[i].kind {
                        InputKind::Acc => {
                            for c in 0..n {
                                let x = inp.acc[r * n + c];
                                v[c] = (x, rnd(u, x, 0.0));
                            }
                        }
                        InputKind::Tile(_) => {
                            for c in 0..n {
                                v[c] = (inp.tensors[name][r * n + c], 0.0);
                            }
                        }
                        InputKind::DoubleTile(_) => {
                            for c in 0..2 * n {
                                v[c] = (inp.tensors[name][r * 2 * n + c], 0.0);
                            }
                        }
                        InputKind::PerRow(_) => v[0] = (inp.tensors[name][r], 0.0),
                        InputKind::PerCol(_) => {
                            for c in 0..n {
                                v[c] = (inp.tensors[name][c], 0.0);
                            }
                        }
                        InputKind::Scalar => v[0] = (inp.scalars[name], 0.0),
                    }
                }
                Op::Const(x) => v[0] = (x, clean(x, rnd(u, x, 0.0))),
                Op::OneHot(t) => {
                    let t = vals[t][0].0;
                    for (c, x) in v.iter_mut().enumerate() {
                        *x = (if t == c as f64 { 1.0 } else { 0.0 }, 0.0);
                    }
                }
                Op::Unary(op, a) => {
                    for c in 0..v.len() {
                        let (x, ex) = at(&vals[a], c);
                        let y = interp::unary(op, x);
                        let prop = if ex == 0.0 {
                            0.0
                        } else {
                            match op {
                                UnaryOp::Exp | UnaryOp::Log | UnaryOp::Sqrt | UnaryOp::Rsqrt => {
                                    let d1 = (interp::unary(op, x - ex) - y).abs();
                                    let d2 = (interp::unary(op, x + ex) - y).abs();
                                    if d1.is_nan() || d2.is_nan() { f64::INFINITY } else { d1.max(d2) }
                                }
                                UnaryOp::Silu => 1.1 * ex,
                                UnaryOp::Gelu | UnaryOp::GeluExact => 1.13 * ex,
                                _ => ex,
                            }
                        };
                        v[c] = (y, clean(y, prop + rnd(u, y, prop)));
                    }
                }
                Op::Binary(op, a, b) => {
                    use coda_dsl::ir::BinaryOp::*;
                    for c in 0..v.len() {
                        let ((x, ex), (z, ez)) = (at(&vals[a], c), at(&vals[b], c));
                        let y = interp::binary(op, x, z);
                        let prop = match op {
                            Add | Sub => ex + ez,
                            Mul => x.abs() * ez + z.abs() * ex + ex * ez,
                            Div if z.abs() <= ez => f64::INFINITY,
                            Div => (x.abs() * ez + z.abs() * ex) / (z.abs() * (z.abs() - ez)),
                            Max | Min => ex.max(ez),
                            // 0 or 1: exact unless the operands' errors reach across their gap.
                            Gt | Ge | Lt | Le | Eq | Ne => {
                                let sure = [x, z, ex, ez].iter().all(|v| v.is_finite()) && (x - z).abs() > ex + ez;
                                if sure || (ex == 0.0 && ez == 0.0 && !x.is_nan() && !z.is_nan()) { 0.0 } else { 1.0 }
                            }
                        };
                        // A comparison's 0 or 1 rounds to itself: no rounding term (a
                        // `select` on it is then checked as certain where it is).
                        v[c] = (y, if op.comparison().is_some() { prop } else { clean(y, prop + rnd(u, y, prop)) });
                    }
                }
                Op::Select(k, a, b) => {
                    for c in 0..v.len() {
                        let ((kv, ke), (x, ex), (z, ez)) = (at(&vals[k], c), at(&vals[a], c), at(&vals[b], c));
                        let y = if kv != 0.0 { x } else { z };
                        let e = if kv.is_nan() {
                            f64::INFINITY
                        } else if ke >= kv.abs() && ke > 0.0 {
                            ex.max(ez) + (x - z).abs()
                        } else if kv != 0.0 {
                            ex
                        } else {
                            ez
                        };
                        v[c] = (y, clean(y, e));
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
                        let xs: Vec<(f64, f64)> = cols.clone().map(|c| at(&vals[a], c)).collect();
                        let k = xs.len();
                        let (y, e) = match op {
                            GroupOp::Max => xs.iter().fold((f64::NEG_INFINITY, 0.0f64), |(m, e), &(x, ex)| (m.max(x), e.max(ex))),
                            _ => {
                                let (sum, e, mag) = xs.iter().fold((0.0, 0.0, 0.0), |(s, e, m), &(x, ex)| (s + x, e + ex, m + x.abs() + ex));
                                // A running sum may leave f32's range where the mean does not.
                                let e = if mag > OVERFLOW { f64::INFINITY } else { e + gamma(k) * mag };
                                if op == GroupOp::Mean { (sum / k as f64, e / k as f64) } else { (sum, e) }
                            }
                        };
                        let e = clean(y, e + rnd(u, y, e));
                        v[cols].fill((y, e));
                    }
                }
                Op::RowSum(_) | Op::ColSum(_) | Op::RowLse(_) | Op::RowMax(_) | Op::ColMax(_) | Op::Gather(..) => {}
            }
            vals[id] = v;
        }
        for o in &p.outputs {
            let stored = |(v, e): (f64, f64), d: DType| clean(v, e + rnd(store_u(d), v, e));
            let src = |op: &Op| op.operands()[0];
            let cols = |t: usize| t * tile_n..((t + 1) * tile_n).min(n);
            let row: Vec<f64> = match o.kind {
                OutputKind::Tile(d) | OutputKind::HalfTile(d) | OutputKind::DoubleTile(d) => {
                    let w = match o.kind {
                        OutputKind::HalfTile(_) => n / 2,
                        OutputKind::DoubleTile(_) => 2 * n,
                        _ => n,
                    };
                    (0..w).map(|c| stored(at(&vals[o.value], c), d)).collect()
                }
                OutputKind::RowPartial => {
                    let s = &vals[src(&p.nodes[o.value].op)];
                    (0..n_tiles)
                        .map(|t| {
                            let k = cols(t).len();
                            let (e, mag) = cols(t)
                                .map(|c| at(s, c))
                                .fold((0.0, 0.0), |(e, m), (v, ev)| (e + ev, m + v.abs() + ev));
                            let b = e + gamma(k) * mag + TINY;
                            if b.is_nan() || mag > OVERFLOW { f64::INFINITY } else { b }
                        })
                        .collect()
                }
                // A maximum moves by at most its arguments' largest error.
                OutputKind::RowMaxPartial => {
                    let s = &vals[src(&p.nodes[o.value].op)];
                    (0..n_tiles).map(|t| cols(t).map(|c| at(s, c).1).fold(0.0, f64::max) + TINY).collect()
                }
                OutputKind::ColMaxPartial => {
                    let s = &vals[src(&p.nodes[o.value].op)];
                    let acc = colmax.entry(o.name.clone()).or_insert_with(|| vec![0.0; n]);
                    for (c, a) in acc.iter_mut().enumerate() {
                        *a = a.max(at(s, c).1);
                    }
                    continue;
                }
                OutputKind::LsePartial => {
                    let s = &vals[src(&p.nodes[o.value].op)];
                    let mut row = vec![];
                    for t in 0..n_tiles {
                        let xs: Vec<(f64, f64)> = cols(t).map(|c| at(s, c)).collect();
                        let mx = xs.iter().map(|x| x.0).fold(f64::NEG_INFINITY, f64::max);
                        let emx = xs.iter().map(|x| x.1).fold(0.0, f64::max);
                        if !mx.is_finite() || !emx.is_finite() || xs.iter().any(|x| x.0.is_nan()) {
                            row.extend([f64::INFINITY, f64::INFINITY]);
                            continue;
                        }
                        let (mut e, mut mag) = (0.0, 0.0);
                        for &(v, ev) in &xs {
                            let term = (v - mx).exp();
                            let grow = (ev + emx).exp();
                            e += term * (grow - 1.0);
                            mag += term * grow;
                        }
                        let b = e + gamma(xs.len()) * mag + TINY;
                        row.extend([emx, if b.is_finite() { b } else { f64::INFINITY }]);
                    }
                    row
                }
                OutputKind::ColPartial => {
                    let s = &vals[src(&p.nodes[o.value].op)];
                    let acc = colsum.entry(o.name.clone()).or_insert_with(|| vec![(0.0, 0.0); n]);
                    for c in 0..n {
                        let (v, ev) = at(s, c);
                        acc[c].0 += ev;
                        acc[c].1 += v.abs() + ev;
                    }
                    continue;
                }
                OutputKind::PerRow(d) => vec![match p.nodes[o.value].op {
                    Op::Gather(x, t) => {
                        let t = vals[t][0].0;
                        if t >= 0.0 && (t as usize) < n { stored(at(&vals[x], t as usize), d) } else { f64::INFINITY }
                    }
                    _ => stored(vals[o.value][0], d),
                }],
                OutputKind::PerCol(d) => {
                    // The same in every row: the last row's bound.
                    out.insert(o.name.clone(), (0..n).map(|c| stored(at(&vals[o.value], c), d)).collect());
                    continue;
                }
                OutputKind::PerGroup(d) => {
                    let g = p.group_size().expect("a PerGroup output has a group size");
                    (0..n.div_ceil(g)).map(|j| stored(at(&vals[o.value], j * g), d)).collect()
                }
            };
            out.entry(o.name.clone()).or_default().extend(row);
        }
    }
    // One M-tile at m = 5 (every tile_m is ≥ 128).
    assert!(m <= p.config.tile_m);
    for (name, acc) in colsum {
        let b =
            acc.iter().map(|&(e, mag)| if mag > OVERFLOW { f64::INFINITY } else { e + gamma(m) * mag + TINY }).map(|b| if b.is_nan() { f64::INFINITY } else { b });
        out.insert(name, b.collect());
    }
    out.extend(colmax.into_iter().map(|(name, e)| (name, e.into_iter().map(|e| e + TINY).collect())));
    out
}

#[derive(Default, Debug)]
struct Stats {
    programs: usize,
    compared: usize,
    skipped: usize,
    /// Every input kind, output kind, operation and option seen.
    seen: std::collections::BTreeSet<String>,
}

/// What a program exercises, for the coverage check.
fn features(p: &Program) -> Vec<String> {
    let mut f: Vec<String> = p.inputs.iter().map(|i| format!("in {:?}", i.kind)).collect();
    f.extend(p.outputs.iter().map(|o| format!("out {:?}", o.kind)));
    for n in &p.nodes {
        f.push(match n.op {
            Op::Unary(u, _) => format!("{u:?}"),
            Op::Binary(b, _, _) => format!("{b:?}"),
            ref op => format!("{op:?}").split('(').next().unwrap().to_string(),
        });
    }
    f.push(format!("config {}", p.config.name()));
    f.push(format!("{:?}", p.config.b_layout));
    let ops = p.config.operands;
    f.extend([format!("a {:?}", ops.a), format!("b {:?}", ops.b), format!("scale {:?}", ops.scale), format!("accum {:?}", ops.accum)]);
    f.push(if p.is_map() { "map" } else { "gemm" }.to_string());
    f
}

fn check_program(g: &Generated, stats: &mut Stats) -> Result<(), TestCaseError> {
    let programs = lower(&g.source).map_err(|e| TestCaseError::fail(format!("does not lower: {e}")))?;
    prop_assert_eq!(programs.len(), 1);
    let p = &programs[0];
    prop_assert_eq!(&p.name, &g.name);
    prop_assert_eq!(p.config, g.config);
    let back = Program::from_json(&p.to_json()).map_err(|e| TestCaseError::fail(format!("JSON: {e}")))?;
    prop_assert_eq!(&back, p, "JSON round trip");

    let m = 5;
    let inp = inputs(p, m, g.n, p.fingerprint());
    let reference = interp::evaluate(p, m, g.n, &inp, Precision::F64).map_err(TestCaseError::fail)?;
    for (precision, u) in [(Precision::F32, U_F32), (Precision::Bf16Unfused, U_BF16)] {
        let low = interp::evaluate(p, m, g.n, &inp, precision).map_err(TestCaseError::fail)?;
        let bound = bounds(p, m, g.n, &inp, u);
        for o in &p.outputs {
            let (r, l, b) = (&reference[&o.name], &low[&o.name], &bound[&o.name]);
            prop_assert_eq!(r.len(), l.len(), "output `{}` length", o.name);
            prop_assert_eq!(r.len(), b.len(), "bound of `{}` length", o.name);
            for i in 0..r.len() {
                if !r[i].is_finite() || !b[i].is_finite() {
                    stats.skipped += 1;
                    continue;
                }
                stats.compared += 1;
                prop_assert!(
                    (l[i] - r[i]).abs() <= b[i] * (1.0 + 1e-9),
                    "{precision:?}: output `{}`[{i}] = {} but f64 gives {} (bound {})",
                    o.name,
                    l[i],
                    r[i],
                    b[i]
                );
            }
        }
    }
    stats.programs += 1;
    stats.seen.extend(features(p));
    Ok(())
}

#[test]
fn generated_programs_lower_and_interpret() {
    let stats = std::cell::RefCell::new(Stats::default());
    let result =
        testgen::runner(2000, 0xc0da_0001).run(&testgen::programs(), |g| check_program(&g, &mut stats.borrow_mut()));
    if let Err(e) = result {
        panic!("{e}");
    }
    let stats = stats.into_inner();
    let mut want: Vec<String> = vec![];
    for d in ["Bf16", "F32"] {
        want.extend([format!("in Tile({d})"), format!("in PerRow({d})"), format!("in PerCol({d})")]);
        want.extend(["Tile", "HalfTile", "PerRow", "PerCol"].map(|k| format!("out {k}({d})")));
    }
    want.extend(
        ["in Acc", "in Scalar", "in DoubleTile(Bf16)", "in PerRow(I32)", "out DoubleTile(Bf16)"].map(String::from),
    );
    want.extend(["out RowPartial", "out ColPartial", "out LsePartial", "out RowMaxPartial", "out ColMaxPartial", "map", "gemm", "Nk", "Kn"].map(String::from));
    want.extend(UnaryOp::ALL.iter().map(|u| format!("{u:?}")));
    want.extend(
        ["Add", "Sub", "Mul", "Div", "Max", "Min", "Gt", "Ge", "Lt", "Le", "Eq", "Ne", "Select", "Const", "Pair", "Unpair", "RowSum", "ColSum", "RowMax", "ColMax"]
            .map(String::from),
    );
    want.extend(["RowLse", "Gather", "OneHot"].map(String::from));
    want.extend(coda_dsl::ir::Config::all().iter().map(|c| format!("config {}", c.name())));
    want.extend(["a E4m3", "a E5m2", "b E4m3", "b E5m2", "scale Blockwise", "scale None", "accum Promoted", "accum Fast"].map(String::from));
    let missing: Vec<&String> = want.iter().filter(|w| !stats.seen.contains(*w)).collect();
    eprintln!(
        "{} programs; {} output elements compared, {} skipped (not finite)",
        stats.programs, stats.compared, stats.skipped
    );
    assert!(missing.is_empty(), "the generator never produced {missing:?}");
}

/// The source as a flat list of token strings (groups as their delimiters).
fn tokens(source: &str) -> Vec<String> {
    fn walk(ts: proc_macro2::TokenStream, out: &mut Vec<String>) {
        // A joint punctuation (`-` of `->`) stays one token with the next.
        let mut joint = String::new();
        for tt in ts {
            match tt {
                proc_macro2::TokenTree::Punct(p) => {
                    joint.push(p.as_char());
                    if p.spacing() == proc_macro2::Spacing::Alone {
                        out.push(std::mem::take(&mut joint));
                    }
                }
                proc_macro2::TokenTree::Group(g) => {
                    let (open, close) = match g.delimiter() {
                        proc_macro2::Delimiter::Parenthesis => ("(", ")"),
                        proc_macro2::Delimiter::Brace => ("{", "}"),
                        proc_macro2::Delimiter::Bracket => ("[", "]"),
                        proc_macro2::Delimiter::None => ("", ""),
                    };
                    out.push(open.into());
                    walk(g.stream(), out);
                    out.push(close.into());
                }
                other => out.push(other.to_string()),
            }
        }
    }
    let mut out = vec![];
    walk(source.parse().expect("generated sources tokenize"), &mut out);
    out
}

/// Tokens a mutation may insert: DSL words, punctuation, odd literals.
const VOCAB: &[&str] = &[
    "acc",
    "x0",
    "x1",
    "v0",
    "v1",
    "a",
    "b",
    "_",
    "let",
    "fn",
    "mut",
    "Acc",
    "Tile",
    "HalfTile",
    "DoubleTile",
    "PerRow",
    "PerCol",
    "Scalar",
    "RowPartial",
    "ColPartial",
    "LsePartial",
    "RowMaxPartial",
    "ColMaxPartial",
    "bf16",
    "f32",
    "i32",
    "f16",
    "<",
    ">",
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    ",",
    ";",
    "=",
    "+",
    "-",
    "*",
    "/",
    "%",
    "!",
    "&",
    "->",
    "::",
    "#",
    "exp",
    "log",
    "silu",
    "select",
    "max",
    "min",
    "pair",
    "unpair",
    "row_sum",
    "col_sum",
    "row_max",
    "col_max",
    "row_lse",
    "gather",
    "onehot",
    "0",
    "1",
    "2.5",
    "1e400",
    "1e-400",
    "-0.0",
    "\"s\"",
    "'c'",
    "true",
    "18446744073709551616",
    "tile",
    "cluster",
    "schedule",
    "pingpong",
    "b_layout",
    "kn",
    "(128, 128)",
    "(64, 64)",
    "coda",
    "epilogue",
    "unsafe",
    "async",
    "self",
    "x0.y",
    "f(x)",
];

/// Parses and lowers `source`; whatever lowers must also round-trip and interpret.
fn lower_never_panics(source: &str) -> Result<(), TestCaseError> {
    let Ok(file) = syn::parse_file(source) else {
        return Ok(());
    };
    let Ok(programs) = coda_dsl::lower_file(&file) else {
        return Ok(());
    };
    for p in programs {
        let back = Program::from_json(&p.to_json()).map_err(|e| TestCaseError::fail(format!("JSON: {e}")))?;
        prop_assert_eq!(&back, &p, "JSON round trip");
        for n in [2, 6] {
            let inp = inputs(&p, 3, n, 7);
            for precision in [Precision::F64, Precision::F32, Precision::Bf16Unfused] {
                interp::evaluate(&p, 3, n, &inp, precision).map_err(TestCaseError::fail)?;
            }
        }
    }
    Ok(())
}

#[test]
fn mutated_sources_never_panic() {
    // A program and up to 4 mutations: (kind, position, token).
    let strategy = (testgen::choices(), prop::collection::vec((0u8..4, any::<usize>(), 0..VOCAB.len()), 1..5));
    // Shown (and shrunk) as the mutated source.
    let sources = strategy.prop_map(|(choices, edits)| {
        let mut toks = tokens(&testgen::generate(&choices, true).source);
        for (kind, at, word) in edits {
            let i = at % toks.len().max(1);
            match kind {
                0 if !toks.is_empty() => drop(toks.remove(i)),
                1 if toks.len() > 1 => {
                    let j = (at / 7) % toks.len();
                    toks.swap(i, j);
                }
                2 => toks.insert(i, VOCAB[word].to_string()),
                _ if !toks.is_empty() => toks[i] = VOCAB[word].to_string(),
                _ => {}
            }
        }
        toks.join(" ")
    });
    let result = testgen::runner(1500, 0xc0da_0002).run(&sources, |source| lower_never_panics(&source));
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn token_soup_never_panics() {
    let strategy = (
        prop::collection::vec(0..VOCAB.len(), 0..40),
        prop::collection::vec(0..VOCAB.len(), 0..12),
        prop::collection::vec(0..VOCAB.len(), 0..8),
    );
    let sources = strategy.prop_map(|(body, params, ret)| {
        let words = |ws: &[usize]| ws.iter().map(|&w| VOCAB[w]).collect::<Vec<_>>().join(" ");
        format!(
            "#[coda::epilogue] fn soup(acc: Acc, {}) -> {} {{ let y = acc; {} }}",
            words(&params),
            words(&ret),
            words(&body)
        )
    });
    let result = testgen::runner(1000, 0xc0da_0003).run(&sources, |source| lower_never_panics(&source));
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// Found by `generated_programs_lower_and_interpret`: a `PerCol` output of a
/// uniform value (a constant or scalar) indexed the value's single column at
/// every column and panicked (`index out of bounds: the len is 1 but the
/// index is 1`, interp.rs); now every column gets the value.
#[test]
fn per_col_output_of_a_uniform_value() {
    let source = "#[coda::epilogue]\nfn gen_0(acc: Acc, s: Scalar) -> (Tile<bf16>, PerCol<bf16>) {\n    let y = acc;\n    let c = s * 2.0;\n    (y, c)\n}\n";
    let p = lower(source).unwrap().remove(0);
    let inp = Inputs { acc: vec![0.0; 2 * 4], scalars: HashMap::from([("s".into(), 1.5)]), ..Inputs::default() };
    for precision in [Precision::F64, Precision::F32, Precision::Bf16Unfused] {
        let out = interp::evaluate(&p, 2, 4, &inp, precision).unwrap();
        assert_eq!(out["c"], [3.0; 4]);
    }
}

/// Found by `mutated_sources_never_panic` with 30,000 cases: `pair` of a
/// row vector (or scalar, column vector) and a full-width value is
/// double-width to the frontend, which accepts it as a `DoubleTile`
/// output, but `Program::widths` (which the interpreter and the codegen
/// read) doubled only the first operand's width and made it full: the
/// interpreter panicked (`the len is 2 but the index is 2`). Both now take
/// `Width::paired`.
#[test]
fn pair_of_a_row_vector_and_a_full_value_is_double_width() {
    let source = "#[coda::epilogue]\nfn gen_0(acc: Acc, r: PerRow<f32>) -> DoubleTile<bf16> {\n    let d = pair(r, acc);\n    d\n}\n";
    let p = lower(source).unwrap().remove(0);
    assert_eq!(p.widths()[p.outputs[0].value], coda_dsl::ir::Width::Double);
    let inp = Inputs { acc: vec![1.0, 2.0, 3.0, 4.0], tensors: HashMap::from([("r".into(), vec![5.0, 6.0])]), ..Inputs::default() };
    for precision in [Precision::F64, Precision::F32, Precision::Bf16Unfused] {
        let out = interp::evaluate(&p, 2, 2, &inp, precision).unwrap();
        assert_eq!(out["d"], [5.0, 1.0, 5.0, 2.0, 6.0, 3.0, 6.0, 4.0], "{precision:?}");
    }
}

/// Found while writing the fuzz vocabulary (`1e400`, which random mutations
/// rarely put in a valid place): a literal beyond f64's range lowered
/// to an infinite constant, which `Program::to_json` wrote as `null` and
/// `from_json` refused (`invalid type: null, expected f64`); the macro embeds
/// that JSON. The frontend now refuses the literal, as rustc does.
#[test]
fn infinite_literal_is_refused() {
    let source = "#[coda::epilogue]\nfn gen_0(acc: Acc) -> Tile<bf16> {\n    let y = acc * 1e400;\n    y\n}\n";
    let e = lower(source).unwrap_err();
    assert!(e.contains("literal out of range for f32"), "{e}");
}

/// Found by `generated_programs_lower_and_interpret`: the constant
/// 3.8269763821333124e-5 came back from JSON as 3.826976382133312e-5 (one
/// ulp off: serde_json's default float parser is not exact), so the IR the
/// macro embeds differed from the one the build compiled. coda-dsl now
/// enables serde_json's `float_roundtrip`.
#[test]
fn float_constants_round_trip_through_json() {
    let source = "#[coda::epilogue]\nfn gen_0(acc: Acc) -> Tile<bf16> {\n    let v0 = (1.0 + 3.8269763821333124e-5) + acc;\n    v0\n}\n";
    let p = lower(source).unwrap().remove(0);
    assert_eq!(Program::from_json(&p.to_json()).unwrap(), p);
}

/// Found by the H200 batch (`coda-random-programs`, seed 0xc0da0201, its
/// program 13): the shared-memory estimate (`coda_dsl::smem`) left this map
/// program 2.04 mainloop stages of 48 KiB where CUTLASS's count gives 1 and
/// nvcc stops on "Specialization requires Stages set to value 2 or more".
/// The missing term: each `PerCol` input is staged through 1 KiB of shared
/// memory (`Sm90RowBroadcast`, tile_n f32 values). Fixed; coda-codegen's
/// `smem_estimate` test checks the estimate against nvcc's sizes. Since
/// session 23 a tile input may take fewer load stages than the builder's 4
/// (`coda::sm90::Gemm`): this program fits with 2 or 3 (nvcc: 3, and 2
/// mainloop stages) and is accepted; with 4 it would still not.
#[test]
fn smem_estimate_keeps_room_for_cutlass_storage() {
    let source = "#[coda::epilogue(tile = (128, 256), b_layout = nk)]\n\
        pub fn random_013(x0: Tile<f32>, x1: PerCol<f32>, x2: PerCol<f32>) -> (RowPartial, RowPartial, RowPartial, HalfTile<f32>, HalfTile<f32>, RowPartial<f32>) {\n\
        let v0 = tanh(0.5);\n    let v1 = select(3, 0.5904146753229235, v0);\n    let (v2, v3) = unpair((10.0 * x2));\n    let v4 = 10.0;\n    let v5 = v4;\n\
        let v6 = (select(abs(v4), x2, select(v4, 10.0, 2128168.920084873)) + 1.5e2);\n    let (v7, v8) = unpair((v4 + v6));\n\
        let v9 = (x0 / select(silu(v5), select(v0, x0, x2), select(v6, v4, v4)));\n    let v10 = (x1 / min(select(v6, v5, 1e-3), select(x1, v1, 10.0)));\n\
        let v11 = row_sum(pair(v7, v7));\n    let v12 = row_sum(pair(v8, v8));\n    let v13 = row_sum(v9);\n    let v14 = row_sum(v10);\n\
        (v14, v11, v12, v3, v2, v13)\n}\n";
    let p = lower(source).unwrap().remove(0);
    let inputs: Vec<_> = p.inputs.iter().map(|i| i.kind).collect();
    let outputs: Vec<_> = p.outputs.iter().map(|o| o.kind).collect();
    let stages = |t: &smem::Subtile| {
        let (base, items) = smem::usage(t, &inputs, &outputs);
        smem::stages_left(&p.config, base + items.iter().sum::<usize>())
    };
    let builder = smem::Subtile::of(&p.config, p.group_size(), coda_dsl::ir::Collective::of(&inputs, &outputs).element);
    assert_eq!(builder.load_stages, 4);
    assert!(stages(&builder) < 2);
    assert!(stages(&builder.fewest_load_stages(&inputs, &outputs)) >= 2);
}

#[test]
fn map_batches_are_the_draws_maps() {
    let all = testgen::batch(60, 0xc0da_0201, "random_");
    let maps = testgen::batch_where(4, 0xc0da_0201, "random_", |g| g.is_map);
    assert_eq!(maps.len(), 4);
    for g in &maps {
        let same = all.iter().find(|a| a.name == g.name).expect("each kept program is one of the draw's, by name");
        assert_eq!(same.source, g.source);
        let lowered = lower(&g.source).unwrap_or_else(|e| panic!("{e}\n{}", g.source));
        assert!(lowered.iter().all(|p| p.is_map()), "{} is not a map program:\n{}", g.name, g.source);
    }
    let first: Vec<&str> = all.iter().filter(|g| g.is_map).take(4).map(|g| g.name.as_str()).collect();
    assert_eq!(maps.iter().map(|g| g.name.as_str()).collect::<Vec<_>>(), first, "the first maps of the draw, in order");
}
