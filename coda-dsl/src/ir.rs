//! The typed IR: what the macro, the build helper, the interpreter and the
//! codegen agree on. It is serializable so that it can be embedded in the
//! generated Rust code and hashed into the kernel cache key.

use serde::{Deserialize, Serialize};

/// Element types a tensor parameter or output can have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DType {
    Bf16,
    F32,
    I32,
    /// OCP FP8 E4M3 (`float8_e4m3fn`: no infinities, ±448 the largest finite).
    E4m3,
    /// OCP FP8 E5M2 (`float8_e5m2`: ±57344 the largest finite).
    E5m2,
}

impl DType {
    pub fn rust_name(self) -> &'static str {
        match self {
            DType::Bf16 => "bf16",
            DType::F32 => "f32",
            DType::I32 => "i32",
            DType::E4m3 => "e4m3",
            DType::E5m2 => "e5m2",
        }
    }
    pub fn bytes(self) -> usize {
        match self {
            DType::E4m3 | DType::E5m2 => 1,
            DType::Bf16 => 2,
            DType::F32 | DType::I32 => 4,
        }
    }
    /// An 8-bit float: stored saturated to its largest finite value.
    pub fn is_fp8(self) -> bool {
        matches!(self, DType::E4m3 | DType::E5m2)
    }
}

/// The GEMM's operand types and how their scales are applied: options of the
/// program, like its B layout (`#[epilogue(a = e4m3, b = e4m3, scale = ...)]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Operands {
    pub a: DType,
    pub b: DType,
    #[serde(default)]
    pub scale: OperandScale,
    /// Absent from the IR of a program that promotes (its JSON, so its fingerprint, is unchanged).
    #[serde(default, skip_serializing_if = "Accumulation::is_promoted")]
    pub accum: Accumulation,
}

impl Default for Operands {
    fn default() -> Self {
        Operands::BF16
    }
}

impl Operands {
    /// bf16 × bf16, unscaled.
    pub const BF16: Operands =
        Operands { a: DType::Bf16, b: DType::Bf16, scale: OperandScale::None, accum: Accumulation::Promoted };
    pub fn is_default(&self) -> bool {
        *self == Operands::default()
    }
    /// Both operands 8-bit floats: the FP8 mainloop, 128 columns of K per stage.
    pub fn is_fp8(&self) -> bool {
        self.a.is_fp8() && self.b.is_fp8()
    }
    /// The K extent of one mainloop stage (128 bytes of each operand row).
    pub fn tile_k(&self) -> usize {
        128 / self.a.bytes()
    }
}

/// How an FP8 mainloop accumulates (`#[epilogue(accum = fast)]`); bf16
/// products always go straight into the f32 accumulator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Accumulation {
    /// The tensor cores' partial sum of each 128 of K is added into the f32
    /// accumulator (cuBLASLt's default; Transformer Engine's split
    /// accumulator, for gradients).
    #[default]
    Promoted,
    /// The tensor cores accumulate all of K in their own, narrower precision
    /// (cuBLASLt's `FAST_ACCUM`; Transformer Engine's forward GEMMs): no
    /// second accumulator, so every bf16 tile and schedule fits.
    Fast,
}

impl Accumulation {
    pub fn is_promoted(&self) -> bool {
        *self == Accumulation::Promoted
    }
}

/// How the mainloop scales the operands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum OperandScale {
    /// Not at all: a per-tensor, per-row or per-column scale is an ordinary
    /// `Scalar`, `PerRow` or `PerCol` input of the epilogue.
    #[default]
    None,
    /// DeepSeek-V3's FP8 recipe, `blockwise(1x128, 128x128)`: `a_scale`
    /// `[ceil(K/128), M]` f32, one per row and 128 columns of K (M fastest);
    /// `b_scale` `[ceil(N/128), ceil(K/128)]` f32, one per 128 × 128 block of
    /// B. Each 128-deep slice of the product is scaled in f32 in the
    /// mainloop, so the epilogue sees the dequantised accumulator.
    Blockwise,
}

