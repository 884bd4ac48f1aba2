//! IR → an epilogue visitor DAG: which IR values become CUTLASS EVT nodes.
//!
//! Rules, each with one job:
//! - every used input becomes one load node (the accumulator fetch, the C
//!   operand, a TMA tile load, a row/column broadcast or a scalar);
//! - the first `Tile` output is the GEMM's D; the first `Tile` input of the
//!   same dtype is the C operand (loaded by the collective);
//! - a value becomes its own compute node when it is stored, reduced, or used
//!   more than once; everything else is inlined into its consumer, so
//!   element-wise code is fused into as few nodes as possible;
//! - every other output becomes a store node (TMA tile store, row-sum partials);
//! - the last node converts D's value to D's element type.

use coda_dsl::ir::{DType, InputKind, NodeId, Op, OutputKind, Program};

#[derive(Clone, Debug, PartialEq)]
pub enum EvtKind {
    AccFetch,
    /// The collective's C operand.
    SrcFetch,
    TileLoad(DType),
    PerRowLoad(DType),
    PerColLoad(DType),
    /// Index into the launch's scalar array.
    Scalar(usize),
    /// A fused element-wise computation of IR node `root`.
    Compute { root: NodeId },
    TileStore(DType),
    RowSumPartials,
    /// Converts D's value to its element type: the DAG's output.
    StoreD(DType),
}

#[derive(Clone, Debug)]
pub struct EvtNode {
    pub kind: EvtKind,
    /// A C++-safe name, unique in the program (after the user's names).
    pub name: String,
    pub children: Vec<usize>,
    /// Index into the launch's tensor array, for nodes that read or write memory.
    pub tensor: Option<usize>,
    /// What this node is in the user's program, for comments.
    pub origin: String,
}

#[derive(Clone, Debug)]
pub struct Plan {
    pub nodes: Vec<EvtNode>,
    pub element_c: Option<DType>,
    pub element_d: DType,
    /// Launch tensor index of C and D.
    pub c_tensor: Option<usize>,
    pub d_tensor: usize,
    /// For each IR node: the EVT node holding its value, if it is materialized.
    pub value_node: Vec<Option<usize>>,
}

