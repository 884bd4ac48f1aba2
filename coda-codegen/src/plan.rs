//! IR → an epilogue visitor DAG: which IR values become CUTLASS EVT nodes.
//!
//! Rules, each with one job:
//! - every used input becomes one load node (the accumulator fetch, the C
//!   operand, a TMA tile load, a row/column broadcast or a scalar);
//! - the first `Tile` output is the GEMM's D; the first `Tile` input of the
//!   same dtype is the C operand (loaded by the collective); with no `Tile`
//!   output D is void;
//! - a `DoubleTile` input is one load node whose slots hold both halves of
//!   each column pair packed (coda/pairwise.hpp); its `unpair` is element-wise,
//!   inlined into consumers like any map, so each pair is loaded once;
//! - a value becomes its own compute node when it is stored, reduced, used
//!   more than once, `unpair`ed (its pairs are read across fragment slots)
//!   or group-reduced (a node of its own, over the whole subtile); everything else is inlined into its consumer, so element-wise
//!   code is fused into as few nodes as possible;
//! - in a group program ([`Plan::by_pair`]) a value used more than once or
//!   `unpair`ed is a node of its own only where nodes of two different
//!   stored or reduced values read it: otherwise it is a local of the one
//!   node that reads it, computed per column pair;
//! - every other output becomes a store node (TMA tile store, resized
//!   half/double-width TMA store, row-sum partials);
//! - with a D, the last node converts D's value to D's element type.

use coda_dsl::ir::{DType, GroupOp, InputKind, NodeId, Op, OutputKind, Program, Width};
use coda_dsl::smem;

#[derive(Clone, Debug, PartialEq)]
pub enum EvtKind {
    AccFetch,
    /// The collective's C operand.
    SrcFetch,
    TileLoad(DType),
    /// A `DoubleTile` input, each slot both halves of a column pair packed.
    PairTileLoad(DType),
    PerRowLoad(DType),
    PerColLoad(DType),
    /// Index into the launch's scalar array.
    Scalar(usize),
    /// A fused element-wise computation of IR node `root`.
    Compute { root: NodeId },
    TileStore(DType),
    /// `[M, N/2]` from one half-width value.
    HalfTileStore(DType),
    /// `[M, 2N]` from two full-width values (even and odd columns).
    DoubleTileStore(DType),
    RowSumPartials,
    ColSumPartials,
    RowMaxPartials,
    ColMaxPartials,
    RowLsePartials,
    /// `x[m, target[m]]`: reads the target vector (this launch tensor), writes the output.
    GatherPerRow { target: usize },
    /// 1 at column `target[m]`, else 0: reads the target vector.
    OneHot,
    /// Each row's reduction over its group of this many columns, at every column of the group.
    GroupReduce(GroupOp, usize),
    /// A row-uniform value, one per row `[M]`.
    RowStore(DType),
    /// A column-uniform value, one per column `[N]`.
    ColStore(DType),
    /// A group-uniform value, one per row and group of this many columns, `[ceil(N/g), M]`.
    GroupStore(DType, usize),
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
    /// `None`: no `Tile` output, D is void.
    pub element_d: Option<DType>,
    /// The element type that sizes the epilogue tile: D's, else the first store's.
    pub element_epilogue: DType,
    /// Launch tensor index of C and D.
    pub c_tensor: Option<usize>,
    pub d_tensor: Option<usize>,
    /// For each IR node: the EVT node holding its value, if it is materialized.
    pub value_node: Vec<Option<usize>>,
    /// The epilogue subtile (`coda_dsl::smem::subtile`): a group's, a map's, or the builder's.
    pub subtile: smem::Subtile,
    /// Compute nodes run over the fragment one column pair at a time, each
    /// with its values used more than once or `unpair`ed as locals. So in a
    /// group program: there a fragment is a thread's whole subtile (64 slots,
    /// `coda/group.hpp`), and a node of its own per such value holds a
    /// 64-slot array live while the next node runs: `qk_norm_rope`'s cos and
    /// sin beside the normed values spilled 460 bytes in ping-pong, 88 per
    /// pair (bench/NOTES.md, session 39). Other programs' fragments are a few
    /// slots, where a node per value costs no registers.
    pub by_pair: bool,
}