impl OperandScale {
    /// Rows and columns of K one scale covers, for `a` and for `b`.
    pub const BLOCKWISE_A: (usize, usize) = (1, 128);
    pub const BLOCKWISE_B: (usize, usize) = (128, 128);
}

/// What an input parameter is. `M × N` is the GEMM output shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum InputKind {
    /// The f32 accumulator tile `A · Bᵀ` (exactly one per program).
    Acc,
    /// A rank-2 `[M, N]` row-major tensor.
    Tile(DType),
    /// A rank-2 `[M, 2N]` tensor of column pairs: `unpair` it into its even
    /// and odd columns, each a full-width value.
    DoubleTile(DType),
    /// A rank-1 `[M]` vector: one value per row, broadcast across columns.
    PerRow(DType),
    /// A rank-1 `[N]` vector: one value per column, broadcast down rows.
    PerCol(DType),
    /// A runtime f32 scalar.
    Scalar,
}

/// What an output is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum OutputKind {
    /// A rank-2 `[M, N]` row-major tensor.
    Tile(DType),
    /// A rank-2 `[M, N/2]` tensor: a half-width value (one per column pair).
    HalfTile(DType),
    /// A rank-2 `[M, 2N]` tensor: `pair(even, odd)` of two full-width values, interleaved.
    DoubleTile(DType),
    /// f32 per-row sums over each tile's columns: one partial per (row, N-tile).
    RowPartial,
    /// f32 per-column sums over each tile's rows: one partial per (M-tile, column).
    ColPartial,
    /// f32 per-row maxima over each tile's columns (`row_max`), laid out as `RowPartial`.
    RowMaxPartial,
    /// f32 per-column maxima over each tile's rows (`col_max`), laid out as `ColPartial`.
    ColMaxPartial,
    /// f32 online log-sum-exp state `(max, Σ exp(x − max))` per (row, N-tile).
    LsePartial,
    /// One value per row: a row-uniform value, or f32 from `gather` (written
    /// only where the row's target column exists).
    PerRow(DType),
    /// One value per column: a value that varies only along the columns.
    PerCol(DType),
    /// One value per row and group of columns (the program's group size):
    /// a value of group reductions, row vectors and scalars, stored
    /// `[ceil(N/g), M]` (M fastest), the layout of a blockwise `a_scale`.
    PerGroup(DType),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Input {
    pub name: String,
    pub kind: InputKind,
}

/// How a program's tiles map onto CUTLASS's collective epilogue: the first
/// `Tile` output is D; the first `Tile` input of D's type is the C operand
/// (loaded by the collective); the epilogue's element type is D's, else the
/// first stored tile's, else bf16.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Collective {
    /// Index of D among the outputs.
    pub d: Option<usize>,
    /// Index of the C operand among the inputs.
    pub c: Option<usize>,
    pub element: DType,
}

