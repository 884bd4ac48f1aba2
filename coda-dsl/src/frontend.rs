//! Syntax → typed IR. Both the proc macro and the build helper call
//! [`lower_fn`] on the same `syn` tree, so they can never disagree about a
//! program. Every user error is a `syn::Error` at the offending span.

use std::collections::HashMap;

use proc_macro2::{Span, TokenStream};
use syn::spanned::Spanned;
use syn::{
    BinOp, Expr, ExprCall, FnArg, GenericArgument, ItemFn, Lit, Pat, PathArguments, ReturnType, Stmt,
    Type, UnOp,
};

use crate::ir::{
    Accumulation, BLayout, BinaryOp, Config, DType, GROUP_SIZES, GroupOp, Input, InputKind, Node, NodeId, Op, OperandScale, Output,
    OutputKind, Program, Schedule, UnaryOp, Width,
};

/// Names the generated launch API uses for the GEMM operands and their scales.
pub const RESERVED_NAMES: [(&str, &str); 4] =
    [("a", "the GEMM operand A"), ("b", "the GEMM operand B"), ("a_scale", "A's blockwise scales"), ("b_scale", "B's blockwise scales")];

/// What `name` is reserved for, if it is one of [`RESERVED_NAMES`].
fn reserved_for(name: &str) -> Option<&'static str> {
    RESERVED_NAMES.iter().find(|(n, _)| *n == name).map(|(_, what)| *what)
}

/// What a value of width `w` is, for errors.
fn width_desc(w: Width) -> &'static str {
    match w {
        Width::Uniform => "a scalar or constant",
        Width::Row => "a row vector (the same across a row)",
        Width::Col => "a column vector (the same down a column)",
        Width::Half => "a half-width value (from `unpair`)",
        Width::Full => "a full-width value",
        Width::Double => "a double-width value",
    }
}

/// An input's or a `let`'s name; a raw identifier (`r#type`) has no C++
/// spelling the generated code could use, nor a Rust one the fields could.
fn binding_name(ident: &syn::Ident) -> syn::Result<String> {
    let name = ident.to_string();
    if let Some(bare) = name.strip_prefix("r#") {
        return Err(syn::Error::new(ident.span(), format!("raw identifiers are not supported: rename `{name}` (e.g. `{bare}_`)")));
    }
    if !name.is_ascii() {
        return Err(syn::Error::new(ident.span(), format!("`{name}`: names are ASCII here (they become C++ names and symbols)")));
    }
    Ok(name)
}

/// Parses `#[epilogue(tile = (128, 256), cluster = (1, 1), schedule = cooperative)]` arguments.
/// `schedule = pingpong` without a `tile` takes 128×128, since the default
/// 128×256 tile is not allowed for ping-pong.
pub fn parse_config(args: TokenStream) -> syn::Result<Config> {
    let mut config = Config::default();
    if args.is_empty() {
        return Ok(config);
    }
    let args_span = args.span();
    let mut tile_given = false;
    let parser = syn::punctuated::Punctuated::<syn::MetaNameValue, syn::Token![,]>::parse_terminated;
    // syn places an error at the end of the arguments at the call site
    // (line 1 of a file the build script reads): name the arguments instead.
    let items = syn::parse::Parser::parse2(parser, args)
        .map_err(|e| syn::Error::new(args_span, format!("epilogue options are `name = value` pairs separated by commas: {e}")))?;
    let mut given = std::collections::HashSet::new();
    for item in items {
        let key = item.path.get_ident().map(|i| i.to_string()).unwrap_or_default();
        if !given.insert(key.clone()) {
            return Err(syn::Error::new(item.path.span(), format!("`{key}` is given twice")));
        }
        match key.as_str() {
            "tile" => {
                let (m, n) = pair(&item.value)?;
                if !Config::TILES.contains(&(m, n)) {
                    return Err(syn::Error::new(
                        item.value.span(),
                        format!("tile ({m}, {n}) is not supported; use one of {:?}", Config::TILES),
                    ));
                }
                (config.tile_m, config.tile_n) = (m, n);
                tile_given = true;
            }
            "cluster" => {
                let (m, n) = pair(&item.value)?;
                if !Config::CLUSTERS.contains(&(m, n)) {
                    return Err(syn::Error::new(
                        item.value.span(),
                        format!("cluster ({m}, {n}) is not supported; use one of {:?}", Config::CLUSTERS),
                    ));
                }
                (config.cluster_m, config.cluster_n) = (m, n);
            }
            "schedule" => {
                config.schedule = match ident_value(&item.value).as_deref() {
                    Some("cooperative") => Schedule::Cooperative,
                    Some("pingpong") => Schedule::Pingpong,
                    _ => {
                        return Err(syn::Error::new(
                            item.value.span(),
                            "schedule must be `cooperative` or `pingpong`",
                        ));
                    }
                };
            }
            "b_layout" => {
                config.b_layout = match ident_value(&item.value).as_deref() {
                    Some("nk") => BLayout::Nk,
                    Some("kn") => BLayout::Kn,
                    _ => {
                        return Err(syn::Error::new(
                            item.value.span(),
                            "b_layout must be `nk` (B is [N, K], a Linear weight: A·Bᵀ) or `kn` (B is [K, N]: A·B)",
                        ));
                    }
                };
            }
            "a" | "b" => {
                let t = match ident_value(&item.value).as_deref() {
                    Some("bf16") => DType::Bf16,
                    Some("e4m3") => DType::E4m3,
                    Some("e5m2") => DType::E5m2,
                    _ => {
                        return Err(syn::Error::new(item.value.span(), format!("operand {key} must be `bf16`, `e4m3` or `e5m2`")));
                    }
                };
                if key == "a" { config.operands.a = t } else { config.operands.b = t }
            }
            "scale" => {
                config.operands.scale = blockwise(&item.value)?;
            }
            "accum" => {
                config.operands.accum = match ident_value(&item.value).as_deref() {
                    Some("promoted") => Accumulation::Promoted,
                    Some("fast") => Accumulation::Fast,
                    _ => return Err(syn::Error::new(item.value.span(), "accum must be `promoted` (the default) or `fast`")),
                };
            }
            _ => {
                return Err(syn::Error::new(
                    item.path.span(),
                    "unknown epilogue option; expected `tile`, `cluster`, `schedule`, `b_layout`, `a`, `b`, `scale` or `accum`",
                ));
            }
        }
    }
    // Neither ping-pong nor 8-bit operands that promote take the default 128×256 tile.
    let promotes = config.operands.is_fp8() && config.operands.accum == Accumulation::Promoted;
    if (config.schedule == Schedule::Pingpong || promotes) && !tile_given {
        (config.tile_m, config.tile_n) = (128, 128);
    }
    config.check().map_err(|e| syn::Error::new(args_span, e))?;
    Ok(config)
}

