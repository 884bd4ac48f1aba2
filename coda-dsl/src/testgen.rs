//! A seeded generator of well-typed DSL programs, as Rust source text, for
//! the property tests of this crate and of `coda-codegen` (feature `testgen`).
//!
//! A program is a pure function of a list of choices (`&[u32]`): each
//! decision reads the next choice, and a missing choice reads as 0, which
//! always picks the simplest option (fewest inputs, statements and outputs,
//! leaves rather than operators, the default config). So proptest's
//! shrinking of the choice list (dropping choices, lowering them towards 0)
//! shrinks the program, and [`programs`] is a strategy with useful
//! minimisation.
//!
//! Coverage: every input kind and element type (`PerRow<i32>` only through
//! `gather`/`onehot`), map programs (no `Acc`, the first input a `Tile`),
//! scalars and float/integer literals, element-wise expressions of random
//! depth over every unary and binary operator, `pow` and `select`, `unpair` of
//! full-width values and `DoubleTile` inputs, `pair` of half- and
//! full-width values, `row_sum`/`col_sum`/`row_max`/`col_max`/`row_lse`,
//! `gather`/`onehot`, and every output kind, several of each; options drawn
//! from the configs [`Config::check`] accepts, each key written or left at
//! its default.
//!
//! Every program uses every input and every `let`, and stays within the
//! shared-memory budget of its config, so the frontend accepts it: tile
//! inputs and outputs are counted conservatively (every `Tile` input as a
//! TMA load, not the collective's C; every `Tile` output as an extra store,
//! not D; the f32 base), and a value whose store would not fit is reduced
//! with `row_sum` instead.

use std::fmt;

use proptest::prelude::*;
use proptest::test_runner::{RngSeed, TestRunner};

use crate::ir::{
    Accumulation, BLayout, BinaryOp, Config, DType, GROUP_SIZES, GroupOp, InputKind, OperandScale, Operands, OutputKind, Schedule, UnaryOp, Width,
};
use crate::smem;

/// One generated program.
#[derive(Clone, PartialEq)]
pub struct Generated {
    /// The whole Rust source: one `#[coda::epilogue(...)]` function.
    pub source: String,
    /// The function's name.
    pub name: String,
    /// The config its attribute asks for.
    pub config: Config,
    /// An even, ragged `N` to interpret it at (not a multiple of any tile width).
    pub n: usize,
    /// A map program: no `Acc`, the first input a `Tile`.
    pub is_map: bool,
}

impl fmt::Debug for Generated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Generated (n = {}):\n{}", self.n, self.source)
    }
}

/// A proptest runner with a fixed seed, so that CI checks the same cases
/// every run, and no failure files; `CODA_PROPTEST_CASES` overrides `cases`.
pub fn runner(cases: u32, seed: u64) -> TestRunner {
    let cases = std::env::var("CODA_PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(cases);
    TestRunner::new(proptest::test_runner::Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        max_shrink_iters: 4096,
        ..Default::default()
    })
}

/// `count` programs drawn from `seed` (the same list on every call), public
/// and named `{prefix}{index}`: a batch to compile into one crate.
pub fn batch(count: usize, seed: u64, prefix: &str) -> Vec<Generated> {
    batch_where(count, seed, prefix, |_| true)
}

/// The first `count` programs drawn from `seed` that `keep` accepts, each
/// named by its index in the whole draw (so a program keeps its name and
/// source whichever filter picked it). It draws until `count` are kept, so
/// `keep` must accept a share of all programs (a map program: about 1 in 7).
pub fn batch_where(count: usize, seed: u64, prefix: &str, keep: impl Fn(&Generated) -> bool) -> Vec<Generated> {
    use proptest::strategy::ValueTree;
    let mut runner = runner(1, seed);
    (0..)
        .map(|i| (i, gpu_programs().new_tree(&mut runner).expect("the generator never rejects").current()))
        .filter(|(_, g)| keep(g))
        .take(count)
        .map(|(i, g)| {
            let name = format!("{prefix}{i:03}");
            let source = g.source.replacen(&format!("fn {}(", g.name), &format!("pub fn {name}("), 1);
            Generated { source, name, ..g }
        })
        .collect()
}