impl Collective {
    pub fn of(inputs: &[InputKind], outputs: &[OutputKind]) -> Collective {
        let d = outputs.iter().position(|o| matches!(o, OutputKind::Tile(_)));
        let element_d = d.map(|d| match outputs[d] {
            OutputKind::Tile(t) => t,
            _ => unreachable!("d is a Tile output"),
        });
        let c = element_d.and_then(|t| inputs.iter().position(|&i| i == InputKind::Tile(t)));
        let element = element_d
            .or_else(|| {
                outputs.iter().find_map(|o| match *o {
                    OutputKind::Tile(t) | OutputKind::HalfTile(t) | OutputKind::DoubleTile(t) => Some(t),
                    _ => None,
                })
            })
            .unwrap_or(DType::Bf16);
        Collective { d, c, element }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Output {
    pub name: String,
    pub kind: OutputKind,
    pub value: NodeId,
}

pub type NodeId = usize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum UnaryOp {
    Neg,
    Exp,
    Log,
    Sqrt,
    Rsqrt,
    Abs,
    Tanh,
    Sigmoid,
    Silu,
    Cos,
    Sin,
    /// GELU, tanh form: `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`.
    Gelu,
    /// GELU with the error function: `0.5·x·(1 + erf(x/√2))`.
    GeluExact,
    /// `log(1 + eˣ)`.
    Softplus,
}

impl UnaryOp {
    pub const ALL: [UnaryOp; 14] = [
        UnaryOp::Neg,
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Abs,
        UnaryOp::Tanh,
        UnaryOp::Sigmoid,
        UnaryOp::Silu,
        UnaryOp::Cos,
        UnaryOp::Sin,
        UnaryOp::Gelu,
        UnaryOp::GeluExact,
        UnaryOp::Softplus,
    ];
    /// The DSL function name (`Neg` is the prefix `-` operator).
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Abs => "abs",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Silu => "silu",
            UnaryOp::Cos => "cos",
            UnaryOp::Sin => "sin",
            UnaryOp::Gelu => "gelu",
            UnaryOp::GeluExact => "gelu_exact",
            UnaryOp::Softplus => "softplus",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
    /// The comparisons `> >= < <= == !=`: 1 where they hold, else 0 (as IEEE
    /// compares: false with a NaN operand, but `!=` true), e.g. a ReLU mask
    /// `select(x > 0.0, g, 0.0)`.
    Gt,
    Ge,
    Lt,
    Le,
    Eq,
    Ne,
}

impl BinaryOp {
    pub const COMPARISONS: [BinaryOp; 6] = [BinaryOp::Gt, BinaryOp::Ge, BinaryOp::Lt, BinaryOp::Le, BinaryOp::Eq, BinaryOp::Ne];
    /// A comparison's operator, as Rust and C++ spell it; `None` for the others.
    pub fn comparison(self) -> Option<&'static str> {
        match self {
            BinaryOp::Gt => Some(">"),
            BinaryOp::Ge => Some(">="),
            BinaryOp::Lt => Some("<"),
            BinaryOp::Le => Some("<="),
            BinaryOp::Eq => Some("=="),
            BinaryOp::Ne => Some("!="),
            _ => None,
        }
    }
}

/// A reduction over a group of columns (see [`Op::Group`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum GroupOp {
    Sum,
    /// The sum over the group's columns below `N`, divided by their count.
    Mean,
    Max,
}

impl GroupOp {
    pub const ALL: [GroupOp; 3] = [GroupOp::Sum, GroupOp::Mean, GroupOp::Max];
    /// The DSL function name.
    pub fn name(self) -> &'static str {
        match self {
            GroupOp::Sum => "group_sum",
            GroupOp::Mean => "group_mean",
            GroupOp::Max => "group_max",
        }
    }
}

/// Group sizes a program may reduce over: the epilogue subtile is one group
/// wide, and each thread holds the whole subtile (2 rows × size/4 columns).
pub const GROUP_SIZES: [usize; 3] = [32, 64, 128];

/// One operation of the DAG. Every value is an f32 element-wise expression
/// over the `M × N` output, except the reductions (`RowSum` … `ColMax`) and `Gather`, which are only outputs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Op {
    /// The input parameter with this index in `Program::inputs`.
    Input(usize),
    Const(f64),
    Unary(UnaryOp, NodeId),
    Binary(BinaryOp, NodeId, NodeId),
    /// `select(c, a, b)`: `a` where `c != 0`, else `b`.
    Select(NodeId, NodeId, NodeId),
    /// Sum over each tile's columns of an element-wise value.
    RowSum(NodeId),
    /// The even (part 0) or odd (part 1) columns of a value: half its width.
    Unpair(NodeId, u8),
    /// Interleaves two values of equal width: `[a0, b0, a1, b1, …]`, twice the width.
    Pair(NodeId, NodeId),
    /// Sum over each tile's rows of an element-wise value.
    ColSum(NodeId),
    /// Online log-sum-exp over each tile's columns.
    RowLse(NodeId),
    /// Maximum over each tile's columns (NaN ignored, as `max` does; −∞ when none).
    RowMax(NodeId),
    /// Maximum over each tile's rows (NaN ignored; −∞ when none).
    ColMax(NodeId),
    /// `x[m, target[m]]` (the `PerRow<i32>` input `target`), where `0 ≤ target[m] < N`.
    Gather(NodeId, NodeId),
    /// 1 where the column is `target[m]` (the `PerRow<i32>` input), else 0.
    OneHot(NodeId),
    /// Each row's reduction over its group of `size` columns (columns
    /// `g·size .. (g+1)·size`, those below `N`), the result at every column
    /// of the group: a full-width value.
    Group(GroupOp, NodeId, usize),
}