/// `scale = blockwise(1x128, 128x128)`: the only mainloop scaling there is
/// (see [`OperandScale::Blockwise`]); `scale = none` is the default.
fn blockwise(e: &Expr) -> syn::Result<OperandScale> {
    let err = || {
        syn::Error::new(
            e.span(),
            "scale must be `blockwise(1x128, 128x128)` (a per 1 × 128, b per 128 × 128 block) or `none`; \
             per-tensor, per-row and per-column scales are epilogue inputs (`Scalar`, `PerRow<f32>`, `PerCol<f32>`)",
        )
    };
    if ident_value(e).as_deref() == Some("none") {
        return Ok(OperandScale::None);
    }
    let Expr::Call(ExprCall { func, args, .. }) = e else { return Err(err()) };
    if ident_value(func).as_deref() != Some("blockwise") {
        return Err(err());
    }
    // `1x128` lexes as the integer 1 with the suffix `x128`.
    let block = |x: &Expr| match x {
        Expr::Lit(syn::ExprLit { lit: Lit::Int(i), .. }) => {
            Some((i.base10_parse::<usize>().ok()?, i.suffix().strip_prefix('x')?.parse::<usize>().ok()?))
        }
        _ => None,
    };
    let blocks: Vec<_> = args.iter().map(block).collect();
    match blocks[..] {
        [Some(a), Some(b)] if a == OperandScale::BLOCKWISE_A && b == OperandScale::BLOCKWISE_B => Ok(OperandScale::Blockwise),
        _ => Err(err()),
    }
}

/// Whether node `id` has one value per row and group of columns: built from
/// group reductions, row vectors, scalars and constants only.
fn group_uniform(nodes: &[Node], inputs: &[Input], id: NodeId) -> bool {
    match nodes[id].op {
        Op::Group(..) | Op::Const(_) => true,
        Op::Input(i) => matches!(inputs[i].kind, InputKind::PerRow(_) | InputKind::Scalar),
        Op::Unary(_, a) => group_uniform(nodes, inputs, a),
        Op::Binary(_, a, b) => group_uniform(nodes, inputs, a) && group_uniform(nodes, inputs, b),
        Op::Select(c, a, b) => [c, a, b].iter().all(|&x| group_uniform(nodes, inputs, x)),
        _ => false,
    }
}

/// The plain name an option is set to (`schedule = pingpong`).
fn ident_value(e: &Expr) -> Option<String> {
    match e {
        Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
        _ => None,
    }
}

fn pair(e: &Expr) -> syn::Result<(usize, usize)> {
    let err = || syn::Error::new(e.span(), "expected a pair of integers, e.g. `(128, 256)`");
    let Expr::Tuple(t) = e else { return Err(err()) };
    let nums: Vec<usize> = t
        .elems
        .iter()
        .map(|x| match x {
            Expr::Lit(syn::ExprLit { lit: Lit::Int(i), .. }) => i.base10_parse::<usize>().ok(),
            _ => None,
        })
        .collect::<Option<_>>()
        .ok_or_else(err)?;
    match nums[..] {
        [a, b] => Ok((a, b)),
        _ => Err(err()),
    }
}

/// A value in scope during lowering.
#[derive(Clone, Copy, PartialEq)]
enum Value {
    /// An element-wise f32 value over the output tile.
    Elem(NodeId),
    /// A reduction or gather: only returnable, as this kind of output.
    Out(NodeId, OutputKind),
    /// An i32 index vector (`PerRow<i32>`): only usable as `gather`'s target.
    Index(NodeId),
}

/// What the DSL calls each non-element-wise output, for messages.
fn out_desc(k: OutputKind) -> (&'static str, &'static str) {
    match k {
        OutputKind::RowPartial => ("a `row_sum` partial", "RowPartial<f32>"),
        OutputKind::ColPartial => ("a `col_sum` partial", "ColPartial<f32>"),
        OutputKind::LsePartial => ("a `row_lse` partial", "LsePartial<f32>"),
        OutputKind::RowMaxPartial => ("a `row_max` partial", "RowMaxPartial<f32>"),
        OutputKind::ColMaxPartial => ("a `col_max` partial", "ColMaxPartial<f32>"),
        OutputKind::PerRow(_) => ("a `gather`ed per-row value", "PerRow<f32>"),
        _ => ("an element-wise value", "Tile<T>"),
    }
}

struct Lowering {
    nodes: Vec<Node>,
    /// The width of each node's value (see [`Width`]).
    widths: Vec<Width>,
    inputs: Vec<Input>,
    scope: HashMap<String, Value>,
    /// How many times each `let` / parameter name was read, to report unused ones.
    reads: HashMap<String, usize>,
    let_spans: Vec<(String, Span)>,
    /// The tile and schedule the program is lowered for (group sizes must divide its N).
    config: Config,
    /// The group size of the first group reduction, and its line and column.
    group: Option<(usize, (usize, usize))>,
    /// Names whose definition failed (see [`POISONED`]).
    poisoned: std::collections::HashSet<String>,
    /// How deep [`Lowering::expr`] is in nested expressions.
    depth: usize,
}

impl Lowering {
    fn push(&mut self, op: Op, width: Width, span: Span) -> NodeId {
        self.nodes.push(Node { op, name: None, line: span.start().line });
        self.widths.push(width);
        self.nodes.len() - 1
    }

    /// An element-wise operand: not a partial, not a double-width value.
    fn elem(&mut self, e: &Expr) -> syn::Result<NodeId> {
        let id = self.any_elem(e)?;
        if self.widths[id] == Width::Double {
            return Err(syn::Error::new(
                e.span(),
                "a double-width value can only be split with `let (even, odd) = unpair(x);` (a DoubleTile input) \
                 or returned as a `DoubleTile` output (a `pair` of full-width values)",
            ));
        }
        Ok(id)
    }

    fn any_elem(&mut self, e: &Expr) -> syn::Result<NodeId> {
        match self.expr(e)? {
            Value::Elem(id) => Ok(id),
            Value::Out(_, k) => {
                let (what, ty) = out_desc(k);
                Err(syn::Error::new(
                    e.span(),
                    format!("{what} is not an element-wise value; it can only be returned as `{ty}`"),
                ))
            }
            Value::Index(_) => Err(syn::Error::new(
                e.span(),
                "an i32 index vector is not an element-wise value; use it as `gather(x, target)` or `onehot(target)`",
            )),
        }
    }

    /// The width of an element-wise combination of `ids`, or an error at `span`.
    fn join(&self, ids: &[NodeId], span: Span) -> syn::Result<Width> {
        let mut w = Width::Uniform;
        for &id in ids {
            w = w.join(self.widths[id]).ok_or_else(|| {
                let (x, y) = (w, self.widths[id]);
                syn::Error::new(
                    span,
                    format!(
                        "this mixes values of different widths, {} with {}: half-width values combine only \
                         with half-width values, row vectors, scalars and constants",
                        width_desc(x),
                        width_desc(y)
                    ),
                )
            })?;
        }
        Ok(w)
    }