/// The choice lists programs are generated from.
pub fn choices() -> impl Strategy<Value = Vec<u32>> {
    prop::collection::vec(any::<u32>(), 0..400)
}

/// Generated programs, shrinking with their choices: half of their
/// `select` conditions are comparisons.
pub fn programs() -> impl Strategy<Value = Generated> {
    choices().prop_map(|c| generate(&c, true))
}

/// As [`programs`], without comparisons: the programs of [`batch`], checked
/// on a GPU against the f64 interpreter with the bf16 yardstick, which a
/// comparison of two computed values breaks (near its threshold the device,
/// the f64 reference and the bf16 path may each take another branch). A
/// condition reads no choice for a comparison here.
fn gpu_programs() -> impl Strategy<Value = Generated> {
    choices().prop_map(|c| generate(&c, false))
}

/// The choices, read in order; past the end every choice is 0.
struct Src<'a> {
    c: &'a [u32],
    i: usize,
}

impl Src<'_> {
    fn next(&mut self) -> u32 {
        let v = self.c.get(self.i).copied().unwrap_or(0);
        self.i += 1;
        v
    }
    /// In `0..n` (0 when the choices are exhausted).
    fn below(&mut self, n: usize) -> usize {
        self.next() as usize % n.max(1)
    }
    /// True with probability `pct`%, false when the choices are exhausted.
    fn chance(&mut self, pct: u32) -> bool {
        self.next() % 100 >= 100 - pct
    }
    fn pick<'t, T>(&mut self, items: &'t [T]) -> &'t T {
        &items[self.below(items.len())]
    }
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    /// An element-wise value (any width, `Double` only from `pair` or a `DoubleTile`).
    Elem,
    /// A `PerRow<i32>` input.
    Index,
    /// A reduction or gather: only returnable, as this output.
    Out(OutputKind),
}

#[derive(Clone, Debug)]
struct Val {
    name: String,
    width: Width,
    kind: Kind,
    /// `pair(a, b)` of full-width values: only returnable, as a `DoubleTile`
    /// (its shared memory is taken when it is made); other double-width
    /// values are `DoubleTile` inputs and their aliases, only `unpair`ed.
    is_pair: bool,
    reads: usize,
    returned: bool,
}

struct Gen<'a> {
    s: Src<'a>,
    config: Config,
    vals: Vec<Val>,
    stmts: Vec<String>,
    lets: usize,
    /// Conservative shared memory used so far.
    smem: usize,
    /// The group size the program's group reductions use, if it may have any.
    group: Option<usize>,
    /// Whether `select` conditions may be comparisons (see [`programs`]).
    comparisons: bool,
}

const LITERALS: [&str; 10] = ["1.0", "0.5", "2.0", "0.0", "3", "1e-3", "1.5e2", "0.7071067811865476", "10.0", "0.25"];

/// The leaf widths an expression of width `target` may combine.
fn fits(target: Width, w: Width) -> bool {
    match target {
        Width::Uniform => w == Width::Uniform,
        Width::Row => matches!(w, Width::Row | Width::Uniform),
        Width::Col => matches!(w, Width::Col | Width::Uniform),
        Width::Full => matches!(w, Width::Full | Width::Col | Width::Row | Width::Uniform),
        Width::Half => matches!(w, Width::Half | Width::Row | Width::Uniform),
        Width::Double => false,
    }
}