impl Op {
    pub fn operands(&self) -> Vec<NodeId> {
        match *self {
            Op::Input(_) | Op::Const(_) => vec![],
            Op::Unary(_, a)
            | Op::RowSum(a)
            | Op::Unpair(a, _)
            | Op::ColSum(a)
            | Op::RowLse(a)
            | Op::RowMax(a)
            | Op::ColMax(a)
            | Op::OneHot(a)
            | Op::Group(_, a, _) => vec![a],
            Op::Binary(_, a, b) | Op::Pair(a, b) | Op::Gather(a, b) => vec![a, b],
            Op::Select(c, a, b) => vec![c, a, b],
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub op: Op,
    /// The `let` name that bound this value, if any (used to name generated code).
    pub name: Option<String>,
    /// The source line of the expression, for comments in generated code.
    pub line: usize,
}

/// How many columns a value has, relative to the accumulator's `N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Width {
    /// The same everywhere (scalars, constants).
    Uniform,
    /// The same for every column of a row (row vectors).
    Row,
    /// The same for every row of a column (column vectors): `N` values.
    Col,
    /// `N / 2`: one value per column pair.
    Half,
    /// `N`
    Full,
    /// `2N`
    Double,
}

impl Width {
    /// Columns of a value of this width when the accumulator has `n` (`Row`: 1).
    pub fn cols(self, n: usize) -> usize {
        match self {
            Width::Uniform | Width::Row => 1,
            Width::Half => n / 2,
            Width::Full | Width::Col => n,
            Width::Double => 2 * n,
        }
    }
    pub fn halved(self) -> Option<Width> {
        match self {
            Width::Full | Width::Col => Some(Width::Half),
            Width::Double => Some(Width::Full),
            _ => None,
        }
    }
    pub fn doubled(self) -> Option<Width> {
        match self {
            Width::Half => Some(Width::Full),
            Width::Full => Some(Width::Double),
            _ => None,
        }
    }
    /// The width of `pair(self, other)`: their combination's, doubled.
    pub fn paired(self, other: Width) -> Option<Width> {
        self.join(other).and_then(Width::doubled)
    }
    /// The width of an element-wise combination, if the widths are compatible.
    pub fn join(self, other: Width) -> Option<Width> {
        match (self, other) {
            (Width::Row, Width::Col) | (Width::Col, Width::Row) => Some(Width::Full),
            (Width::Col, Width::Full) | (Width::Full, Width::Col) => Some(Width::Full),
            (Width::Uniform, w) | (w, Width::Uniform) => Some(w),
            (Width::Row, w) | (w, Width::Row) => Some(w),
            (a, b) if a == b => Some(a),
            _ => None,
        }
    }
}

/// Kernel schedule of the CUTLASS SM90 TMA warp-specialized GEMM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Schedule {
    Cooperative,
    Pingpong,
}

/// How the GEMM's B operand is laid out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BLayout {
    /// `[N, K]` row-major, a PyTorch `Linear` weight: the GEMM is `A · Bᵀ`.
    #[default]
    Nk,
    /// `[K, N]` row-major: the GEMM is `A · B` (e.g. `dy · W` in a backward).
    Kn,
}