pub fn plan(p: &Program) -> Plan {
    let params = p.tensor_params();
    let tensor_index = |name: &str, output: bool| {
        params.iter().position(|t| t.name == name && t.output == output).expect("every tensor is a launch param")
    };
    let collective = p.collective();
    let d_out = collective.d.map(|d| &p.outputs[d]);
    let element_d = collective.d.map(|_| collective.element);
    let c_input = collective.c;
    let element_epilogue = collective.element;

    // Uses of each IR node, by other nodes and by outputs; which need their
    // own node: `stored` ones (read by a node that is not a computation:
    // stores, reductions, a group reduction across threads) and, outside
    // `by_pair`, `unpair`ed ones (read across slots, or a packed pair load's slot).
    let mut uses = vec![0usize; p.nodes.len()];
    let mut stored = vec![false; p.nodes.len()];
    let mut unpaired = vec![false; p.nodes.len()];
    for n in &p.nodes {
        for a in n.op.operands() {
            uses[a] += 1;
        }
        match n.op {
            Op::Unpair(a, _) => unpaired[a] = true,
            Op::Group(_, a, _) => stored[a] = true,
            _ => {}
        }
    }
    for o in &p.outputs {
        uses[o.value] += 1;
        match (o.kind, &p.nodes[o.value].op) {
            (OutputKind::RowPartial, Op::RowSum(src))
            | (OutputKind::ColPartial, Op::ColSum(src))
            | (OutputKind::LsePartial, Op::RowLse(src))
            | (OutputKind::RowMaxPartial, Op::RowMax(src))
            | (OutputKind::ColMaxPartial, Op::ColMax(src))
            | (OutputKind::PerRow(_), Op::Gather(src, _)) => stored[*src] = true,
            (OutputKind::DoubleTile(_), Op::Pair(a, b)) => {
                stored[*a] = true;
                stored[*b] = true;
            }
            _ => stored[o.value] = true,
        }
    }
    let by_pair = p.group_size().is_some();
    let own_node = if by_pair { own_nodes_by_pair(p, &uses, &stored) } else { own_nodes(p, &uses, &stored, &unpaired) };
    let widths = p.widths();
    let (subtile, pairs_staged) = {
        let inputs: Vec<InputKind> = p.inputs.iter().map(|i| i.kind).collect();
        let outputs: Vec<OutputKind> = p.outputs.iter().map(|o| o.kind).collect();
        let t = smem::subtile(&p.config, p.group_size(), &inputs, &outputs);
        (t, smem::pairs_staged(&t, &inputs, &outputs))
    };

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
                    // An [M, 2N] bf16 tile is an [M, N] tile of 32-bit words, each the pair
                    // (2n, 2n + 1): staged by TMA like any tile input where that fits, else
                    // loaded by each thread (coda_dsl::smem::pairs_staged).
                    InputKind::DoubleTile(d) if pairs_staged => (
                        EvtKind::TileLoad(DType::F32),
                        t(),
                        format!("{}: DoubleTile<{}>, pairs as 32-bit words", input.name, d.rust_name()),
                    ),
                    InputKind::DoubleTile(d) => (
                        EvtKind::PairTileLoad(d),
                        t(),
                        format!("{}: DoubleTile<{}>, pairs loaded by each thread (staged they would not fit)", input.name, d.rust_name()),
                    ),
                    // Index vectors are read by the `gather` nodes that use them.
                    InputKind::PerRow(DType::I32) => continue,
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
            Op::OneHot(target) => {
                let Op::Input(i) = p.nodes[target].op else { unreachable!("targets are inputs") };
                let name = &p.inputs[i].name;
                (EvtKind::OneHot, Some(tensor_index(name, false)), format!("line {}: onehot({name})", node.line))
            }
            Op::Group(op, _, size) => (
                EvtKind::GroupReduce(op, size),
                None,
                format!("line {}: `{}`, {}(…, {size})", node.line, node.name.as_deref().unwrap_or("(expression)"), op.name()),
            ),
            // Constants are literals where read, but for a stored one (and, outside `by_pair`, an `unpair`ed one).
            Op::Const(_) if !stored[id] && (by_pair || !unpaired[id]) => continue,
            // Reductions, gathers and double-width pairs are store nodes, below.
            Op::RowSum(_) | Op::ColSum(_) | Op::RowLse(_) | Op::RowMax(_) | Op::ColMax(_) | Op::Gather(..) => continue,
            Op::Pair(..) if widths[id] == Width::Double => continue,
            _ if own_node[id] => (
                EvtKind::Compute { root: id },
                None,
                format!("line {}: `{}`", node.line, node.name.as_deref().unwrap_or("(expression)")),
            ),
            _ => continue,
        };
        let base = match &node.name {
            Some(name) if taken_in_cpp(name) => format!("{name}_"),
            Some(name) => name.clone(),
            None => format!("t{id}"),
        };
        let children = match (&kind, &node.op) {
            (EvtKind::Compute { root }, _) => inlined_leaves(p, *root, &value_node),
            (EvtKind::GroupReduce(..), Op::Group(_, a, _)) => vec![value_node[*a].expect("a reduced value is materialized")],
            _ => vec![],
        };
        nodes.push(EvtNode { kind, name: names.unique(&base), children, tensor, origin });
        value_node[id] = Some(nodes.len() - 1);
    }

    let node_of = |id: NodeId| value_node[id].expect("stored values are materialized");
    for (i, o) in p.outputs.iter().enumerate() {
        if collective.d == Some(i) {
            continue;
        }
        let (kind, children) = match (o.kind, &p.nodes[o.value].op) {
            (OutputKind::Tile(d), _) => (EvtKind::TileStore(d), vec![node_of(o.value)]),
            (OutputKind::HalfTile(d), _) => (EvtKind::HalfTileStore(d), vec![node_of(o.value)]),
            (OutputKind::DoubleTile(d), Op::Pair(a, b)) => (EvtKind::DoubleTileStore(d), vec![node_of(*a), node_of(*b)]),
            (OutputKind::RowPartial, Op::RowSum(src)) => (EvtKind::RowSumPartials, vec![node_of(*src)]),
            (OutputKind::ColPartial, Op::ColSum(src)) => (EvtKind::ColSumPartials, vec![node_of(*src)]),
            (OutputKind::LsePartial, Op::RowLse(src)) => (EvtKind::RowLsePartials, vec![node_of(*src)]),
            (OutputKind::RowMaxPartial, Op::RowMax(src)) => (EvtKind::RowMaxPartials, vec![node_of(*src)]),
            (OutputKind::ColMaxPartial, Op::ColMax(src)) => (EvtKind::ColMaxPartials, vec![node_of(*src)]),
            (OutputKind::PerRow(_), Op::Gather(src, target)) => {
                let Op::Input(i) = p.nodes[*target].op else { unreachable!("targets are inputs") };
                (EvtKind::GatherPerRow { target: tensor_index(&p.inputs[i].name, false) }, vec![node_of(*src)])
            }
            (OutputKind::PerRow(d), _) => (EvtKind::RowStore(d), vec![node_of(o.value)]),
            (OutputKind::PerCol(d), _) => (EvtKind::ColStore(d), vec![node_of(o.value)]),
            (OutputKind::PerGroup(d), _) => {
                (EvtKind::GroupStore(d, p.group_size().expect("the frontend checks a group size")), vec![node_of(o.value)])
            }
            _ => unreachable!("the frontend checks output values"),
        };
        let label = match o.kind {
            OutputKind::Tile(d) => format!("output {}: Tile<{}>", o.name, d.rust_name()),
            OutputKind::HalfTile(d) => format!("output {}: HalfTile<{}>", o.name, d.rust_name()),
            OutputKind::DoubleTile(d) => format!("output {}: DoubleTile<{}>", o.name, d.rust_name()),
            OutputKind::RowPartial => format!("output {}: RowPartial<f32>", o.name),
            OutputKind::ColPartial => format!("output {}: ColPartial<f32>", o.name),
            OutputKind::LsePartial => format!("output {}: LsePartial<f32>", o.name),
            OutputKind::RowMaxPartial => format!("output {}: RowMaxPartial<f32>", o.name),
            OutputKind::ColMaxPartial => format!("output {}: ColMaxPartial<f32>", o.name),
            OutputKind::PerRow(d) => format!("output {}: PerRow<{}>", o.name, d.rust_name()),
            OutputKind::PerCol(d) => format!("output {}: PerCol<{}>", o.name, d.rust_name()),
            OutputKind::PerGroup(d) => format!("output {}: PerGroup<{}>", o.name, d.rust_name()),
        };
        nodes.push(EvtNode {
            kind,
            name: names.unique(&format!("store_{}", o.name)),
            children,
            tensor: Some(tensor_index(&o.name, true)),
            origin: label,
        });
    }
    let d_tensor = d_out.map(|d| tensor_index(&d.name, true));
    if let (Some(d), Some(elem)) = (d_out, element_d) {
        nodes.push(EvtNode {
            kind: EvtKind::StoreD(elem),
            name: names.unique(&format!("store_{}", d.name)),
            children: vec![node_of(d.value)],
            tensor: d_tensor,
            origin: format!("output {}: Tile<{}> (the D operand)", d.name, elem.rust_name()),
        });
    }
    Plan {
        nodes,
        element_c: c_input.and(element_d),
        element_d,
        element_epilogue,
        c_tensor: c_input.map(|i| tensor_index(&p.inputs[i].name, false)),
        d_tensor,
        value_node,
        subtile,
        by_pair,
    }
}

