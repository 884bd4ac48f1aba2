//! The frontend: what a program lowers to, and the errors users get.

use coda_dsl::ir::{BinaryOp, Config, DType, InputKind, Op, OutputKind, Schedule};
use coda_dsl::{lower_fn, parse_config};
use quote::quote;

fn lower(item: proc_macro2::TokenStream) -> Result<coda_dsl::Program, String> {
    let f: syn::ItemFn = syn::parse2(item).expect("valid Rust");
    lower_fn(&f, Config::default()).map_err(|e| e.to_string())
}

#[test]
fn o_proj_program_lowers_to_a_typed_dag() {
    let p = lower(quote! {
        /// o_proj epilogue.
        fn residual_rms_partial(acc: Acc, z: Tile<bf16>, gamma: PerCol<bf16>)
            -> (Tile<bf16>, Tile<bf16>, RowPartial<f32>) {
            let h = acc + z;
            let u = h * gamma;
            let sq = row_sum(h * h);
            (h, u, sq)
        }
    })
    .unwrap();
    assert_eq!(p.doc, "o_proj epilogue.");
    let kinds: Vec<_> = p.inputs.iter().map(|i| i.kind).collect();
    assert_eq!(kinds, [InputKind::Acc, InputKind::Tile(DType::Bf16), InputKind::PerCol(DType::Bf16)]);
    let outs: Vec<_> = p.outputs.iter().map(|o| (o.name.as_str(), o.kind)).collect();
    assert_eq!(outs, [("h", OutputKind::Tile(DType::Bf16)), ("u", OutputKind::Tile(DType::Bf16)), ("sq", OutputKind::RowPartial)]);
    let h = p.outputs[0].value;
    assert_eq!(p.nodes[h].op, Op::Binary(BinaryOp::Add, 0, 1));
    let Op::RowSum(sq_src) = p.nodes[p.outputs[2].value].op else { panic!("sq is a row sum") };
    assert_eq!(p.nodes[sq_src].op, Op::Binary(BinaryOp::Mul, h, h));
    // The IR round-trips through JSON, which the macro embeds.
    assert_eq!(coda_dsl::Program::from_json(&p.to_json()).unwrap(), p);
    // Launch ABI order: tensor inputs, then outputs.
    let names: Vec<_> = p.tensor_params().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["z", "gamma", "h", "u", "sq"]);
}

#[test]
fn config_attribute_is_parsed_and_checked() {
    let c = parse_config(quote!(tile = (128, 128), cluster = (2, 1), schedule = pingpong)).unwrap();
    assert_eq!((c.tile_m, c.tile_n, c.cluster_m, c.cluster_n, c.schedule), (128, 128, 2, 1, Schedule::Pingpong));
    let kn = parse_config(quote!(b_layout = kn)).unwrap();
    assert_eq!(kn.b_layout, coda_dsl::ir::BLayout::Kn);
    let bad = parse_config(quote!(b_layout = nn)).unwrap_err().to_string();
    assert!(bad.contains("b_layout must be `nk`"), "{bad}");
    let bad = parse_config(quote!(tile = (64, 64))).unwrap_err().to_string();
    assert!(bad.contains("tile (64, 64) is not supported"), "{bad}");
    let bad = parse_config(quote!(tiles = (128, 128))).unwrap_err().to_string();
    assert!(bad.contains("unknown epilogue option"), "{bad}");
    let bad = parse_config(quote!(tile = (256, 128), schedule = pingpong)).unwrap_err().to_string();
    assert!(bad.contains("pingpong schedule needs tile_m = 128"), "{bad}");
    // Ping-pong cannot take the default 128×256 tile, so it comes with 128×128.
    let pp = parse_config(quote!(schedule = pingpong)).unwrap();
    assert_eq!((pp.tile_m, pp.tile_n, pp.schedule), (128, 128, Schedule::Pingpong));
    let pp = parse_config(quote!(schedule = pingpong, tile = (128, 192))).unwrap();
    assert_eq!((pp.tile_m, pp.tile_n), (128, 192));
}