/// How one program is compiled: CTA tile and cluster shape, schedule, B layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Config {
    pub tile_m: usize,
    pub tile_n: usize,
    pub cluster_m: usize,
    pub cluster_n: usize,
    pub schedule: Schedule,
    #[serde(default)]
    pub b_layout: BLayout,
    /// Absent from the IR of a bf16 program (its JSON, so its fingerprint, is unchanged).
    #[serde(default, skip_serializing_if = "Operands::is_default")]
    pub operands: Operands,
}

impl Default for Config {
    fn default() -> Self {
        Config::DEFAULT
    }
}

impl Config {
    /// Cooperative 128×256, cluster 1×1, B `[N, K]`, bf16 operands.
    pub const DEFAULT: Config = Config {
        tile_m: 128,
        tile_n: 256,
        cluster_m: 1,
        cluster_n: 1,
        schedule: Schedule::Cooperative,
        b_layout: BLayout::Nk,
        operands: Operands::BF16,
    };
    /// Tile shapes the codegen accepts (CUTLASS SM90 bf16 GEMM tiles we build and test).
    pub const TILES: [(usize, usize); 4] = [(128, 128), (128, 192), (128, 256), (256, 128)];
    pub const CLUSTERS: [(usize, usize); 4] = [(1, 1), (2, 1), (1, 2), (2, 2)];

    /// Rules that hold for every program: ping-pong gives each consumer
    /// warpgroup a whole tile, so its tile is 128 rows, and 128×256 would
    /// spill (its accumulator alone is 128 registers a thread).
    pub fn check(&self) -> Result<(), String> {
        if !Self::TILES.contains(&(self.tile_m, self.tile_n)) {
            return Err(format!("tile ({}, {}) is not supported; use one of {:?}", self.tile_m, self.tile_n, Self::TILES));
        }
        if !Self::CLUSTERS.contains(&(self.cluster_m, self.cluster_n)) {
            return Err(format!(
                "cluster ({}, {}) is not supported; use one of {:?}",
                self.cluster_m,
                self.cluster_n,
                Self::CLUSTERS
            ));
        }
        if self.schedule == Schedule::Pingpong && self.tile_m != 128 {
            return Err("the pingpong schedule needs tile_m = 128".into());
        }
        if self.schedule == Schedule::Pingpong && self.tile_n == 256 {
            return Err("the pingpong schedule with a 128×256 tile spills registers; use 128×128 or 128×192".into());
        }
        self.check_operands()
    }