    fn expr(&mut self, e: &Expr) -> syn::Result<Value> {
        // Lowering recurses through nested expressions: bound it, so that a
        // machine-made expression thousands deep is an error, not an
        // overflow (256 levels, syn's parse included, fit a 2 MiB stack).
        const MAX_DEPTH: usize = 256;
        if self.depth == MAX_DEPTH {
            return Err(syn::Error::new(e.span(), format!("expression nested deeper than {MAX_DEPTH} levels: split it with `let`")));
        }
        self.depth += 1;
        let value = self.expr_at_depth(e);
        self.depth -= 1;
        value
    }

    fn expr_at_depth(&mut self, e: &Expr) -> syn::Result<Value> {
        match e {
            Expr::Paren(p) => self.expr(&p.expr),
            Expr::Group(g) => self.expr(&g.expr),
            Expr::Path(p) => {
                let Some(ident) = p.path.get_ident() else {
                    let path = p.path.segments.iter().map(|s| s.ident.to_string()).collect::<Vec<_>>().join("::");
                    return Err(syn::Error::new(
                        e.span(),
                        format!("expected the name of an input or a `let`, not the path `{path}` (constants are written as finite literals)"),
                    ));
                };
                let name = ident.to_string();
                if self.poisoned.contains(&name) {
                    return Err(syn::Error::new(ident.span(), POISONED));
                }
                match self.scope.get(&name) {
                    Some(v) => {
                        *self.reads.entry(name).or_default() += 1;
                        Ok(*v)
                    }
                    None => Err(syn::Error::new(ident.span(), format!("unknown name `{name}`"))),
                }
            }
            Expr::Lit(l) => {
                let v = match &l.lit {
                    Lit::Float(f) => f.base10_parse::<f64>()?,
                    Lit::Int(i) => i.base10_parse::<f64>()?,
                    _ => return Err(syn::Error::new(e.span(), "only numeric literals are allowed")),
                };
                // As rustc's `overflowing_literals` for f32, the type the
                // epilogue computes in (an infinite constant would not
                // survive the IR's JSON either).
                if (v as f32).is_infinite() {
                    return Err(syn::Error::new(e.span(), format!("literal out of range for f32 (at most {:e} in magnitude)", f32::MAX)));
                }
                Ok(Value::Elem(self.push(Op::Const(v), Width::Uniform, e.span())))
            }
            Expr::Unary(u) => match u.op {
                UnOp::Neg(_) => {
                    let a = self.elem(&u.expr)?;
                    Ok(Value::Elem(self.push(Op::Unary(UnaryOp::Neg, a), self.widths[a], e.span())))
                }
                _ => Err(syn::Error::new(u.op.span(), "only unary `-` is supported")),
            },
            Expr::Binary(b) => {
                let op = match b.op {
                    BinOp::Add(_) => BinaryOp::Add,
                    BinOp::Sub(_) => BinaryOp::Sub,
                    BinOp::Mul(_) => BinaryOp::Mul,
                    BinOp::Div(_) => BinaryOp::Div,
                    BinOp::Gt(_) => BinaryOp::Gt,
                    BinOp::Ge(_) => BinaryOp::Ge,
                    BinOp::Lt(_) => BinaryOp::Lt,
                    BinOp::Le(_) => BinaryOp::Le,
                    BinOp::Eq(_) => BinaryOp::Eq,
                    BinOp::Ne(_) => BinaryOp::Ne,
                    _ => return Err(syn::Error::new(b.op.span(), "only `+ - * /` and the comparisons `> >= < <= == !=` are supported")),
                };
                let l = self.elem(&b.left)?;
                let r = self.elem(&b.right)?;
                let w = self.join(&[l, r], e.span())?;
                Ok(Value::Elem(self.push(Op::Binary(op, l, r), w, e.span())))
            }
            Expr::Call(c) => self.call(c),
            _ => Err(syn::Error::new(
                e.span(),
                "unsupported expression; use names, numbers, `+ - * /`, comparisons, unary `-` and DSL functions",
            )),
        }
    }

