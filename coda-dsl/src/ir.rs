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
}

impl DType {
    pub fn rust_name(self) -> &'static str {
        match self {
            DType::Bf16 => "bf16",
            DType::F32 => "f32",
            DType::I32 => "i32",
        }
    }
    pub fn bytes(self) -> usize {
        match self {
            DType::Bf16 => 2,
            DType::F32 | DType::I32 => 4,
        }
    }
}

/// What an input parameter is. `M × N` is the GEMM output shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum InputKind {
    /// The f32 accumulator tile `A · Bᵀ` (exactly one per program).
    Acc,
    /// A rank-2 `[M, N]` row-major tensor.
    Tile(DType),
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
    /// f32 per-row sums over each tile's columns: one partial per (row, N-tile).
    RowPartial,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Input {
    pub name: String,
    pub kind: InputKind,
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
}

impl UnaryOp {
    pub const ALL: [UnaryOp; 9] = [
        UnaryOp::Neg,
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Abs,
        UnaryOp::Tanh,
        UnaryOp::Sigmoid,
        UnaryOp::Silu,
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
}

/// One operation of the DAG. Every value is an f32 element-wise expression
/// over the `M × N` output, except `RowSum`, which is only an output.
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
}

impl Op {
    pub fn operands(&self) -> Vec<NodeId> {
        match *self {
            Op::Input(_) | Op::Const(_) => vec![],
            Op::Unary(_, a) | Op::RowSum(a) => vec![a],
            Op::Binary(_, a, b) => vec![a, b],
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

/// Kernel schedule of the CUTLASS SM90 TMA warp-specialized GEMM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Schedule {
    Cooperative,
    Pingpong,
}

/// How one program is compiled: CTA tile and cluster shape, schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Config {
    pub tile_m: usize,
    pub tile_n: usize,
    pub cluster_m: usize,
    pub cluster_n: usize,
    pub schedule: Schedule,
}

impl Default for Config {
    fn default() -> Self {
        Config { tile_m: 128, tile_n: 256, cluster_m: 1, cluster_n: 1, schedule: Schedule::Cooperative }
    }
}

impl Config {
    /// Tile shapes the codegen accepts (CUTLASS SM90 bf16 GEMM tiles we build and test).
    pub const TILES: [(usize, usize); 4] = [(128, 128), (128, 192), (128, 256), (256, 128)];
    pub const CLUSTERS: [(usize, usize); 4] = [(1, 1), (2, 1), (1, 2), (2, 2)];
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
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("IR serializes")
    }
    pub fn from_json(s: &str) -> Result<Program, serde_json::Error> {
        serde_json::from_str(s)
    }
    pub fn input(&self, name: &str) -> Option<(usize, &Input)> {
        self.inputs.iter().enumerate().find(|(_, p)| p.name == name)
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
                InputKind::PerRow(d) => (Shape::PerRow, d),
                InputKind::PerCol(d) => (Shape::PerCol, d),
                InputKind::Acc | InputKind::Scalar => return None,
            };
            Some(TensorParam { name: p.name.clone(), shape, dtype, output: false })
        });
        let outs = self.outputs.iter().map(|o| {
            let (shape, dtype) = match o.kind {
                OutputKind::Tile(d) => (Shape::Tile, d),
                OutputKind::RowPartial => (Shape::RowPartial, DType::F32),
            };
            TensorParam { name: o.name.clone(), shape, dtype, output: true }
        });
        ins.chain(outs).collect()
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
    /// `[M]`
    PerRow,
    /// `[N]`
    PerCol,
    /// `[ceil(N / tile_n), round_up(M, tile_m)]`: tile-major, `m` fastest.
    RowPartial,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorParam {
    pub name: String,
    pub shape: Shape,
    pub dtype: DType,
    pub output: bool,
}