/// Each program of a file is lowered on its own: the error lists every failing one.
#[test]
fn a_file_reports_the_errors_of_every_program() {
    let file: syn::File = syn::parse2(quote! {
        #[coda::epilogue]
        fn p(acc: Acc) -> Tile<bf16> { let y = mish(acc); y }
        #[coda::epilogue]
        fn ok(acc: Acc) -> Tile<bf16> { let y = acc; y }
        mod m {
            #[coda::epilogue(tile = (64, 64))]
            fn q(acc: Acc) -> Tile<bf16> { let y = acc; y }
        }
    })
    .unwrap();
    let errors: Vec<String> = coda_dsl::lower_file(&file).unwrap_err().into_iter().map(|e| e.to_string()).collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0].contains("unknown function `mish`"), "{errors:?}");
    assert!(errors[1].contains("tile (64, 64) is not supported"), "{errors:?}");
    let names: Vec<String> = coda_dsl::frontend::epilogue_fns(&file).iter().map(|f| f.sig.ident.to_string()).collect();
    assert_eq!(names, ["p", "ok", "q"]);
}

/// Config names are what build options and tuning caches use: every config
/// of the tuning set round-trips, and malformed or refused names say why.
#[test]
fn config_names() {
    let all = coda_dsl::ir::Config::all();
    assert_eq!(all.len(), 24, "16 cooperative + 8 ping-pong (128-row tiles but 128×256)");
    for c in &all {
        assert_eq!(coda_dsl::ir::Config::from_name(&c.name()).as_ref(), Ok(c));
    }
    assert_eq!(coda_dsl::ir::Config::default().name(), "coop_128x256_c1x1");
    let err = coda_dsl::ir::Config::from_name("pp_256x128_c1x1").unwrap_err();
    assert!(err.contains("needs tile_m = 128"), "{err}");
    let err = coda_dsl::ir::Config::from_name("pp_128x256_c1x1").unwrap_err();
    assert!(err.contains("spills"), "{err}");
    assert!(coda_dsl::ir::Config::from_name("coop_128x100_c1x1").unwrap_err().contains("not supported"));
    assert!(coda_dsl::ir::Config::from_name("fast").unwrap_err().contains("not a config name"));
}