    fn call(&mut self, c: &ExprCall) -> syn::Result<Value> {
        let fname = match &*c.func {
            Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
            _ => None,
        }
        .ok_or_else(|| syn::Error::new(c.func.span(), "expected a DSL function name"))?;
        let args: Vec<&Expr> = c.args.iter().collect();
        let arity = |n: usize| -> syn::Result<()> {
            if args.len() == n {
                Ok(())
            } else {
                let s = if n == 1 { "" } else { "s" };
                Err(syn::Error::new(
                    c.span(),
                    format!("`{fname}` takes {n} argument{s}, got {}", args.len()),
                ))
            }
        };
        let span = c.span();
        if let Some(op) = UnaryOp::ALL.iter().find(|u| u.name() == fname && **u != UnaryOp::Neg) {
            arity(1)?;
            let a = self.elem(args[0])?;
            return Ok(Value::Elem(self.push(Op::Unary(*op, a), self.widths[a], span)));
        }
        match fname.as_str() {
            "max" | "min" => {
                arity(2)?;
                let op = if fname == "max" { BinaryOp::Max } else { BinaryOp::Min };
                let a = self.elem(args[0])?;
                let b = self.elem(args[1])?;
                let w = self.join(&[a, b], span)?;
                Ok(Value::Elem(self.push(Op::Binary(op, a, b), w, span)))
            }
            "pow" => {
                // x^n as multiplications by squaring: the interpreter and the
                // device round the same products, and no exp/log is involved.
                arity(2)?;
                let x = self.elem(args[0])?;
                let n = match args[1] {
                    Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(i), .. }) => i.base10_parse::<u32>().ok().filter(|n| (1..=8).contains(n)),
                    _ => None,
                };
                let n = n.ok_or_else(|| syn::Error::new(args[1].span(), "`pow`'s exponent must be an integer literal from 1 to 8"))?;
                let w = self.widths[x];
                let (mut result, mut square, mut e) = (None, x, n);
                loop {
                    if e & 1 == 1 {
                        result = Some(match result {
                            None => square,
                            Some(r) => self.push(Op::Binary(BinaryOp::Mul, r, square), w, span),
                        });
                    }
                    e >>= 1;
                    if e == 0 {
                        break;
                    }
                    square = self.push(Op::Binary(BinaryOp::Mul, square, square), w, span);
                }
                Ok(Value::Elem(result.expect("n ≥ 1")))
            }
            "select" => {
                arity(3)?;
                let cnd = self.elem(args[0])?;
                let a = self.elem(args[1])?;
                let b = self.elem(args[2])?;
                let w = self.join(&[cnd, a, b], span)?;
                Ok(Value::Elem(self.push(Op::Select(cnd, a, b), w, span)))
            }
            "row_sum" | "col_sum" | "row_lse" | "row_max" | "col_max" => {
                arity(1)?;
                let a = self.elem(args[0])?;
                if self.widths[a] == Width::Half {
                    return Err(syn::Error::new(
                        args[0].span(),
                        format!("`{fname}` of a half-width value is not supported; reduce the full-width values it came from"),
                    ));
                }
                let (op, kind) = match fname.as_str() {
                    "row_sum" => (Op::RowSum(a), OutputKind::RowPartial),
                    "col_sum" => (Op::ColSum(a), OutputKind::ColPartial),
                    "row_max" => (Op::RowMax(a), OutputKind::RowMaxPartial),
                    "col_max" => (Op::ColMax(a), OutputKind::ColMaxPartial),
                    _ => (Op::RowLse(a), OutputKind::LsePartial),
                };
                Ok(Value::Out(self.push(op, Width::Full, span), kind))
            }
            "gather" => {
                arity(2)?;
                let x = self.elem(args[0])?;
                if ![Width::Full, Width::Col].contains(&self.widths[x]) {
                    return Err(syn::Error::new(args[0].span(), "`gather` picks from a full-width value"));
                }
                let Value::Index(t) = self.expr(args[1])? else {
                    return Err(syn::Error::new(args[1].span(), "`gather`'s target must be a `PerRow<i32>` input"));
                };
                Ok(Value::Out(self.push(Op::Gather(x, t), Width::Full, span), OutputKind::PerRow(DType::F32)))
            }
            "onehot" => {
                arity(1)?;
                let Value::Index(t) = self.expr(args[0])? else {
                    return Err(syn::Error::new(args[0].span(), "`onehot`'s target must be a `PerRow<i32>` input"));
                };
                Ok(Value::Elem(self.push(Op::OneHot(t), Width::Full, span)))
            }
            "pair" => {
                arity(2)?;
                let a = self.elem(args[0])?;
                let b = self.elem(args[1])?;
                let (wa, wb) = (self.widths[a], self.widths[b]);
                let w = wa.paired(wb).ok_or_else(|| {
                    syn::Error::new(
                        span,
                        format!("`pair` interleaves two half-width or two full-width values; these are {} and {}", width_desc(wa), width_desc(wb)),
                    )
                })?;
                Ok(Value::Elem(self.push(Op::Pair(a, b), w, span)))
            }
            "group_sum" | "group_mean" | "group_max" => {
                arity(2)?;
                let op = GroupOp::ALL.into_iter().find(|g| g.name() == fname).expect("matched above");
                let x = self.elem(args[0])?;
                if self.widths[x] != Width::Full {
                    return Err(syn::Error::new(
                        args[0].span(),
                        format!("`{fname}` reduces groups of columns of a full-width value (the accumulator's width, not a pair half, row or column vector)"),
                    ));
                }
                let sizes = GROUP_SIZES.map(|g| g.to_string()).join(", ");
                let size = match args[1] {
                    Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(i), .. }) => i.base10_parse::<usize>().ok().filter(|g| GROUP_SIZES.contains(g)),
                    _ => None,
                }
                .ok_or_else(|| syn::Error::new(args[1].span(), format!("the group size must be one of {sizes} columns, as an integer literal")))?;
                let tile_n = self.config.tile_n;
                if tile_n % size != 0 {
                    return Err(syn::Error::new(
                        args[1].span(),
                        format!("groups of {size} columns must divide the tile's {tile_n} columns; use a tile whose N is a multiple of {size}"),
                    ));
                }
                match self.group {
                    Some((first, (line, column))) if first != size => {
                        return Err(syn::Error::new(
                            args[1].span(),
                            format!(
                                "a program reduces groups of one size: the group reduction at {line}:{} uses {first} columns, this one {size} (its epilogue subtile is one group wide)",
                                column + 1
                            ),
                        ));
                    }
                    _ => self.group = Some((size, (span.start().line, span.start().column))),
                }
                Ok(Value::Elem(self.push(Op::Group(op, x, size), Width::Full, span)))
            }
            "unpair" => Err(syn::Error::new(
                c.func.span(),
                "`unpair` returns two values: bind them with `let (even, odd) = unpair(x);`",
            )),
            _ => Err(syn::Error::new(
                c.func.span(),
                format!(
                    "unknown function `{fname}`; the DSL has {}, pow, max, min, select, pair, unpair, row_sum, col_sum, row_max, col_max, row_lse, group_sum, group_mean, group_max, gather, onehot",
                    UnaryOp::ALL[1..].iter().map(|u| u.name()).collect::<Vec<_>>().join(", ")
                ),
            )),
        }
    }
}

/// Rejects a program whose TMA-staged tiles leave fewer than two mainloop
/// stages, at the input or output that tips it over (see [`crate::smem`]).
fn check_shared_memory(
    config: &Config,
    group: Option<usize>,
    inputs: &[Input],
    input_spans: &[(String, Span)],
    outputs: &[Output],
    out_types: &[&Type],
) -> syn::Result<()> {
    use crate::smem;
    let kinds: Vec<InputKind> = inputs.iter().map(|i| i.kind).collect();
    let out_kinds: Vec<OutputKind> = outputs.iter().map(|o| o.kind).collect();
    let subtile = smem::subtile(config, group, &kinds, &out_kinds).fewest_load_stages(&kinds, &out_kinds);
    let (mut used, bytes) = smem::usage(&subtile, &kinds, &out_kinds);
    let all = used + bytes.iter().sum::<usize>();
    let spans = input_spans.iter().map(|(_, s)| *s).chain(out_types.iter().map(|t| t.span()));
    let items = bytes.into_iter().zip(spans);
    for (bytes, span) in items {
        used += bytes;
        if bytes > 0 && smem::stages_left(config, used) < 2 {
            return Err(syn::Error::new(
                span,
                format!(
                    "too many TMA-staged tiles: with tile ({}, {}) the epilogue's staged values up to this one take ~{} KB \
                     of shared memory (all of them ~{} KB), leaving room for fewer than 2 mainloop stages of {} KB; \
                     use a smaller tile or fewer staged values (Tile and PerCol inputs, Tile outputs beyond the first, \
                     HalfTile and DoubleTile outputs; f32 ones take twice a bf16 one's room)",
                    config.tile_m,
                    config.tile_n,
                    used / 1024,
                    all / 1024,
                    smem::mainloop_stage(config) / 1024
                ),
            ));
        }
    }
    Ok(())
}