/// The values that are compute nodes of their own: stored, `unpair`ed or used more than once.
fn own_nodes(p: &Program, uses: &[usize], stored: &[bool], unpaired: &[bool]) -> Vec<bool> {
    (0..p.nodes.len()).map(|id| stored[id] || unpaired[id] || uses[id] > 1).collect()
}

/// [`Plan::by_pair`]'s: the stored values, and those read (through inlined
/// values) by the nodes of two or more of them, each computed once; the
/// rest are locals of the one node that reads them. Walks consumers before
/// operands (IR order is topological).
fn own_nodes_by_pair(p: &Program, uses: &[usize], stored: &[bool]) -> Vec<bool> {
    let n = p.nodes.len();
    let mut own = stored.to_vec();
    // For an inlined value, the node (an IR id) whose functor computes it.
    let mut owner: Vec<Option<NodeId>> = vec![None; n];
    let mut users: Vec<Vec<NodeId>> = vec![vec![]; n];
    for (id, node) in p.nodes.iter().enumerate() {
        for a in node.op.operands() {
            users[a].push(id);
        }
    }
    for id in (0..n).rev() {
        if own[id] || uses[id] == 0 || matches!(p.nodes[id].op, Op::Input(_) | Op::Const(_)) {
            continue;
        }
        let mut owners = users[id].iter().filter_map(|&u| if own[u] { Some(u) } else { owner[u] });
        let first = owners.next();
        if owners.all(|o| Some(o) == first) {
            owner[id] = first;
        } else {
            own[id] = true;
        }
    }
    own
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

/// Whether a user's name cannot stand as a functor parameter in the
/// generated C++ as it is: a C++ keyword, a name the functor body uses
/// itself (`F`, `out`, `i`, the inlined values `t<id>`, the functions it
/// calls unqualified, the namespaces it names), or a macro's (every name
/// without a lower-case letter, and a few lower-case ones). Names C++
/// reserves to the implementation (`__`, `_` and a capital) compile with
/// nvcc and are left as they are.
fn taken_in_cpp(name: &str) -> bool {
    const WORDS: &[&str] = &[
        "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch", "char",
        "char8_t", "char16_t", "char32_t", "class", "compl", "concept", "const", "consteval", "constexpr", "constinit",
        "const_cast", "continue", "co_await", "co_return", "co_yield", "decltype", "default", "delete", "do", "double",
        "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto", "if",
        "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq", "nullptr", "operator", "or",
        "or_eq", "private", "protected", "public", "register", "reinterpret_cast", "requires", "return", "short", "signed",
        "sizeof", "static", "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local",
        "throw", "true", "try", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual", "void",
        "volatile", "wchar_t", "while", "xor", "xor_eq",
        // The functor's own names and what its body names unqualified.
        "F", "out", "i", "coda", "cute", "cutlass", "std", "sqrtf", "fabsf", "fmaxf", "fminf",
        // Macros in lower case that stand alone (those in capitals are caught below).
        "errno", "stdin", "stdout", "stderr", "linux", "unix",
    ];
    let inlined = name.strip_prefix('t').is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
    // A name without a lower-case letter may be a macro (NDEBUG, FLT_MAX,
    // INFINITY, M_PI, CUDART_VERSION...): the headers define hundreds.
    let macro_like = !name.bytes().any(|b| b.is_ascii_lowercase());
    WORDS.contains(&name) || inlined || macro_like
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

#[cfg(test)]
mod tests {
    use super::*;

    fn compute_nodes(source: &str) -> Vec<String> {
        let programs = coda_dsl::lower_file(&syn::parse_file(source).expect("valid Rust")).expect("lowers");
        let plan = plan(&programs[0]);
        plan.nodes.iter().filter(|n| matches!(n.kind, EvtKind::Compute { .. })).map(|n| n.name.clone()).collect()
    }

    /// `n` is read by the nodes of two stored values (`y` and the row sum's
    /// source) and `x` by the group reduction's operand and by `n`: nodes of
    /// their own. `a`, `b` and `c` (unpaired, or used twice) are read only
    /// within `y`'s node and `e` only within the row sum's: locals there in
    /// a group program, nodes of their own in the same program without the
    /// group reduction.
    #[test]
    fn group_programs_keep_values_one_node_reads_as_its_locals() {
        let program = |n: &str| {
            format!(
                "#[coda::epilogue]
                 pub fn p(acc: Acc) -> (Tile<bf16>, RowPartial<f32>) {{
                     let x = acc * 2.0;
                     let n = {n};
                     let (a, b) = unpair(n);
                     let c = cos(a);
                     let y = pair(a * c - b * c, a + b);
                     let e = exp(n);
                     let t = row_sum(e * n);
                     (y, t)
                 }}"
            )
        };
        let grouped = compute_nodes(&program("x * rsqrt(group_mean(x * x, 128) + 0.001)"));
        assert!(["x", "n", "y"].iter().all(|v| grouped.contains(&v.to_string())), "{grouped:?}");
        assert!(["a", "b", "c", "e"].iter().all(|v| !grouped.contains(&v.to_string())), "{grouped:?}");
        let plain = compute_nodes(&program("x * rsqrt(x * x + 0.001)"));
        assert!(["n", "a", "b", "c", "y"].iter().all(|v| plain.contains(&v.to_string())), "{plain:?}");
    }
}