impl Gen<'_> {
    fn fresh(&mut self) -> String {
        self.lets += 1;
        format!("v{}", self.lets - 1)
    }

    fn fits_smem(&self, bytes: usize) -> bool {
        smem::stages_left(&self.config, self.smem + bytes) >= 2
    }

    /// The builder's epilogue subtile (one group wide where the program may
    /// reduce groups): the narrowest the codegen gives, so what fits here
    /// fits there. Generated tile outputs are bf16 or f32, never 8-bit.
    fn subtile(&self) -> smem::Subtile {
        smem::Subtile::of(&self.config, self.group, DType::Bf16)
    }

    fn add(&mut self, name: String, width: Width, kind: Kind, is_pair: bool) {
        self.vals.push(Val { name, width, kind, is_pair, reads: 0, returned: false });
    }

    fn read(&mut self, i: usize) -> String {
        self.vals[i].reads += 1;
        self.vals[i].name.clone()
    }

    fn has_exact(&self, w: Width) -> bool {
        w == Width::Uniform || self.vals.iter().any(|v| v.kind == Kind::Elem && v.width == w)
    }

    fn index(&mut self) -> Option<usize> {
        let idx: Vec<usize> = (0..self.vals.len()).filter(|&i| self.vals[i].kind == Kind::Index).collect();
        if idx.is_empty() { None } else { Some(idx[self.s.below(idx.len())]) }
    }

    /// A name, literal or `onehot` of a width that `target` accepts.
    fn leaf(&mut self, target: Width) -> (String, Width) {
        let names: Vec<usize> = (0..self.vals.len())
            .filter(|&i| self.vals[i].kind == Kind::Elem && fits(target, self.vals[i].width))
            .collect();
        let has_index = fits(target, Width::Full) && self.vals.iter().any(|v| v.kind == Kind::Index);
        let k = self.s.below(names.len() + 1 + has_index as usize);
        if k < names.len() {
            let i = names[k];
            (self.read(i), self.vals[i].width)
        } else if k == names.len() {
            let lit = if self.s.chance(30) {
                // Any finite f64, written as Rust prints it (`0.1`, `1e-7`, `2.5e20`).
                let x = self.s.next() as f64 / u32::MAX as f64 * 10f64.powi(self.s.below(17) as i32 - 8);
                format!("{x:?}")
            } else {
                self.s.pick(&LITERALS).to_string()
            };
            (lit, Width::Uniform)
        } else {
            let t = self.index().expect("an index exists");
            (format!("onehot({})", self.read(t)), Width::Full)
        }
    }

    /// An element-wise expression whose width `target` accepts, and its width.
    fn expr(&mut self, target: Width, depth: usize) -> (String, Width) {
        let group = self.group.filter(|_| fits(target, Width::Full) && self.has_exact(Width::Full));
        let form = if depth == 0 { 0 } else { self.s.below(if group.is_some() { 6 } else { 5 }) };
        let d = depth.saturating_sub(1);
        match form {
            1 => {
                // Every unary op, or `pow` with a small exponent.
                let i = self.s.below(UnaryOp::ALL.len() + 1);
                let (a, w) = self.expr(target, d);
                let e = match UnaryOp::ALL.get(i) {
                    Some(UnaryOp::Neg) => format!("(-{a})"),
                    Some(op) => format!("{}({a})", op.name()),
                    // Exponents up to 4 (the frontend takes 8): nested powers stay in f32's range.
                    None => format!("pow({a}, {})", 1 + self.s.below(4)),
                };
                (e, w)
            }
            2 | 3 => {
                let (a, wa) = self.expr(target, d);
                let (b, wb) = self.expr(target, d);
                let w = wa.join(wb).expect("widths a target accepts join");
                let e = if form == 2 {
                    format!("({a} {} {b})", self.s.pick(&["+", "-", "*", "/"]))
                } else {
                    format!("{}({a}, {b})", self.s.pick(&["max", "min"]))
                };
                (e, w)
            }
            4 => {
                // The condition: any value (≠ 0 selects), or half the time a comparison.
                let (c, wc) = self.expr(target, d);
                let (c, wc) = if self.comparisons && self.s.below(2) == 0 {
                    let (r, wr) = self.expr(target, d);
                    let op = self.s.pick(&BinaryOp::COMPARISONS).comparison().expect("a comparison");
                    (format!("({c} {op} {r})"), wc.join(wr).expect("widths a target accepts join"))
                } else {
                    (c, wc)
                };
                let (a, wa) = self.expr(target, d);
                let (b, wb) = self.expr(target, d);
                let w = wc.join(wa).and_then(|w| w.join(wb)).expect("widths a target accepts join");
                (format!("select({c}, {a}, {b})"), w)
            }
            5 => {
                let size = group.expect("form 5 is drawn only with a group size");
                let a = self.exact(Width::Full);
                (format!("{}({a}, {size})", self.s.pick(&GroupOp::ALL).name()), Width::Full)
            }
            _ => self.leaf(target),
        }
    }

    /// An expression of exactly width `w` (which [`Self::has_exact`]).
    fn exact(&mut self, w: Width) -> String {
        let depth = self.s.below(4);
        let (e, got) = self.expr(w, depth);
        if got == w {
            return e;
        }
        // Not uniform: a uniform target gives a uniform expression.
        let (leaf, _) = self.exact_leaf(w);
        format!("({e} {} {leaf})", self.s.pick(&["+", "*", "-"]))
    }

    fn exact_leaf(&mut self, w: Width) -> (String, Width) {
        let names: Vec<usize> =
            (0..self.vals.len()).filter(|&i| self.vals[i].kind == Kind::Elem && self.vals[i].width == w).collect();
        let i = names[self.s.below(names.len())];
        (self.read(i), w)
    }

    /// One random `let` (or `let (a, b) = unpair(..)`) statement.
    fn statement(&mut self) {
        let index = self.vals.iter().any(|v| v.kind == Kind::Index);
        let doubles: Vec<usize> =
            (0..self.vals.len()).filter(|&i| self.vals[i].width == Width::Double && !self.vals[i].is_pair).collect();
        match self.s.below(8) {
            // unpair
            1 | 2 => {
                let src = if !doubles.is_empty() && self.s.chance(40) {
                    let i = doubles[self.s.below(doubles.len())];
                    self.read(i)
                } else if self.has_exact(Width::Col) && self.s.chance(20) {
                    self.exact(Width::Col)
                } else {
                    self.exact(Width::Full)
                };
                self.unpair(&src, true);
            }
            // pair
            3 => {
                let double = smem::output(&self.subtile(), OutputKind::DoubleTile(DType::Bf16), false);
                let half = self.has_exact(Width::Half) && (self.s.chance(50) || !self.fits_smem(double));
                if !half && !self.fits_smem(double) {
                    return;
                }
                let w = if half { Width::Half } else { Width::Full };
                let (a, b) = (self.exact(w), self.exact(w));
                let name = self.fresh();
                self.stmts.push(format!("let {name} = pair({a}, {b});"));
                if !half {
                    self.smem += double;
                }
                let out = if half { Width::Full } else { Width::Double };
                self.add(name, out, Kind::Elem, !half);
            }
            // reduction
            4 => {
                let target = *self.s.pick(&[Width::Full, Width::Full, Width::Row, Width::Col, Width::Uniform]);
                let target = if self.has_exact(target) { target } else { Width::Full };
                let depth = self.s.below(4);
                let (e, _) = self.expr(target, depth);
                let (f, kind) = *self.s.pick(&[
                    ("row_sum", OutputKind::RowPartial),
                    ("col_sum", OutputKind::ColPartial),
                    ("row_lse", OutputKind::LsePartial),
                    ("row_max", OutputKind::RowMaxPartial),
                    ("col_max", OutputKind::ColMaxPartial),
                ]);
                let name = self.fresh();
                self.stmts.push(format!("let {name} = {f}({e});"));
                self.add(name, Width::Full, Kind::Out(kind), false);
            }
            // gather
            5 if index => {
                let x = if self.has_exact(Width::Col) && self.s.chance(25) {
                    self.exact(Width::Col)
                } else {
                    self.exact(Width::Full)
                };
                let t = self.index().expect("an index exists");
                let t = self.read(t);
                let name = self.fresh();
                self.stmts.push(format!("let {name} = gather({x}, {t});"));
                self.add(name, Width::Full, Kind::Out(OutputKind::PerRow(DType::F32)), false);
            }
            // an alias of a DoubleTile input
            6 if !doubles.is_empty() && self.s.chance(20) => {
                let i = doubles[self.s.below(doubles.len())];
                let src = self.read(i);
                let name = self.fresh();
                self.stmts.push(format!("let {name} = {src};"));
                self.add(name, Width::Double, Kind::Elem, false);
            }
            // an element-wise value
            _ => {
                let mut targets = vec![Width::Full, Width::Uniform];
                targets.extend([Width::Row, Width::Col, Width::Half].into_iter().filter(|w| self.has_exact(*w)));
                let target = *self.s.pick(&targets);
                let depth = self.s.below(5);
                let (e, w) = self.expr(target, depth);
                let name = self.fresh();
                self.stmts.push(format!("let {name} = {e};"));
                self.add(name, w, Kind::Elem, false);
            }
        }
    }

    /// `let (x, y) = unpair(src);`, either name maybe `_`.
    fn unpair(&mut self, src: &str, wild: bool) {
        // The source's width: a double name halves to full, anything else to half.
        let w =
            if self.vals.iter().any(|v| v.name == src && v.width == Width::Double) { Width::Full } else { Width::Half };
        let mut names = vec![];
        for _ in 0..2 {
            if wild && self.s.chance(10) {
                names.push("_".to_string());
            } else {
                let n = self.fresh();
                self.add(n.clone(), w, Kind::Elem, false);
                names.push(n);
            }
        }
        self.stmts.push(format!("let ({}, {}) = unpair({src});", names[0], names[1]));
    }

    /// Returns value `i` as an output, or reduces it to a partial that is
    /// returned when its store would not fit. Pushes `(name, type)`.
    fn output(&mut self, i: usize, outs: &mut Vec<(String, String)>) {
        let v = self.vals[i].clone();
        let float = |s: &mut Src| if s.chance(50) { "f32" } else { "bf16" };
        let ty = match v.kind {
            Kind::Index => unreachable!("index vectors are inputs"),
            Kind::Out(OutputKind::RowPartial) => Some(self.s.pick(&["RowPartial<f32>", "RowPartial"]).to_string()),
            Kind::Out(OutputKind::ColPartial) => Some("ColPartial<f32>".to_string()),
            Kind::Out(OutputKind::LsePartial) => Some("LsePartial<f32>".to_string()),
            Kind::Out(OutputKind::RowMaxPartial) => Some("RowMaxPartial<f32>".to_string()),
            Kind::Out(OutputKind::ColMaxPartial) => Some("ColMaxPartial<f32>".to_string()),
            Kind::Out(_) => Some("PerRow<f32>".to_string()),
            Kind::Elem => {
                let t = float(&mut self.s);
                let d = if t == "f32" { DType::F32 } else { DType::Bf16 };
                let tile = smem::output(&self.subtile(), OutputKind::Tile(d), false);
                let choice = match v.width {
                    Width::Row => *self.s.pick(&["PerRow", "PerRow", "Tile"]),
                    Width::Col => *self.s.pick(&["PerCol", "PerCol", "Tile"]),
                    Width::Uniform => *self.s.pick(&["Tile", "PerRow", "PerCol"]),
                    Width::Half => "HalfTile",
                    // Its shared memory was taken by the `pair`.
                    Width::Double if v.is_pair => "DoubleTile",
                    Width::Double => "",
                    Width::Full => "Tile",
                };
                let bytes = match choice {
                    "Tile" => tile,
                    "HalfTile" => smem::output(&self.subtile(), OutputKind::HalfTile(d), false),
                    _ => 0,
                };
                if choice.is_empty() || !self.fits_smem(bytes) {
                    None
                } else {
                    self.smem += bytes;
                    Some(if choice == "DoubleTile" { "DoubleTile<bf16>".to_string() } else { format!("{choice}<{t}>") })
                }
            }
        };
        match ty {
            Some(ty) => {
                self.vals[i].returned = true;
                let at = self.s.below(outs.len() + 1);
                outs.insert(at, (v.name, ty));
            }
            // Reduce it instead: a partial costs no shared memory.
            None => {
                let name = self.read(i);
                let e = match v.width {
                    Width::Half => format!("pair({name}, {name})"),
                    Width::Double => {
                        self.unpair(&name, false);
                        let n = self.vals.len();
                        let (x, y) = (self.read(n - 2), self.read(n - 1));
                        format!("{x} - {y}")
                    }
                    _ => name,
                };
                let s = self.fresh();
                self.stmts.push(format!("let {s} = row_sum({e});"));
                self.add(s, Width::Full, Kind::Out(OutputKind::RowPartial), false);
            }
        }
    }
}