/// `let (even, odd) = unpair(x);` (either name may be `_`).
fn lower_unpair(lw: &mut Lowering, pat: &syn::PatTuple, init: &Expr) -> syn::Result<()> {
    let usage = "expected `let (even, odd) = unpair(x);`";
    let names: Vec<Option<&syn::Ident>> = pat
        .elems
        .iter()
        .map(|p| match p {
            Pat::Ident(pi) => Ok(Some(&pi.ident)),
            Pat::Wild(_) => Ok(None),
            other => Err(syn::Error::new(other.span(), usage)),
        })
        .collect::<syn::Result<_>>()?;
    if let [Some(even), Some(odd)] = names[..]
        && even == odd
    {
        return Err(syn::Error::new(odd.span(), format!("`{odd}` is bound twice in this pattern")));
    }
    let Expr::Call(c) = init else { return Err(syn::Error::new(init.span(), usage)) };
    let is_unpair = matches!(&*c.func, Expr::Path(p) if p.path.is_ident("unpair"));
    if !is_unpair || names.len() != 2 || c.args.len() != 1 {
        return Err(syn::Error::new(init.span(), usage));
    }
    let src = lw.any_elem(&c.args[0])?;
    // Double-width values are DoubleTile inputs and `pair`s; a `pair` is only ever stored.
    if lw.widths[src] == Width::Double && !matches!(lw.nodes[src].op, Op::Input(_)) {
        return Err(syn::Error::new(
            c.args[0].span(),
            "`unpair` of a double-width value splits only a DoubleTile input; use the two values this `pair` was made of",
        ));
    }
    let half = lw.widths[src].halved().ok_or_else(|| {
        syn::Error::new(
            c.args[0].span(),
            format!("`unpair` splits a full-width value or a DoubleTile input into its even and odd columns; this is {}", width_desc(lw.widths[src])),
        )
    })?;
    for (part, name) in names.into_iter().enumerate() {
        let id = lw.push(Op::Unpair(src, part as u8), half, init.span());
        if let Some(ident) = name {
            let n = binding_name(ident)?;
            lw.nodes[id].name = Some(n.clone());
            lw.poisoned.remove(&n);
            lw.scope.insert(n.clone(), Value::Elem(id));
            lw.reads.insert(n.clone(), 0);
            lw.let_spans.push((n, ident.span()));
        }
    }
    Ok(())
}

/// `Name<elem>` with one type argument, or a bare `Name`.
fn type_parts(ty: &Type) -> syn::Result<(String, Option<(String, Span)>)> {
    let Type::Path(tp) = ty else {
        return Err(syn::Error::new(ty.span(), "expected a DSL type such as `Tile<bf16>`"));
    };
    let seg = tp.path.segments.last().expect("a path has a segment");
    let arg = match &seg.arguments {
        PathArguments::None => None,
        PathArguments::AngleBracketed(a) if a.args.len() == 1 => match &a.args[0] {
            GenericArgument::Type(Type::Path(p)) if p.path.get_ident().is_some() => {
                Some((p.path.get_ident().unwrap().to_string(), p.span()))
            }
            other => return Err(syn::Error::new(other.span(), "expected an element type: bf16, f32 or i32")),
        },
        other => return Err(syn::Error::new(other.span(), "expected one element type, e.g. `<bf16>`")),
    };
    Ok((seg.ident.to_string(), arg))
}

fn dtype(name: &str, span: Span, allowed: &[DType]) -> syn::Result<DType> {
    let d = match name {
        "bf16" => DType::Bf16,
        "f32" => DType::F32,
        "i32" => DType::I32,
        "e4m3" => DType::E4m3,
        "e5m2" => DType::E5m2,
        _ => return Err(syn::Error::new(span, format!("unknown element type `{name}`"))),
    };
    if allowed.contains(&d) {
        Ok(d)
    } else {
        let names: Vec<_> = allowed.iter().map(|d| d.rust_name()).collect();
        Err(syn::Error::new(span, format!("element type `{name}` is not allowed here; use {}", names.join(" or "))))
    }
}

fn input_kind(ty: &Type) -> syn::Result<InputKind> {
    let (name, arg) = type_parts(ty)?;
    let float = [DType::Bf16, DType::F32];
    let need = |arg: Option<(String, Span)>| {
        arg.ok_or_else(|| syn::Error::new(ty.span(), format!("`{name}` needs an element type, e.g. `{name}<bf16>`")))
    };
    match name.as_str() {
        "Acc" | "Scalar" if arg.is_some() && !(name == "Scalar" && arg.as_ref().unwrap().0 == "f32") => {
            Err(syn::Error::new(ty.span(), format!("`{name}` takes no element type (it is f32)")))
        }
        "Acc" => Ok(InputKind::Acc),
        "Scalar" => Ok(InputKind::Scalar),
        "Tile" => {
            let (d, s) = need(arg)?;
            Ok(InputKind::Tile(dtype(&d, s, &float)?))
        }
        "DoubleTile" => {
            let (d, s) = need(arg)?;
            Ok(InputKind::DoubleTile(dtype(&d, s, &[DType::Bf16])?))
        }
        "PerRow" => {
            let (d, s) = need(arg)?;
            Ok(InputKind::PerRow(dtype(&d, s, &[DType::Bf16, DType::F32, DType::I32])?))
        }
        "PerCol" => {
            let (d, s) = need(arg)?;
            Ok(InputKind::PerCol(dtype(&d, s, &float)?))
        }
        _ => Err(syn::Error::new(
            ty.span(),
            format!("unknown input type `{name}`; expected Acc, Tile<T>, DoubleTile<T>, PerRow<T>, PerCol<T> or Scalar"),
        )),
    }
}

fn output_kind(ty: &Type) -> syn::Result<OutputKind> {
    let (name, arg) = type_parts(ty)?;
    let elem = |arg: Option<(String, Span)>, allowed: &[DType]| -> syn::Result<DType> {
        let (d, s) = arg.ok_or_else(|| syn::Error::new(ty.span(), format!("`{name}` needs an element type, e.g. `{name}<bf16>`")))?;
        dtype(&d, s, allowed)
    };
    match name.as_str() {
        // 8-bit outputs are stored saturated, round-to-nearest-even (quantised activations).
        "Tile" => Ok(OutputKind::Tile(elem(arg, &[DType::Bf16, DType::F32, DType::E4m3, DType::E5m2])?)),
        "HalfTile" => Ok(OutputKind::HalfTile(elem(arg, &[DType::Bf16, DType::F32])?)),
        "DoubleTile" => Ok(OutputKind::DoubleTile(elem(arg, &[DType::Bf16])?)),
        "PerRow" => Ok(OutputKind::PerRow(elem(arg, &[DType::Bf16, DType::F32])?)),
        "PerCol" => Ok(OutputKind::PerCol(elem(arg, &[DType::Bf16, DType::F32])?)),
        "PerGroup" => Ok(OutputKind::PerGroup(elem(arg, &[DType::Bf16, DType::F32])?)),
        "RowPartial" | "ColPartial" | "LsePartial" | "RowMaxPartial" | "ColMaxPartial" => {
            if let Some((d, s)) = arg {
                dtype(&d, s, &[DType::F32])?;
            }
            Ok(match name.as_str() {
                "RowPartial" => OutputKind::RowPartial,
                "ColPartial" => OutputKind::ColPartial,
                "RowMaxPartial" => OutputKind::RowMaxPartial,
                "ColMaxPartial" => OutputKind::ColMaxPartial,
                _ => OutputKind::LsePartial,
            })
        }
        _ => Err(syn::Error::new(
            ty.span(),
            format!(
                "unknown output type `{name}`; expected Tile<T>, HalfTile<T>, DoubleTile<T>, RowPartial<f32>, \
                 ColPartial<f32>, LsePartial<f32>, RowMaxPartial<f32>, ColMaxPartial<f32>, PerRow<T>, PerCol<T> or PerGroup<T>"
            ),
        )),
    }
}