    /// The operand rules: bf16 × bf16, or two 8-bit floats (any mix of e4m3
    /// and e5m2) both K-major, in a cooperative 128×128 tile unless they
    /// accumulate fast; blockwise scales and fast accumulation on 8-bit
    /// operands only, and not together.
    fn check_operands(&self) -> Result<(), String> {
        let Operands { a, b, scale, accum } = self.operands;
        for (name, t) in [("a", a), ("b", b)] {
            if !matches!(t, DType::Bf16 | DType::E4m3 | DType::E5m2) {
                return Err(format!("operand {name} must be bf16, e4m3 or e5m2, not {}", t.rust_name()));
            }
        }
        if a.is_fp8() != b.is_fp8() {
            return Err(format!(
                "operands a = {} and b = {} must both be bf16 or both 8-bit floats (e4m3, e5m2)",
                a.rust_name(),
                b.rust_name()
            ));
        }
        // The FP8 mainloop adds the tensor cores' partial sum of each 128 of K
        // into the accumulator (in f32, scaled if blockwise) while the next
        // one's wgmmas run (coda/fp8_promotion.hpp), so a thread holds two
        // partial sums beside the accumulator: 3 × 64 registers in a 128 × 128
        // tile over two consumer warpgroups, and CUTLASS's own FP8 mainloop,
        // with one partial sum, already spills in ping-pong 128 × 128 (888 bytes).
        if accum == Accumulation::Fast && !a.is_fp8() {
            return Err("accum = fast needs 8-bit operands (a = e4m3, b = e4m3); bf16 products always accumulate in f32".into());
        }
        if accum == Accumulation::Fast && scale == OperandScale::Blockwise {
            return Err("accum = fast and scale = blockwise(...) exclude each other: blockwise scales are applied \
                        where the partial sums are promoted"
                .into());
        }
        // Accumulating fast, the mainloop holds the accumulator alone, as a bf16 one does.
        if a.is_fp8()
            && accum == Accumulation::Promoted
            && (self.schedule != Schedule::Cooperative || (self.tile_m, self.tile_n) != (128, 128))
        {
            return Err(format!(
                "8-bit operands take the cooperative schedule with a 128×128 tile (the FP8 mainloop's partial \
                 sums spill registers past that), not {}; accum = fast (no partial sums) takes any",
                self.name()
            ));
        }
        if a.is_fp8() && self.b_layout == BLayout::Kn {
            return Err("8-bit operands must both be K-major: b_layout = kn is bf16 only (store B as [N, K])".into());
        }
        if scale == OperandScale::Blockwise && !a.is_fp8() {
            return Err("scale = blockwise(1x128, 128x128) needs 8-bit operands (a = e4m3, b = e4m3)".into());
        }
        Ok(())
    }

    /// `coop_128x256_c1x1`: how symbols, build options and tuning caches name
    /// a config (the B layout and operands belong to the program, not the config).
    pub fn name(&self) -> String {
        let sched = match self.schedule {
            Schedule::Cooperative => "coop",
            Schedule::Pingpong => "pp",
        };
        format!("{sched}_{}x{}_c{}x{}", self.tile_m, self.tile_n, self.cluster_m, self.cluster_n)
    }

    /// Parses [`Config::name`]; the B layout and operands are left at their defaults.
    pub fn from_name(name: &str) -> Result<Config, String> {
        let bad = || format!("`{name}` is not a config name like `coop_128x256_c1x1` or `pp_128x128_c1x2`");
        let mut parts = name.split('_');
        let schedule = match parts.next() {
            Some("coop") => Schedule::Cooperative,
            Some("pp") => Schedule::Pingpong,
            _ => return Err(bad()),
        };
        let dims = |s: Option<&str>, prefix: &str| -> Option<(usize, usize)> {
            let (a, b) = s?.strip_prefix(prefix)?.split_once('x')?;
            Some((a.parse().ok()?, b.parse().ok()?))
        };
        let (tile_m, tile_n) = dims(parts.next(), "").ok_or_else(bad)?;
        let (cluster_m, cluster_n) = dims(parts.next(), "c").ok_or_else(bad)?;
        if parts.next().is_some() {
            return Err(bad());
        }
        let c = Config { tile_m, tile_n, cluster_m, cluster_n, schedule, ..Config::default() };
        c.check().map(|()| c).map_err(|e| format!("`{name}`: {e}"))
    }

    /// This tile, cluster and schedule with `own`'s program options (B layout, operands).
    pub fn with_options_of(&self, own: &Config) -> Config {
        Config { b_layout: own.b_layout, operands: own.operands, ..*self }
    }

    /// The tuning set of a program with `own`'s options: each config of
    /// [`Config::all`] its operands allow (8-bit ones that promote take one tile).
    pub fn all_for(own: &Config) -> Vec<Config> {
        Config::all().into_iter().map(|c| c.with_options_of(own)).filter(|c| c.check().is_ok()).collect()
    }

    /// The full tuning set: every tile, cluster and schedule that passes [`Config::check`].
    pub fn all() -> Vec<Config> {
        let mut out = vec![];
        for schedule in [Schedule::Cooperative, Schedule::Pingpong] {
            for (tile_m, tile_n) in Self::TILES {
                for (cluster_m, cluster_n) in Self::CLUSTERS {
                    let c = Config { tile_m, tile_n, cluster_m, cluster_n, schedule, ..Config::default() };
                    if c.check().is_ok() {
                        out.push(c);
                    }
                }
            }
        }
        out
    }
}