/// Each user error names the rule; spans are checked by the trybuild tests.
#[test]
fn user_errors_name_the_rule() {
    let cases = [
        (quote!(fn p(acc: Acc) -> Tile<bf16> { let y = mish(acc); y }), "unknown function `mish`"),
        (quote!(fn p(acc: Acc) -> Tile<bf16> { let y = exp(acc, acc); y }), "`exp` takes 1 argument, got 2"),
        (quote!(fn p(acc: Acc) -> Tile<bf16> { let y = pow(acc, 9); y }), "`pow`'s exponent must be an integer literal from 1 to 8"),
        (quote!(fn p(acc: Acc) -> Tile<bf16> { let y = pow(acc, acc); y }), "`pow`'s exponent must be an integer literal from 1 to 8"),
        (quote!(fn p(acc: Acc) -> Tile<bf16> { let y = pow(acc, 2.0); y }), "`pow`'s exponent must be an integer literal from 1 to 8"),
        (quote!(fn p(acc: Acc) -> Tile<bf16> { let y = acc + q; y }), "unknown name `q`"),
        (quote!(fn p(acc: Acc, z: Tile<bf16>) -> Tile<bf16> { let y = acc; y }), "input `z` is never used"),
        (quote!(fn p(acc: Acc) -> Tile<bf16> { let t = acc * 2.0; let y = acc; y }), "`t` is computed but never used"),
        (quote!(fn p(acc: Acc) -> Tile<bf16> { let s = row_sum(acc); s }), "declare this output as `RowPartial<f32>`"),
        (quote!(fn p(acc: Acc) -> RowPartial<f32> { let y = acc; y }), "needs `row_sum(...)`"),
        (quote!(fn p(acc: Acc) -> Tile<bf16> { let s = row_sum(acc); let y = s + 1.0; y }), "a `row_sum` partial is not an element-wise value"),
        (quote!(fn p(acc: Acc, t: PerRow<i32>) -> Tile<bf16> { let y = acc + t; y }), "an i32 index vector is not an element-wise value"),
        (quote!(fn p(acc: Acc, t: PerRow<f32>) -> PerRow<f32> { let g = gather(acc, t); g }), "`gather`'s target must be a `PerRow<i32>` input"),
        (quote!(fn p(acc: Acc) -> LsePartial<f32> { let s = row_sum(acc); s }), "`s` is a `row_sum` partial; declare this output as `RowPartial<f32>`"),
        (quote!(fn p(acc: Acc) -> ColPartial<f32> { let s = acc * 2.0; s }), "a `ColPartial<f32>` output needs `col_sum(...)`"),
        (quote!(fn p(acc: Acc) -> RowPartial<f32> { let s = row_max(acc); s }), "`s` is a `row_max` partial; declare this output as `RowMaxPartial<f32>`"),
        (quote!(fn p(acc: Acc) -> ColMaxPartial<f32> { let s = col_sum(acc); s }), "`s` is a `col_sum` partial; declare this output as `ColPartial<f32>`"),
        (quote!(fn p(acc: Acc) -> RowMaxPartial<f32> { let s = acc; s }), "a `RowMaxPartial<f32>` output needs `row_max(...)`"),
        (quote!(fn p(acc: Acc) -> ColMaxPartial { let s = abs(acc); s }), "a `ColMaxPartial<f32>` output needs `col_max(...)`"),
        (quote!(fn p(acc: Acc) -> RowMaxPartial<f32> { let (g, u) = unpair(acc); let s = row_max(g * u); s }), "`row_max` of a half-width value is not supported"),
        (quote!(fn p(acc: Acc) -> Tile<bf16> { let s = col_max(acc); let y = acc - s; y }), "a `col_max` partial is not an element-wise value"),
        (quote!(fn p(acc: Acc) -> PerRow<f32> { let s = acc * 2.0; s }), "`s` is not the same across a row"),
        (quote!(fn p(acc: Acc, r: PerRow<f32>) -> (Tile<bf16>, PerCol<f32>) { let y = acc; let s = r * 2.0; (y, s) }), "`s` is the same across each row (declare it `PerRow<T>`"),
        (quote!(fn p(acc: Acc) -> (Tile<bf16>, Tile<bf16>) { let y = acc; y }), "declares 2 outputs but the body returns 1"),
        (quote!(fn p(z: PerRow<f32>) -> Tile<bf16> { let y = z; y }), "or, for a map program, a `Tile<T>` input"),
        (quote!(fn p(acc: Acc, t: PerRow<f32>) -> Tile<bf16> { let y = acc * onehot(t); y }), "`onehot`'s target must be a `PerRow<i32>` input"),
        (quote!(fn p(acc: Acc, a: Tile<bf16>) -> Tile<bf16> { let y = acc + a; y }), "`a` is reserved for the GEMM operand A"),
        (quote!(fn p(acc: Acc) -> Tile<bf16> { let b = acc; b }), "`b` is reserved for the GEMM operand B"),
        (quote!(fn p(acc: Acc, r: PerRow<f16>) -> Tile<bf16> { let y = acc * r; y }), "unknown element type `f16`"),
        (quote!(fn p(acc: Acc, r: Row<f32>) -> Tile<bf16> { let y = acc * r; y }), "unknown input type `Row`"),
        (quote!(fn p(acc: Acc) -> Tile<i32> { let y = acc; y }), "element type `i32` is not allowed here"),
        (quote!(fn p(acc: Acc) -> Tile<bf16> { let (g, u) = unpair(acc); let y = g * u + acc; y }), "mixes values of different widths"),
        (quote!(fn p(acc: Acc) -> Tile<bf16> { let y = unpair(acc); y }), "`unpair` returns two values"),
        (quote!(fn p(acc: Acc, z: DoubleTile<bf16>) -> Tile<bf16> { let y = acc * z; y }), "a double-width value can only be split"),
        (quote!(fn p(acc: Acc) -> Tile<bf16> { let (g, u) = unpair(acc); let y = g * u; y }), "`y` is half-width, from `unpair` (declare it `HalfTile<T>`)"),
        (quote!(fn p(acc: Acc, r: PerRow<f32>) -> Tile<bf16> { let y = pair(r, r); y }), "`pair` interleaves two half-width or two full-width"),
        (quote!(fn p(acc: Acc) -> Tile<bf16> { let d = pair(acc, acc); let y = d + 1.0; y }), "a double-width value can only be split"),
        (quote!(fn p(acc: Acc) -> Tile<bf16> { acc * 2.0 }), "return a `let` name"),
        (quote!(fn p(acc: Acc) -> Tile<bf16> { let y = acc % 2.0; y }), "only `+ - * /` and the comparisons `> >= < <= == !=` are supported"),
        (quote!(fn p(acc: Acc) -> Tile<bf16> { let y = (acc > 0.0) && (acc < 1.0); y }), "only `+ - * /` and the comparisons"),
        (quote!(fn p(acc: Acc) -> Tile<bf16> { let (g, u) = unpair(acc); let y = g > acc; y }), "this mixes values of different widths"),
        (quote!(fn p(acc: Acc) -> Tile<bf16> { let y = group_sum(acc, 96); y }), "the group size must be one of 32, 64, 128 columns, as an integer literal"),
        (quote!(fn p(acc: Acc) -> Tile<bf16> { let y = group_sum(acc, acc); y }), "the group size must be one of 32, 64, 128 columns"),
        (quote!(fn p(acc: Acc) -> Tile<bf16> { let y = group_max(acc); y }), "`group_max` takes 2 arguments, got 1"),
        (quote!(fn p(acc: Acc, r: PerRow<f32>) -> Tile<bf16> { let y = acc * group_mean(r, 32); y }), "`group_mean` reduces groups of columns of a full-width value"),
        (quote!(fn p(acc: Acc) -> HalfTile<bf16> { let (g, u) = unpair(acc); let y = group_sum(g, 32); y }), "of a full-width value"),
        (quote!(fn p(acc: Acc) -> Tile<bf16> { let y = group_sum(acc, 32) + group_max(acc, 64); y }), "a program reduces groups of one size: the group reduction at "),
        (quote!(fn p(acc: Acc) -> Tile<bf16> { let y = acc * 1e39; y }), "literal out of range for f32"),
        (quote!(fn p(acc: Acc) -> Tile<bf16> { let y = acc * f32::NAN; y }), "not the path `f32::NAN`"),
        (quote!(fn p(acc: Acc, r#type: PerRow<f32>) -> Tile<bf16> { let y = acc * r#type; y }), "raw identifiers are not supported: rename `r#type`"),
        (quote!(fn p(acc: Acc) -> Tile<bf16> { let r#y = acc; r#y }), "raw identifiers are not supported: rename `r#y`"),
        (quote!(fn p(acc: Acc, y: PerRow<f32>) -> Tile<bf16> { let y = acc * y; y }), "`y` is an input's name, and an output takes its `let` name"),
        (
            quote!(fn p(acc: Acc) -> Tile<bf16> { let (g, u) = unpair(acc); let y = pair(g * u, acc); y }),
            "these are a half-width value (from `unpair`) and a full-width value",
        ),
        (
            quote!(fn p(acc: Acc) -> HalfTile<bf16> { let (g, u) = unpair(acc); let (x, z) = unpair(g); let y = x * z * u; y }),
            "into its even and odd columns; this is a half-width value",
        ),
        (quote!(fn p(acc: Acc) -> HalfTile<bf16> { let (r#g, u) = unpair(acc); let y = r#g * u; y }), "raw identifiers are not supported"),
        (quote!(fn p(acc: Acc, größe: PerRow<f32>) -> Tile<bf16> { let y = acc * größe; y }), "`größe`: names are ASCII here"),
        (quote!(fn p__q(acc: Acc) -> Tile<bf16> { let y = acc; y }), "a program's name has no `__`"),
        (quote!(fn p(acc: Acc) -> Tile<bf16> { let y = acc * 2.0 else { return; }; y }), "`let ... else` is not supported"),
        (quote!(fn p(acc: Acc) -> HalfTile<bf16> { let (g, g) = unpair(acc); let y = g * 2.0; y }), "`g` is bound twice in this pattern"),
        (quote!(fn p(acc: Acc, a_scale: PerRow<f32>) -> Tile<bf16> { let y = acc * a_scale; y }), "`a_scale` is reserved for A's blockwise scales"),
        (
            quote!(fn p(acc: Acc) -> (Tile<bf16>, HalfTile<bf16>) { let y = group_sum(acc, 32); let h = 1.0; (y, h) }),
            "`h` is uniform (declare it `Tile<T>`, `PerRow<T>`, `PerCol<T>` or `PerGroup<T>`)",
        ),
    ];
    let too_many = quote!(
        fn p(acc: Acc) -> (Tile<bf16>, Tile<bf16>, Tile<bf16>, Tile<bf16>, Tile<bf16>, Tile<bf16>, Tile<bf16>, Tile<bf16>, Tile<bf16>) {
            let a0 = acc; let a1 = acc * 2.0; let a2 = acc * 3.0; let a3 = acc * 4.0;
            let a4 = acc * 5.0; let a5 = acc * 6.0; let a6 = acc * 7.0; let a7 = acc * 8.0; let a8 = acc * 9.0;
            (a0, a1, a2, a3, a4, a5, a6, a7, a8)
        }
    );
    let cases: Vec<_> = cases.into_iter().chain([(too_many, "too many TMA-staged tiles: with tile (128, 256)")]).collect();
    // The group size must divide the tile's columns.
    let odd_tile = quote!(#[coda::epilogue(tile = (128, 192), schedule = pingpong)] fn p(acc: Acc) -> Tile<bf16> { let y = group_mean(acc, 128); y });
    let file = syn::parse2::<syn::File>(odd_tile).unwrap();
    let err = coda_dsl::lower_file(&file).unwrap_err().to_string();
    assert!(err.contains("groups of 128 columns must divide the tile's 192 columns"), "{err}");
    for (src, want) in cases {
        let err = lower(src.clone()).expect_err(&src.to_string());
        assert!(err.contains(want), "{src}\n  got: {err}\n  want: {want}");
    }
    let deep = format!("fn p(acc: Acc) -> Tile<bf16> {{ let y = {}acc{}; y }}", "(".repeat(300), ")".repeat(300));
    let err = lower(deep.parse().unwrap()).unwrap_err();
    assert!(err.contains("expression nested deeper than 256 levels"), "{err}");
    for unit in [quote!(fn p(acc: Acc) -> () { let (_, _) = unpair(acc); 1.0 }), quote!(fn p(acc: Acc) -> () { acc })] {
        let err = lower(unit).unwrap_err();
        assert!(err.contains("an epilogue returns at least one output"), "{err}");
    }
    let twice = quote!(#[coda::epilogue(a = e4m3, b = e4m3)] #[coda::epilogue(tile = (256, 128))] fn p(acc: Acc) -> Tile<bf16> { let y = acc; y });
    let err = coda_dsl::lower_file(&syn::parse2::<syn::File>(twice).unwrap()).unwrap_err().to_string();
    assert!(err.contains("a second `#[epilogue]` attribute"), "{err}");
    let name_value = quote!(#[coda::epilogue = "pingpong"] fn p(acc: Acc) -> Tile<bf16> { let y = acc; y });
    let err = coda_dsl::lower_file(&syn::parse2::<syn::File>(name_value).unwrap()).unwrap_err().to_string();
    assert!(err.contains("options go in parentheses"), "{err}");
}

/// Every failing line of a program is reported, and a name whose line
/// failed is not reported again where it is used.
#[test]
fn each_failing_line_of_a_program_is_reported_once() {
    let err = coda_dsl::lower_fn(
        &syn::parse2(quote! {
            fn p(acc: Acc, bad: PerColumn<f32>, r: PerRow<f32>) -> Tile<bf16> {
                let y = erf(acc) + bad;
                let z = pow(acc, 2.5);
                let w = y + z * r + mish(acc);
                w
            }
        })
        .unwrap(),
        Config::default(),
    )
    .unwrap_err();
    let messages: Vec<String> = err.into_iter().map(|e| e.to_string()).collect();
    assert_eq!(messages.len(), 3, "{messages:#?}");
    assert!(messages[0].contains("unknown input type `PerColumn`"), "{messages:#?}");
    assert!(messages[1].contains("unknown function `erf`"), "{messages:#?}");
    assert!(messages[2].contains("`pow`'s exponent"), "{messages:#?}");
    // An annotated `let` is refused once; its name is not then unknown.
    let err = lower(quote!(fn p(acc: Acc) -> Tile<bf16> { let y: f32 = acc; y })).unwrap_err();
    assert!(err.contains("no patterns or type annotations") && !err.contains("unknown name"), "{err}");
}

#[test]
fn options_are_given_once_as_name_value_pairs() {
    let err = parse_config(quote!(tile = (128, 128), tile = (128, 256))).unwrap_err().to_string();
    assert!(err.contains("`tile` is given twice"), "{err}");
    let err = parse_config(quote!(cooperative)).unwrap_err().to_string();
    assert!(err.contains("epilogue options are `name = value` pairs separated by commas"), "{err}");
}

#[test]
fn operand_options_are_parsed_and_checked() {
    use coda_dsl::ir::{Accumulation, Operands, OperandScale};
    let c = parse_config(quote!(a = e4m3, b = e4m3, scale = blockwise(1x128, 128x128))).unwrap();
    assert_eq!(c.operands, Operands { a: DType::E4m3, b: DType::E4m3, scale: OperandScale::Blockwise, ..Operands::BF16 });
    assert_eq!(c.operands.tile_k(), 128);
    let c = parse_config(quote!(a = e4m3, b = e5m2)).unwrap();
    assert_eq!((c.operands.a, c.operands.b, c.operands.scale), (DType::E4m3, DType::E5m2, OperandScale::None));
    // A bf16 program's IR has no operand field: its JSON (and fingerprint) is what it was.
    let bf16 = lower(quote! { fn f(acc: Acc) -> Tile<bf16> { let y = acc; y } }).unwrap();
    assert!(!bf16.to_json().contains("operands"), "{}", bf16.to_json());
    let err = |args: proc_macro2::TokenStream| parse_config(args).unwrap_err().to_string();
    let e = err(quote!(a = e4m3));
    assert!(e.contains("must both be bf16 or both 8-bit floats"), "{e}");
    let e = err(quote!(a = e4m3, b = e4m3, b_layout = kn));
    assert!(e.contains("b_layout = kn is bf16 only"), "{e}");
    let e = err(quote!(scale = blockwise(1x128, 128x128)));
    assert!(e.contains("needs 8-bit operands"), "{e}");
    let e = err(quote!(a = e4m3, b = e4m3, schedule = pingpong));
    assert!(e.contains("8-bit operands take the cooperative schedule with a 128×128 tile"), "{e}");
    let e = err(quote!(a = e4m3, b = e4m3, tile = (128, 256)));
    assert!(e.contains("not coop_128x256_c1x1"), "{e}");
    // Without a tile, 8-bit operands take 128×128.
    let c = parse_config(quote!(a = e4m3, b = e4m3, cluster = (1, 2))).unwrap();
    assert_eq!((c.tile_m, c.tile_n, c.cluster_n), (128, 128, 2));
    let e = err(quote!(a = e4m3, b = e4m3, scale = blockwise(128x128, 128x128)));
    assert!(e.contains("scale must be `blockwise(1x128, 128x128)`"), "{e}");
    let e = err(quote!(a = fp8));
    assert!(e.contains("operand a must be `bf16`, `e4m3` or `e5m2`"), "{e}");
    // Fast accumulation holds no partial sums, so it takes a bf16 program's
    // configs, default tile included; its IR says so, a promoting one's does not.
    let c = parse_config(quote!(a = e4m3, b = e4m3, accum = fast)).unwrap();
    assert_eq!((c.tile_m, c.tile_n, c.schedule, c.operands.accum), (128, 256, Schedule::Cooperative, Accumulation::Fast));
    let c = parse_config(quote!(a = e5m2, b = e4m3, accum = fast, schedule = pingpong, cluster = (1, 2))).unwrap();
    assert_eq!((c.tile_m, c.tile_n, c.schedule), (128, 128, Schedule::Pingpong));
    let fast = lower_fn(
        &syn::parse2(quote! { fn f(acc: Acc) -> Tile<bf16> { let y = acc; y } }).unwrap(),
        parse_config(quote!(a = e4m3, b = e4m3, accum = fast)).unwrap(),
    )
    .unwrap();
    assert!(fast.to_json().contains("\"accum\":\"Fast\""), "{}", fast.to_json());
    let promoted = parse_config(quote!(a = e4m3, b = e4m3, accum = promoted)).unwrap();
    assert_eq!(promoted, parse_config(quote!(a = e4m3, b = e4m3)).unwrap());
    let e = err(quote!(accum = fast));
    assert!(e.contains("accum = fast needs 8-bit operands"), "{e}");
    let e = err(quote!(a = e4m3, b = e4m3, accum = fast, scale = blockwise(1x128, 128x128)));
    assert!(e.contains("exclude each other"), "{e}");
    let e = err(quote!(a = e4m3, b = e4m3, accum = slow));
    assert!(e.contains("accum must be `promoted` (the default) or `fast`"), "{e}");
    let e = err(quote!(a = e4m3, b = e4m3, accum = fast, b_layout = kn));
    assert!(e.contains("b_layout = kn is bf16 only"), "{e}");
    // 8-bit tiles are outputs only, and the launch names stay reserved.
    let e = lower(quote! { fn f(acc: Acc, x: Tile<e4m3>) -> Tile<bf16> { acc + x } }).unwrap_err();
    assert!(e.contains("element type `e4m3` is not allowed here"), "{e}");
    let q = lower(quote! { fn f(acc: Acc) -> Tile<e4m3> { let q = acc * 2.0; q } }).unwrap();
    assert_eq!(q.outputs[0].kind, OutputKind::Tile(DType::E4m3));
    let e = lower(quote! { fn f(acc: Acc, a_scale: Scalar) -> Tile<bf16> { acc * a_scale } }).unwrap_err();
    assert!(e.contains("a_scale"), "{e}");
    let f: syn::ItemFn = syn::parse2(quote! { fn f(x: Tile<bf16>) -> Tile<bf16> { let y = x * 2.0; y } }).unwrap();
    let e = lower_fn(&f, parse_config(quote!(a = e4m3, b = e4m3)).unwrap()).unwrap_err().to_string();
    assert!(e.contains("a map program has no GEMM"), "{e}");
}

#[test]
fn per_group_outputs_need_group_uniform_values() {
    let p = lower(quote! {
        fn q(acc: Acc, r: PerRow<f32>) -> (PerGroup<f32>, Tile<bf16>) {
            let amax = group_max(abs(acc), 64);
            let s = max(amax * r, 0.001) / 448.0;
            let y = acc / s;
            (s, y)
        }
    })
    .unwrap();
    assert_eq!(p.outputs[0].kind, OutputKind::PerGroup(DType::F32));
    assert_eq!(p.tensor_params()[1].shape, coda_dsl::ir::Shape::PerGroup(64));
    let e = lower(quote! {
        fn q(acc: Acc) -> (PerGroup<f32>, Tile<bf16>) {
            let amax = group_max(abs(acc), 64);
            let s = amax + acc;
            let y = acc / amax;
            (s, y)
        }
    })
    .unwrap_err();
    assert!(e.contains("`s` is not the same across each group of columns"), "{e}");
    let e = lower(quote! {
        fn q(acc: Acc, r: PerRow<f32>) -> (PerGroup<f32>, Tile<bf16>) {
            let s = r * 2.0;
            let y = acc * r;
            (s, y)
        }
    })
    .unwrap_err();
    assert!(e.contains("needs a group reduction"), "{e}");
}