/// A config and its attribute; a map program (`is_map`) has no GEMM operands to set.
fn gen_config(s: &mut Src, is_map: bool) -> (Config, String) {
    let all = Config::all();
    let k = s.below(all.len() + 1);
    if k == 0 {
        let attr = if s.chance(20) { "#[epilogue]" } else { "#[coda::epilogue]" };
        return (Config::default(), attr.to_string());
    }
    let mut c = all[k - 1];
    let mut args = vec![];
    if !is_map && s.chance(15) {
        // 8-bit operands, any mix of formats: accumulated fast in any config,
        // or promoted in the cooperative 128×128 tile (`Config::check`), blockwise or not.
        let pick = |s: &mut Src| if s.chance(50) { DType::E4m3 } else { DType::E5m2 };
        c.operands = Operands { a: pick(s), b: pick(s), ..Operands::BF16 };
        args.push(format!("a = {}", c.operands.a.rust_name()));
        args.push(format!("b = {}", c.operands.b.rust_name()));
        if s.chance(30) {
            c.operands.accum = Accumulation::Fast;
            args.push("accum = fast".to_string());
        } else {
            (c.tile_m, c.tile_n, c.schedule) = (128, 128, Schedule::Cooperative);
            if s.chance(50) {
                c.operands.scale = OperandScale::Blockwise;
                args.push("scale = blockwise(1x128, 128x128)".to_string());
            }
        }
    } else if s.chance(30) {
        c.b_layout = BLayout::Kn;
    }
    let promotes = c.operands.is_fp8() && c.operands.accum == Accumulation::Promoted;
    let default_tile = if c.schedule == Schedule::Pingpong || promotes { (128, 128) } else { (128, 256) };
    if (c.tile_m, c.tile_n) != default_tile || s.chance(50) {
        args.push(format!("tile = ({}, {})", c.tile_m, c.tile_n));
    }
    if (c.cluster_m, c.cluster_n) != (1, 1) || s.chance(50) {
        args.push(format!("cluster = ({}, {})", c.cluster_m, c.cluster_n));
    }
    if c.schedule == Schedule::Pingpong || s.chance(50) {
        args.push(format!("schedule = {}", if c.schedule == Schedule::Pingpong { "pingpong" } else { "cooperative" }));
    }
    if c.b_layout == BLayout::Kn || s.chance(30) {
        args.push(format!("b_layout = {}", if c.b_layout == BLayout::Kn { "kn" } else { "nk" }));
    }
    // Any order of the keys.
    for i in (1..args.len()).rev() {
        args.swap(i, s.below(i + 1));
    }
    (c, format!("#[coda::epilogue({})]", args.join(", ")))
}