/// A whole epilogue program.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Program {
    pub name: String,
    pub doc: String,
    pub config: Config,
    pub inputs: Vec<Input>,
    pub nodes: Vec<Node>,
    pub outputs: Vec<Output>,
}

impl Program {
    pub fn collective(&self) -> Collective {
        let inputs: Vec<InputKind> = self.inputs.iter().map(|i| i.kind).collect();
        let outputs: Vec<OutputKind> = self.outputs.iter().map(|o| o.kind).collect();
        Collective::of(&inputs, &outputs)
    }
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("IR serializes")
    }
    /// A hash of the program (FNV-1a of its JSON): the build writes it beside
    /// the compiled kernels and the macro checks it, so a program can never
    /// launch the kernels of another of the same name.
    pub fn fingerprint(&self) -> u64 {
        self.to_json().bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
    }
    pub fn from_json(s: &str) -> Result<Program, serde_json::Error> {
        serde_json::from_str(s)
    }
    pub fn input(&self, name: &str) -> Option<(usize, &Input)> {
        self.inputs.iter().enumerate().find(|(_, p)| p.name == name)
    }
    /// Number of M-tiles, i.e. column partials per column, for an `m`-row problem.
    pub fn m_tiles(&self, m: usize) -> usize {
        m.div_ceil(self.config.tile_m)
    }
    /// Columns of a column-partials buffer: `N` rounded up to the tile width.
    pub fn n_padded(&self, n: usize) -> usize {
        n.div_ceil(self.config.tile_n) * self.config.tile_n
    }
    /// Number of N-tiles, i.e. partials per row, for an `n`-column problem.
    pub fn n_tiles(&self, n: usize) -> usize {
        n.div_ceil(self.config.tile_n)
    }
    /// Rows of a partials buffer: `M` rounded up to the tile height.
    pub fn m_padded(&self, m: usize) -> usize {
        m.div_ceil(self.config.tile_m) * self.config.tile_m
    }
    /// The tensor parameters of the launch ABI, in order: tensor inputs then outputs.
    pub fn tensor_params(&self) -> Vec<TensorParam> {
        let ins = self.inputs.iter().filter_map(|p| {
            let (shape, dtype) = match p.kind {
                InputKind::Tile(d) => (Shape::Tile, d),
                InputKind::DoubleTile(d) => (Shape::DoubleTile, d),
                InputKind::PerRow(d) => (Shape::PerRow, d),
                InputKind::PerCol(d) => (Shape::PerCol, d),
                InputKind::Acc | InputKind::Scalar => return None,
            };
            Some(TensorParam { name: p.name.clone(), shape, dtype, output: false })
        });
        let outs = self.outputs.iter().map(|o| {
            let (shape, dtype) = match o.kind {
                OutputKind::Tile(d) => (Shape::Tile, d),
                OutputKind::HalfTile(d) => (Shape::HalfTile, d),
                OutputKind::DoubleTile(d) => (Shape::DoubleTile, d),
                OutputKind::RowPartial => (Shape::RowPartial, DType::F32),
                OutputKind::ColPartial => (Shape::ColPartial, DType::F32),
                OutputKind::LsePartial => (Shape::LsePartial, DType::F32),
                OutputKind::RowMaxPartial => (Shape::RowMaxPartial, DType::F32),
                OutputKind::ColMaxPartial => (Shape::ColMaxPartial, DType::F32),
                OutputKind::PerRow(d) => (Shape::PerRow, d),
                OutputKind::PerCol(d) => (Shape::PerCol, d),
                // The frontend refuses a PerGroup output without a group reduction.
                OutputKind::PerGroup(d) => (Shape::PerGroup(self.group_size().unwrap_or(GROUP_SIZES[0])), d),
            };
            TensorParam { name: o.name.clone(), shape, dtype, output: true }
        });
        ins.chain(outs).collect()
    }
    /// The width of every node's value.
    pub fn widths(&self) -> Vec<Width> {
        let mut w: Vec<Width> = Vec::with_capacity(self.nodes.len());
        for n in &self.nodes {
            let width = match n.op {
                Op::Input(i) => match self.inputs[i].kind {
                    InputKind::Acc | InputKind::Tile(_) => Width::Full,
                    InputKind::PerCol(_) => Width::Col,
                    InputKind::DoubleTile(_) => Width::Double,
                    InputKind::PerRow(_) => Width::Row,
                    InputKind::Scalar => Width::Uniform,
                },
                Op::Const(_) => Width::Uniform,
                Op::OneHot(_) | Op::Group(..) => Width::Full,
                Op::Unary(_, a) | Op::RowSum(a) | Op::ColSum(a) | Op::RowLse(a) | Op::RowMax(a) | Op::ColMax(a) | Op::Gather(a, _) => w[a],
                Op::Binary(_, a, b) => w[a].join(w[b]).unwrap_or(Width::Full),
                Op::Select(c, a, b) => w[c].join(w[a]).and_then(|x| x.join(w[b])).unwrap_or(Width::Full),
                Op::Unpair(a, _) => w[a].halved().unwrap_or(Width::Half),
                Op::Pair(a, b) => w[a].paired(w[b]).unwrap_or(Width::Full),
            };
            w.push(width);
        }
        w
    }

    /// The columns of the program's group reductions (one size per
    /// program, the frontend checks), if it has any: its epilogue subtile is
    /// that wide instead of CUTLASS's 32 columns.
    pub fn group_size(&self) -> Option<usize> {
        self.nodes.iter().find_map(|n| match n.op {
            Op::Group(_, _, size) => Some(size),
            _ => None,
        })
    }

    /// A map program has no `Acc` input: its epilogue runs over a `Tile`
    /// input's shape with an empty GEMM (see `coda_runtime::Kernel`).
    pub fn is_map(&self) -> bool {
        !self.inputs.iter().any(|p| p.kind == InputKind::Acc)
    }

    /// Names of the runtime scalars, in ABI order.
    pub fn scalar_params(&self) -> Vec<String> {
        self.inputs.iter().filter(|p| p.kind == InputKind::Scalar).map(|p| p.name.clone()).collect()
    }
}