pub fn plan(p: &Program) -> Plan {
    let params = p.tensor_params();
    let tensor_index = |name: &str, output: bool| {
        params.iter().position(|t| t.name == name && t.output == output).expect("every tensor is a launch param")
    };
    let d_out = p.outputs.iter().find(|o| matches!(o.kind, OutputKind::Tile(_))).expect("frontend requires a Tile output");
    let OutputKind::Tile(element_d) = d_out.kind else { unreachable!() };
    let c_input = p.inputs.iter().position(|i| i.kind == InputKind::Tile(element_d));

    // Uses of each IR node, by other nodes and by outputs.
    let mut uses = vec![0usize; p.nodes.len()];
    for n in &p.nodes {
        for a in n.op.operands() {
            uses[a] += 1;
        }
    }
    let mut stored = vec![false; p.nodes.len()];
    for o in &p.outputs {
        uses[o.value] += 1;
        match o.kind {
            OutputKind::Tile(_) => stored[o.value] = true,
            OutputKind::RowPartial => {
                if let Op::RowSum(src) = p.nodes[o.value].op {
                    stored[src] = true;
                }
            }
        }
    }

    let mut names = Names::default();
    let mut nodes: Vec<EvtNode> = vec![];
    let mut value_node: Vec<Option<usize>> = vec![None; p.nodes.len()];
    for (id, node) in p.nodes.iter().enumerate() {
        let (kind, tensor, origin) = match node.op {
            Op::Input(i) => {
                let input = &p.inputs[i];
                if uses[id] == 0 {
                    continue;
                }
                let t = || Some(tensor_index(&input.name, false));
                match input.kind {
                    InputKind::Acc => (EvtKind::AccFetch, None, format!("{}: Acc", input.name)),
                    InputKind::Tile(d) if Some(i) == c_input => {
                        (EvtKind::SrcFetch, t(), format!("{}: Tile<{}> (the C operand)", input.name, d.rust_name()))
                    }
                    InputKind::Tile(d) => (EvtKind::TileLoad(d), t(), format!("{}: Tile<{}>", input.name, d.rust_name())),
                    InputKind::PerRow(d) => {
                        (EvtKind::PerRowLoad(d), t(), format!("{}: PerRow<{}>", input.name, d.rust_name()))
                    }
                    InputKind::PerCol(d) => {
                        (EvtKind::PerColLoad(d), t(), format!("{}: PerCol<{}>", input.name, d.rust_name()))
                    }
                    InputKind::Scalar => {
                        let k = p.inputs[..i].iter().filter(|x| x.kind == InputKind::Scalar).count();
                        (EvtKind::Scalar(k), None, format!("{}: Scalar", input.name))
                    }
                }
            }
            Op::Const(_) if !stored[id] => continue,
            Op::RowSum(_) => continue, // becomes a store node below
            _ if stored[id] || uses[id] > 1 => (
                EvtKind::Compute { root: id },
                None,
                format!("line {}: `{}`", node.line, node.name.as_deref().unwrap_or("(expression)")),
            ),
            _ => continue,
        };
        let base = node.name.clone().unwrap_or_else(|| format!("t{id}"));
        let children = match kind {
            EvtKind::Compute { root } => inlined_leaves(p, root, &value_node),
            _ => vec![],
        };
        nodes.push(EvtNode { kind, name: names.unique(&base), children, tensor, origin });
        value_node[id] = Some(nodes.len() - 1);
    }

    for o in &p.outputs {
        if std::ptr::eq(o, d_out) {
            continue;
        }
        let (kind, child) = match o.kind {
            OutputKind::Tile(d) => (EvtKind::TileStore(d), o.value),
            OutputKind::RowPartial => {
                let Op::RowSum(src) = p.nodes[o.value].op else { unreachable!("frontend checks RowPartial values") };
                (EvtKind::RowSumPartials, src)
            }
        };
        let child = value_node[child].expect("stored values are materialized");
        let label = match o.kind {
            OutputKind::Tile(d) => format!("output {}: Tile<{}>", o.name, d.rust_name()),
            OutputKind::RowPartial => format!("output {}: RowPartial<f32>", o.name),
        };
        nodes.push(EvtNode {
            kind,
            name: names.unique(&format!("store_{}", o.name)),
            children: vec![child],
            tensor: Some(tensor_index(&o.name, true)),
            origin: label,
        });
    }
    let d_tensor = tensor_index(&d_out.name, true);
    nodes.push(EvtNode {
        kind: EvtKind::StoreD(element_d),
        name: names.unique(&format!("store_{}", d_out.name)),
        children: vec![value_node[d_out.value].expect("stored values are materialized")],
        tensor: Some(d_tensor),
        origin: format!("output {}: Tile<{}> (the D operand)", d_out.name, element_d.rust_name()),
    });
    Plan {
        nodes,
        element_c: c_input.map(|_| element_d),
        element_d,
        c_tensor: c_input.map(|i| tensor_index(&p.inputs[i].name, false)),
        d_tensor,
        value_node,
    }
}

/// The materialized EVT nodes a compute node of `root` reads, in node order.
fn inlined_leaves(p: &Program, root: NodeId, value_node: &[Option<usize>]) -> Vec<usize> {
    let mut out = vec![];
    let mut stack: Vec<NodeId> = p.nodes[root].op.operands();
    while let Some(id) = stack.pop() {
        match value_node[id] {
            Some(evt) => out.push(evt),
            None => stack.extend(p.nodes[id].op.operands()),
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Unique C++ identifiers derived from the user's names.
#[derive(Default)]
struct Names(std::collections::HashSet<String>);

impl Names {
    fn unique(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        let mut k = 2;
        while !self.0.insert(name.clone()) {
            name = format!("{base}_{k}");
            k += 1;
        }
        name
    }
}