/// The program of `choices` (with comparisons in `select` conditions or not).
pub fn generate(choices: &[u32], comparisons: bool) -> Generated {
    let mut s = Src { c: choices, i: 0 };
    // Map programs: no `Acc`, the first input a `Tile`.
    let is_map = s.chance(15);
    let (config, attr) = gen_config(&mut s, is_map);
    // A quarter of the programs may reduce groups of columns, of one size that divides the tile's N.
    let group = if s.chance(25) {
        let sizes: Vec<usize> = GROUP_SIZES.into_iter().filter(|g| config.tile_n % g == 0).collect();
        Some(*s.pick(&sizes))
    } else {
        None
    };
    let mut g = Gen { s, config, vals: vec![], stmts: vec![], lets: 0, smem: 0, group, comparisons };
    g.smem = smem::base(&g.subtile(), DType::F32);

    // Inputs: an accumulator (at any position) or, for a map program, a first `Tile`.
    let kinds = [
        InputKind::Tile(DType::Bf16),
        InputKind::PerRow(DType::F32),
        InputKind::PerCol(DType::Bf16),
        InputKind::Scalar,
        InputKind::Tile(DType::F32),
        InputKind::DoubleTile(DType::Bf16),
        InputKind::PerRow(DType::Bf16),
        InputKind::PerRow(DType::I32),
        InputKind::PerCol(DType::F32),
    ];
    let mut inputs: Vec<InputKind> = vec![];
    if is_map {
        let first = if g.s.chance(50) { InputKind::Tile(DType::F32) } else { InputKind::Tile(DType::Bf16) };
        // An f32 tile staged through a group-wide subtile can leave too little for the mainloop.
        if !g.fits_smem(smem::input(&g.subtile(), first, false, false)) {
            g.group = None;
            g.smem = smem::base(&g.subtile(), DType::F32);
        }
        g.smem += smem::input(&g.subtile(), first, false, false);
        inputs.push(first);
    }
    for _ in 0..g.s.below(6) {
        let mut k = *g.s.pick(&kinds);
        // A DoubleTile input is staged only where it fits (smem::pairs_staged): 0 here.
        let bytes = smem::input(&g.subtile(), k, false, false);
        if !g.fits_smem(bytes) {
            k = InputKind::PerRow(DType::F32);
        } else {
            g.smem += bytes;
        }
        inputs.push(k);
    }
    if !is_map {
        let at = g.s.below(inputs.len() + 1);
        inputs.insert(at, InputKind::Acc);
    }
    let mut params = vec![];
    for (i, k) in inputs.iter().enumerate() {
        let (name, ty, width, kind) = match *k {
            InputKind::Acc => ("acc".to_string(), "Acc".to_string(), Width::Full, Kind::Elem),
            InputKind::Tile(d) => (format!("x{i}"), format!("Tile<{}>", d.rust_name()), Width::Full, Kind::Elem),
            InputKind::DoubleTile(d) => {
                (format!("x{i}"), format!("DoubleTile<{}>", d.rust_name()), Width::Double, Kind::Elem)
            }
            InputKind::PerRow(DType::I32) => (format!("x{i}"), "PerRow<i32>".to_string(), Width::Row, Kind::Index),
            InputKind::PerRow(d) => (format!("x{i}"), format!("PerRow<{}>", d.rust_name()), Width::Row, Kind::Elem),
            InputKind::PerCol(d) => (format!("x{i}"), format!("PerCol<{}>", d.rust_name()), Width::Col, Kind::Elem),
            InputKind::Scalar => {
                let ty = if g.s.chance(20) { "Scalar<f32>" } else { "Scalar" };
                (format!("x{i}"), ty.to_string(), Width::Uniform, Kind::Elem)
            }
        };
        params.push(format!("{name}: {ty}"));
        g.vals.push(Val { name, width, kind, is_pair: false, reads: 0, returned: false });
    }

    // The body: each DoubleTile input is unpaired first, unless aliased.
    let n_inputs = g.vals.len();
    for i in 0..n_inputs {
        if g.vals[i].width == Width::Double && !g.s.chance(10) {
            let src = g.read(i);
            g.unpair(&src, true);
        }
    }
    for _ in 0..=g.s.below(8) {
        g.statement();
    }
    // Use every input not used yet.
    for i in 0..n_inputs {
        if g.vals[i].reads > 0 {
            continue;
        }
        let v = g.vals[i].clone();
        match (v.kind, v.width) {
            (Kind::Index, _) => {
                let t = g.read(i);
                let name = g.fresh();
                if g.s.chance(50) {
                    g.stmts.push(format!("let {name} = onehot({t});"));
                    g.add(name, Width::Full, Kind::Elem, false);
                } else {
                    let x = g.exact(Width::Full);
                    g.stmts.push(format!("let {name} = gather({x}, {t});"));
                    g.add(name, Width::Full, Kind::Out(OutputKind::PerRow(DType::F32)), false);
                }
            }
            (_, Width::Double) if g.s.chance(50) => {
                let name = g.fresh();
                let src = g.read(i);
                g.stmts.push(format!("let {name} = {src};"));
                g.add(name, Width::Double, Kind::Elem, false);
            }
            (_, Width::Double) => {
                let src = g.read(i);
                g.unpair(&src, false);
            }
            (_, w) => {
                let x = g.read(i);
                let depth = g.s.below(3);
                let (e, we) = g.expr(w, depth);
                let op = *g.s.pick(&["+", "*", "-", "/"]);
                let name = g.fresh();
                g.stmts.push(format!("let {name} = ({x} {op} {e});"));
                g.add(name, w.join(we).expect("fits"), Kind::Elem, false);
            }
        }
    }
    // Outputs: every unread value, and some read ones; the list grows when a
    // store does not fit and the value is reduced instead.
    let mut outs: Vec<(String, String)> = vec![];
    let mut i = n_inputs;
    while i < g.vals.len() {
        let v = &g.vals[i];
        if v.reads == 0 || (!v.returned && g.s.chance(15)) {
            g.output(i, &mut outs);
        }
        i += 1;
    }
    if outs.is_empty() {
        let e = g.exact(Width::Full);
        let name = g.fresh();
        g.stmts.push(format!("let {name} = {e};"));
        g.add(name, Width::Full, Kind::Elem, false);
        let last = g.vals.len() - 1;
        g.output(last, &mut outs);
        // A reduced value adds its partial, unreturned.
        if outs.is_empty() {
            let last = g.vals.len() - 1;
            g.output(last, &mut outs);
        }
    }

    let n = *g.s.pick(&[2, 6, 10, 130, 258]);
    let name = format!("gen_{}", g.s.below(1000));
    let (ret_ty, ret) = if outs.len() == 1 && g.s.chance(70) {
        (outs[0].1.clone(), outs[0].0.clone())
    } else {
        let tys: Vec<&str> = outs.iter().map(|o| o.1.as_str()).collect();
        let names: Vec<&str> = outs.iter().map(|o| o.0.as_str()).collect();
        // A one-element tuple needs its comma (`(T)` is a parenthesized type).
        let comma = if outs.len() == 1 { "," } else { "" };
        (format!("({}{comma})", tys.join(", ")), format!("({}{comma})", names.join(", ")))
    };
    let doc = if g.s.chance(30) { "/// A generated program.\n" } else { "" };
    let body: String = g.stmts.iter().map(|s| format!("    {s}\n")).collect();
    let source = format!("{attr}\n{doc}fn {name}({}) -> {ret_ty} {{\n{body}    {ret}\n}}\n", params.join(", "));
    Generated { source, name, config, n, is_map }
}