/// Lowers one `#[epilogue]` function to a checked [`Program`].
pub fn lower_fn(item: &ItemFn, config: Config) -> syn::Result<Program> {
    let sig = &item.sig;
    if !sig.generics.params.is_empty() || sig.asyncness.is_some() || sig.unsafety.is_some() {
        return Err(syn::Error::new(sig.span(), "an epilogue is a plain `fn` with no generics, async or unsafe"));
    }
    // The name becomes C symbols and file names, `__` separating a config.
    let name = binding_name(&sig.ident)?;
    if name.contains("__") {
        return Err(syn::Error::new(sig.ident.span(), format!("`{name}`: a program's name has no `__` (it separates the config in kernel names)")));
    }
    let doc = item
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                Expr::Lit(syn::ExprLit { lit: Lit::Str(s), .. }) => Some(s.value().trim().to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");

    let mut lw = Lowering {
        nodes: vec![],
        widths: vec![],
        inputs: vec![],
        scope: HashMap::new(),
        reads: HashMap::new(),
        let_spans: vec![],
        config,
        group: None,
        poisoned: Default::default(),
        depth: 0,
    };
    let mut errors = vec![];
    let mut input_spans = vec![];
    for arg in &sig.inputs {
        if let Err(e) = lower_input(&mut lw, arg, &mut input_spans) {
            // Its uses are not errors of their own.
            if let FnArg::Typed(pt) = arg {
                bound_names(&pt.pat, &mut |n| {
                    lw.poisoned.insert(n);
                });
            }
            errors.push(e);
        }
    }
    if errors.is_empty() {
        // Without an accumulator (a map program) the first Tile input gives the shape.
        let is_map = !lw.inputs.iter().any(|p| p.kind == InputKind::Acc);
        if is_map && !lw.inputs.iter().any(|p| matches!(p.kind, InputKind::Tile(_))) {
            return Err(syn::Error::new(
                sig.inputs.span(),
                "an epilogue needs an `acc: Acc` input (the GEMM accumulator), or, for a map program, a `Tile<T>` input that gives its shape",
            ));
        }
        if is_map && !config.operands.is_default() {
            return Err(syn::Error::new(sig.inputs.span(), "a map program has no GEMM: the `a`, `b` and `scale` options do not apply"));
        }
    }

    let out_types: Vec<&Type> = match &sig.output {
        ReturnType::Default => {
            errors.push(syn::Error::new(sig.span(), "an epilogue must return its outputs, e.g. `-> Tile<bf16>`"));
            vec![]
        }
        ReturnType::Type(_, ty) => match &**ty {
            Type::Tuple(t) if t.elems.is_empty() => {
                errors.push(syn::Error::new(ty.span(), "an epilogue returns at least one output, e.g. `-> Tile<bf16>`"));
                vec![]
            }
            Type::Tuple(t) => t.elems.iter().collect(),
            other => vec![other],
        },
    };
    let mut out_kinds = vec![];
    for t in &out_types {
        match output_kind(t) {
            Ok(k) => out_kinds.push(k),
            Err(e) => errors.push(e),
        }
    }
    // The returned values are checked against declared kinds only.
    let outputs_declared = !out_types.is_empty() && out_kinds.len() == out_types.len();

    let stmts = &item.block.stmts;
    let Some((tail, body)) = stmts.split_last() else {
        errors.push(syn::Error::new(item.block.span(), "the body must end with the returned outputs"));
        return Err(combined(errors));
    };
    for stmt in body {
        if let Err(e) = lower_stmt(&mut lw, stmt) {
            // The names it binds are poisoned: their uses were reported here.
            if let Stmt::Local(local) = stmt {
                bound_names(&local.pat, &mut |n| {
                    lw.poisoned.insert(n);
                });
            }
            report(&mut errors, e);
        }
    }
    let outputs = if outputs_declared {
        match lower_outputs(&mut lw, tail, &out_kinds, &out_types) {
            Ok(outputs) => outputs,
            Err(e) => {
                report(&mut errors, e);
                vec![]
            }
        }
    } else {
        vec![]
    };
    if !errors.is_empty() {
        return Err(combined(errors));
    }
    for (name, span) in &input_spans {
        if lw.reads.get(name).copied().unwrap_or(0) == 0 {
            return Err(syn::Error::new(*span, format!("input `{name}` is never used")));
        }
    }
    for (name, span) in &lw.let_spans {
        if lw.reads.get(name).copied().unwrap_or(0) == 0 {
            return Err(syn::Error::new(*span, format!("`{name}` is computed but never used or returned")));
        }
    }
    check_shared_memory(&config, lw.group.map(|(g, _)| g), &lw.inputs, &input_spans, &outputs, &out_types)?;
    Ok(Program { name, doc, config, inputs: lw.inputs, nodes: lw.nodes, outputs })
}

/// One parameter of a program into `lw`'s inputs and scope.
fn lower_input(lw: &mut Lowering, arg: &FnArg, input_spans: &mut Vec<(String, Span)>) -> syn::Result<()> {
    let FnArg::Typed(pt) = arg else {
        return Err(syn::Error::new(arg.span(), "an epilogue takes no `self`"));
    };
    let Pat::Ident(pi) = &*pt.pat else {
        return Err(syn::Error::new(pt.pat.span(), "expected a parameter name"));
    };
    let name = binding_name(&pi.ident)?;
    if let Some(what) = reserved_for(&name) {
        return Err(syn::Error::new(pi.ident.span(), format!("`{name}` is reserved for {what}; rename this input")));
    }
    if lw.inputs.iter().any(|p| p.name == name) {
        return Err(syn::Error::new(pi.ident.span(), format!("duplicate input `{name}`")));
    }
    let kind = input_kind(&pt.ty)?;
    if kind == InputKind::Acc && lw.inputs.iter().any(|p| p.kind == InputKind::Acc) {
        return Err(syn::Error::new(pt.ty.span(), "a program has exactly one `Acc` input"));
    }
    let idx = lw.inputs.len();
    lw.inputs.push(Input { name: name.clone(), kind });
    let width = match kind {
        InputKind::Acc | InputKind::Tile(_) => Width::Full,
        InputKind::PerCol(_) => Width::Col,
        InputKind::DoubleTile(_) => Width::Double,
        InputKind::PerRow(_) => Width::Row,
        InputKind::Scalar => Width::Uniform,
    };
    let id = lw.push(Op::Input(idx), width, pi.ident.span());
    lw.nodes[id].name = Some(name.clone());
    let value = if kind == InputKind::PerRow(DType::I32) { Value::Index(id) } else { Value::Elem(id) };
    lw.scope.insert(name.clone(), value);
    input_spans.push((name, pi.ident.span()));
    Ok(())
}

/// One `let` of a program's body.
fn lower_stmt(lw: &mut Lowering, stmt: &Stmt) -> syn::Result<()> {
    let Stmt::Local(local) = stmt else {
        return Err(syn::Error::new(stmt.span(), "only `let name = expr;` statements are allowed"));
    };
    let Some(init) = &local.init else {
        return Err(syn::Error::new(local.span(), "a `let` needs a value"));
    };
    if let Some((else_token, _)) = &init.diverge {
        return Err(syn::Error::new(else_token.span(), "`let ... else` is not supported: an epilogue has no control flow"));
    }
    if let Pat::Tuple(t) = &local.pat {
        return lower_unpair(lw, t, &init.expr);
    }
    let Pat::Ident(pi) = &local.pat else {
        return Err(syn::Error::new(local.pat.span(), "expected `let name = ...` (no patterns or type annotations)"));
    };
    let v = lw.expr(&init.expr)?;
    let id = match v {
        Value::Elem(id) | Value::Out(id, _) | Value::Index(id) => id,
    };
    let name = binding_name(&pi.ident)?;
    // Name the node after the binding unless it is a plain alias of a named one.
    if lw.nodes[id].name.is_none() {
        lw.nodes[id].name = Some(name.clone());
    }
    lw.poisoned.remove(&name);
    lw.scope.insert(name.clone(), v);
    lw.reads.insert(name.clone(), 0);
    lw.let_spans.push((name, pi.ident.span()));
    Ok(())
}

/// The returned outputs: each a `let` name of the declared kind.
fn lower_outputs(lw: &mut Lowering, tail: &Stmt, out_kinds: &[OutputKind], out_types: &[&Type]) -> syn::Result<Vec<Output>> {
    let Stmt::Expr(tail, None) = tail else {
        return Err(syn::Error::new(tail.span(), "the body must end with the returned outputs (no `;`)"));
    };
    let returned: Vec<&Expr> = match tail {
        Expr::Tuple(t) => t.elems.iter().collect(),
        other => vec![other],
    };
    if returned.len() != out_kinds.len() {
        return Err(syn::Error::new(
            tail.span(),
            format!("the signature declares {} outputs but the body returns {}", out_kinds.len(), returned.len()),
        ));
    }
    let mut outputs = vec![];
    for ((e, kind), ty) in returned.iter().zip(out_kinds).zip(out_types) {
        let name = match e {
            Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
            _ => None,
        }
        .ok_or_else(|| {
            syn::Error::new(e.span(), "return a `let` name: outputs are named after their bindings (`let y = ...; y`)")
        })?;
        if let Some(what) = reserved_for(&name) {
            return Err(syn::Error::new(e.span(), format!("`{name}` is reserved for {what}; bind the output to another name")));
        }
        if outputs.iter().any(|o: &Output| o.name == name) {
            return Err(syn::Error::new(e.span(), format!("`{name}` is returned twice")));
        }
        if lw.inputs.iter().any(|p| p.name == name) {
            return Err(syn::Error::new(
                e.span(),
                format!("`{name}` is an input's name, and an output takes its `let` name: bind the output to a name no input has"),
            ));
        }
        let value = match (lw.expr(e)?, kind) {
            (Value::Out(id, k), want) if k == *want => id,
            (Value::Out(_, k), _) => {
                let (what, want) = out_desc(k);
                return Err(syn::Error::new(ty.span(), format!("`{name}` is {what}; declare this output as `{want}`")));
            }
            (Value::Index(_), _) => {
                return Err(syn::Error::new(e.span(), format!("`{name}` is an input index vector, not an output")));
            }
            (Value::Elem(_), k)
                if matches!(
                    k,
                    OutputKind::RowPartial | OutputKind::ColPartial | OutputKind::LsePartial | OutputKind::RowMaxPartial | OutputKind::ColMaxPartial
                ) =>
            {
                let producer = match k {
                    OutputKind::RowPartial => "row_sum(...)",
                    OutputKind::ColPartial => "col_sum(...)",
                    OutputKind::LsePartial => "row_lse(...)",
                    OutputKind::RowMaxPartial => "row_max(...)",
                    OutputKind::ColMaxPartial => "col_max(...)",
                    _ => "gather(x, target)",
                };
                return Err(syn::Error::new(
                    ty.span(),
                    format!("`{name}` is an element-wise value; a `{}` output needs `{producer}`", out_desc(*k).1),
                ));
            }
            (Value::Elem(id), _) => {
                let w = lw.widths[id];
                let fits = match kind {
                    OutputKind::Tile(_) => [Width::Full, Width::Row, Width::Col, Width::Uniform].contains(&w),
                    OutputKind::PerRow(_) => [Width::Row, Width::Uniform].contains(&w),
                    OutputKind::PerCol(_) => [Width::Col, Width::Uniform].contains(&w),
                    OutputKind::HalfTile(_) => w == Width::Half,
                    // A DoubleTile store interleaves the two values of a `pair`.
                    OutputKind::DoubleTile(_) => w == Width::Double && matches!(lw.nodes[id].op, Op::Pair(..)),
                    OutputKind::PerGroup(_) => group_uniform(&lw.nodes, &lw.inputs, id),
                    _ => false,
                };
                if matches!(kind, OutputKind::PerGroup(_)) && lw.group.is_none() {
                    return Err(syn::Error::new(
                        ty.span(),
                        "a `PerGroup<T>` output stores one value per group of columns: the program needs a group \
                         reduction (`group_max(x, 128)`) to give the group size",
                    ));
                }
                if !fits && matches!(kind, OutputKind::PerGroup(_)) {
                    return Err(syn::Error::new(
                        ty.span(),
                        format!(
                            "`{name}` is not the same across each group of columns; a `PerGroup<T>` output needs a value \
                             of group reductions (`group_max(...)`), row vectors, scalars and constants"
                        ),
                    ));
                }
                if !fits {
                    let is = match (w, kind) {
                        (Width::Uniform, _) if lw.group.is_some() => {
                            "uniform (declare it `Tile<T>`, `PerRow<T>`, `PerCol<T>` or `PerGroup<T>`)"
                        }
                        (Width::Uniform, _) => "uniform (declare it `Tile<T>`, `PerRow<T>` or `PerCol<T>`)",
                        (Width::Row, _) => "the same across each row (declare it `PerRow<T>` or `Tile<T>`)",
                        (Width::Col, _) => "the same down each column (declare it `PerCol<T>` or `Tile<T>`)",
                        (Width::Full, OutputKind::PerRow(_)) => "not the same across a row; a `PerRow<T>` output needs a value of row vectors and scalars",
                        (Width::Full, OutputKind::PerCol(_)) => "not the same down a column; a `PerCol<T>` output needs a value of column vectors and scalars",
                        (Width::Full, _) => "full-width (declare it `Tile<T>`)",
                        (Width::Half, _) => "half-width, from `unpair` (declare it `HalfTile<T>`)",
                        (Width::Double, OutputKind::DoubleTile(_)) => {
                            "a DoubleTile input; a `DoubleTile` output is a `pair(even, odd)` of full-width values"
                        }
                        (Width::Double, _) => "double-width, a `pair` of full-width values (declare it `DoubleTile<T>`)",
                    };
                    return Err(syn::Error::new(ty.span(), format!("`{name}` is {is}")));
                }
                id
            }
        };
        outputs.push(Output { name, kind: *kind, value });
    }
    Ok(outputs)
}

/// The error a use of a name gets when the line that defined it failed:
/// that line's error is the one reported.
const POISONED: &str = "\u{0}a name whose definition failed";

fn report(errors: &mut Vec<syn::Error>, e: syn::Error) {
    if e.to_string() != POISONED {
        errors.push(e);
    }
}

/// All of a program's errors as one, in source order.
fn combined(mut errors: Vec<syn::Error>) -> syn::Error {
    errors.sort_by_key(|e| (e.span().start().line, e.span().start().column));
    let mut all = errors.remove(0);
    for e in errors {
        all.combine(e);
    }
    all
}

/// The names a `let` pattern binds (a name, or a tuple of names).
fn bound_names(pat: &Pat, each: &mut impl FnMut(String)) {
    match pat {
        Pat::Ident(pi) => each(pi.ident.to_string()),
        Pat::Tuple(t) => t.elems.iter().for_each(|p| bound_names(p, each)),
        Pat::Type(t) => bound_names(&t.pat, each),
        Pat::Paren(p) => bound_names(&p.pat, each),
        _ => {}
    }
}

/// Finds the config of an `#[epilogue(...)]` / `#[coda::epilogue(...)]` attribute.
pub fn epilogue_attr(item: &ItemFn) -> Option<&syn::Attribute> {
    item.attrs.iter().find(|a| is_epilogue(a))
}

fn is_epilogue(a: &syn::Attribute) -> bool {
    a.path().segments.last().is_some_and(|s| s.ident == "epilogue")
}

/// Lowers every `#[epilogue]` function of a parsed Rust file, recursing into
/// inline modules. Each function is lowered on its own, so the error holds
/// the errors of every function that fails.
pub fn lower_file(file: &syn::File) -> syn::Result<Vec<Program>> {
    collect(epilogue_fns(file).into_iter().map(|f| lower_fn(f, item_config(f)?)))
}

/// A program in each config it compiles for (its own first), and the configs
/// it cannot take, with the reason.
pub type Variants = (Vec<Program>, Vec<(Config, String)>);

/// Every program of `file` with the configurations `extra` asks for beside
/// its own: `(program, variants)`, the program's own config first. A config
/// the program cannot take (e.g. too little shared memory left for two
/// mainloop stages) is dropped with its reason. Errors as [`lower_file`].
pub fn lower_file_variants(
    file: &syn::File,
    extra: impl Fn(&Program) -> Vec<Config>,
) -> syn::Result<Vec<Variants>> {
    collect(epilogue_fns(file).into_iter().map(|f| {
        let config = item_config(f)?;
        let program = lower_fn(f, config)?;
        let (mut variants, mut dropped) = (vec![], vec![]);
        for cfg in extra(&program) {
            let cfg = cfg.with_options_of(&config);
            if cfg == config || variants.iter().any(|v: &Program| v.config == cfg) {
                continue;
            }
            match cfg.check().and_then(|()| lower_fn(f, cfg).map_err(|e| e.to_string())) {
                Ok(v) => variants.push(v),
                Err(e) => dropped.push((cfg, e)),
            }
        }
        variants.insert(0, program);
        Ok((variants, dropped))
    }))
}

/// Every `Ok`, or all the errors combined.
fn collect<T>(results: impl Iterator<Item = syn::Result<T>>) -> syn::Result<Vec<T>> {
    let (mut out, mut error) = (vec![], None::<syn::Error>);
    for r in results {
        match (r, &mut error) {
            (Ok(v), _) => out.push(v),
            (Err(e), Some(all)) => all.combine(e),
            (Err(e), None) => error = Some(e),
        }
    }
    error.map_or(Ok(out), Err)
}

/// The config of an `#[epilogue]` function's attribute.
fn item_config(f: &ItemFn) -> syn::Result<Config> {
    if let Some(second) = f.attrs.iter().filter(|a| is_epilogue(a)).nth(1) {
        return Err(syn::Error::new(second.span(), "a second `#[epilogue]` attribute: give every option in one"));
    }
    match epilogue_attr(f).map(|a| &a.meta) {
        None | Some(syn::Meta::Path(_)) => Ok(Config::default()),
        Some(syn::Meta::List(l)) => parse_config(l.tokens.clone()),
        Some(syn::Meta::NameValue(nv)) => Err(syn::Error::new(nv.span(), "options go in parentheses: `#[coda::epilogue(tile = (128, 128))]`")),
    }
}

/// The `#[epilogue]` functions of a file, also inside inline modules, whatever
/// their `#[cfg]` (a build sees them all).
pub fn epilogue_fns(file: &syn::File) -> Vec<&ItemFn> {
    fn walk<'f>(items: &'f [syn::Item], out: &mut Vec<&'f ItemFn>) {
        for item in items {
            match item {
                syn::Item::Fn(f) if epilogue_attr(f).is_some() => out.push(f),
                syn::Item::Mod(syn::ItemMod { content: Some((_, items)), .. }) => walk(items, out),
                _ => {}
            }
        }
    }
    let mut out = vec![];
    walk(&file.items, &mut out);
    out
}