/// The shape rule of one tensor parameter, in terms of the GEMM's `M, N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Shape {
    /// `[M, N]`
    Tile,
    /// `[M, N / 2]`
    HalfTile,
    /// `[M, 2N]`
    DoubleTile,
    /// `[M]`
    PerRow,
    /// `[N]`
    PerCol,
    /// `[ceil(N / tile_n), round_up(M, tile_m)]`: tile-major, `m` fastest.
    RowPartial,
    /// `[ceil(M / tile_m), round_up(N, tile_n)]`: tile-major, `n` fastest.
    ColPartial,
    /// `[2, ceil(N / tile_n), round_up(M, tile_m)]`: the maxima, then the sums.
    LsePartial,
    /// As `RowPartial`, holding maxima.
    RowMaxPartial,
    /// As `ColPartial`, holding maxima.
    ColMaxPartial,
    /// `[ceil(N / g), M]`: one value per row and group of `g` columns, M fastest.
    PerGroup(usize),
}

impl Shape {
    /// Per-tile partials, which the library allocates for the launch's config.
    pub fn is_partial(self) -> bool {
        matches!(self, Shape::RowPartial | Shape::ColPartial | Shape::LsePartial | Shape::RowMaxPartial | Shape::ColMaxPartial)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorParam {
    pub name: String,
    pub shape: Shape,
    pub dtype: DType,
    pub output: bool,
}
