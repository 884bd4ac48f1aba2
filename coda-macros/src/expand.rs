//! Program → the Rust module a user calls.

use coda_dsl::ir::{BLayout, DType, InputKind, OperandScale, Program, Shape};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};

fn elem(d: DType) -> TokenStream {
    match d {
        DType::Bf16 => quote!(::coda_runtime::bf16),
        DType::F32 => quote!(f32),
        DType::I32 => quote!(i32),
        DType::E4m3 => quote!(::coda_runtime::e4m3),
        DType::E5m2 => quote!(::coda_runtime::e5m2),
    }
}

fn dtype_path(d: DType) -> TokenStream {
    match d {
        DType::Bf16 => quote!(::coda_runtime::dsl::ir::DType::Bf16),
        DType::F32 => quote!(::coda_runtime::dsl::ir::DType::F32),
        DType::I32 => quote!(::coda_runtime::dsl::ir::DType::I32),
        DType::E4m3 => quote!(::coda_runtime::dsl::ir::DType::E4m3),
        DType::E5m2 => quote!(::coda_runtime::dsl::ir::DType::E5m2),
    }
}

fn shape_doc(s: Shape) -> &'static str {
    match s {
        Shape::Tile => "`[M, N]` row-major",
        Shape::HalfTile => "`[M, N / 2]` row-major: one value per column pair",
        Shape::DoubleTile => "`[M, 2N]` row-major: column pairs (even, odd) interleaved",
        Shape::PerRow => "`[M]`: one value per row",
        Shape::PerCol => "`[N]`: one value per column",
        Shape::RowPartial => "per-tile row sums, allocated by the launch for its config; finish with `coda_runtime::aux`",
        Shape::ColPartial => "per-tile column sums, allocated by the launch for its config; finish with `coda_runtime::aux::col_sums`",
        Shape::LsePartial => "per-tile log-sum-exp partials, allocated by the launch for its config; finish with `coda_runtime::aux::lse_from_partials`",
        Shape::RowMaxPartial => "per-tile row maxima, allocated by the launch for its config; finish with `coda_runtime::aux::row_maxes` or `max_of_all`",
        Shape::ColMaxPartial => "per-tile column maxima, allocated by the launch for its config; finish with `coda_runtime::aux::col_maxes` or `max_of_all`",
        Shape::PerGroup(_) => "`[ceil(N / g), M]`: one value per row and group of `g` columns, M fastest (a blockwise `a_scale`)",
    }
}

/// The table of the program's compiled configs, which the crate's build
/// script writes to `OUT_DIR/coda-gen/<program>.rs`, and a compile-time
/// check that it was compiled from this very program (a program of the same
/// name in a file build.rs does not list must not get its kernels); without
/// the table, an error at the program's name that says how to build it (and
/// an empty table, so the rest of the crate still type-checks).
fn configs_module(p: &Program, span: Span) -> TokenStream {
    let file = format!("coda-gen/{}.rs", p.name);
    let out_dir = std::env::var("OUT_DIR").ok();
    let fingerprint = p.fingerprint();
    if out_dir.as_ref().is_some_and(|d| std::path::Path::new(d).join(&file).is_file()) {
        let file = format!("/{file}");
        let msg = format!(
            "the kernels compiled as `{}` come from another program of that name: list this file in build.rs \
             and give the programs different names",
            p.name
        );
        // A program the crate never launches is reported at its own `fn` (the
        // module's items); the generated file's items say nothing more.
        return quote::quote_spanned! {span=>
            #[allow(dead_code)]
            mod configs { include!(concat!(env!("OUT_DIR"), #file)); }
            const _: () = ::core::assert!(configs::IR == #fingerprint, #msg);
        };
    }
    let msg = format!(
        "`{}` has no compiled kernel: list the file that defines it in the crate's build.rs, \
         `coda_codegen::epilogues([\"src/...\"]).compile(\"kernels\")`",
        p.name
    );
    quote::quote_spanned! {span=>
        mod configs {
            ::core::compile_error!(#msg);
            pub const TOOLCHAIN: &str = "";
            pub static VARIANTS: &[::coda_runtime::Variant] = &[];
        }
    }
}

/// The typed partials object of a partial output, if `s` is one.
fn partials_type(s: Shape) -> Option<TokenStream> {
    match s {
        Shape::RowPartial => Some(quote!(::coda_runtime::RowPartials)),
        Shape::ColPartial => Some(quote!(::coda_runtime::ColPartials)),
        Shape::LsePartial => Some(quote!(::coda_runtime::LsePartials)),
        Shape::RowMaxPartial => Some(quote!(::coda_runtime::RowMaxPartials)),
        Shape::ColMaxPartial => Some(quote!(::coda_runtime::ColMaxPartials)),
        _ => None,
    }
}

pub fn module(p: &Program, vis: &syn::Visibility, name_span: Span) -> TokenStream {
    let name = format_ident!("{}", p.name);
    let package = std::env::var("CARGO_PKG_NAME").unwrap_or_default();
    let kernel_name = format!("{}::{}", package, p.name);
    let configs = configs_module(p, name_span);
    let doc = if p.doc.is_empty() { format!("Epilogue program `{}`.", p.name) } else { p.doc.clone() };
    let json = p.to_json();
    let work = {
        let coda_dsl::work::Work { tile_load_bytes, store_bytes, sfu, alu } = coda_dsl::work::Work::of(p);
        quote!(::coda_runtime::dsl::work::Work { tile_load_bytes: #tile_load_bytes, store_bytes: #store_bytes, sfu: #sfu, alu: #alu })
    };
    let is_map = p.is_map();

    let params = p.tensor_params();
    let mut fields = vec![];
    let mut infos = vec![];
    let mut binds = vec![];
    let mut records = vec![];
    let mut refs = vec![];
    for t in &params {
        let f = format_ident!("{}", t.name);
        let ty = elem(t.dtype);
        let role = if t.output { "Output" } else { "Input" };
        let d = format!("{role} `{}`: {}.", t.name, shape_doc(t.shape));
        let pname = &t.name;
        if let Some(partials) = partials_type(t.shape) {
            fields.push(quote!(#[doc = #d] pub #f: &'a mut #partials));
            let buf = format_ident!("{}_buf", t.name);
            binds.push(quote!(let #buf = args.#f.bind(#pname, stream, &KERNEL, choice, prob)?;));
            records.push(quote!(args.#f.record(&KERNEL, choice, prob);));
            refs.push(quote!(::coda_runtime::TensorArg::output(#buf)));
        } else if t.output {
            fields.push(quote!(#[doc = #d] pub #f: &'a mut dyn ::coda_runtime::TensorMut<#ty>));
            refs.push(quote!(::coda_runtime::TensorArg::output(&mut *args.#f)));
        } else {
            fields.push(quote!(#[doc = #d] pub #f: &'a dyn ::coda_runtime::TensorRef<#ty>));
            refs.push(quote!(::coda_runtime::TensorArg::input(args.#f)));
        }
        let dt = dtype_path(t.dtype);
        let shape = match t.shape {
            Shape::Tile => quote!(::coda_runtime::dsl::ir::Shape::Tile),
            Shape::HalfTile => quote!(::coda_runtime::dsl::ir::Shape::HalfTile),
            Shape::DoubleTile => quote!(::coda_runtime::dsl::ir::Shape::DoubleTile),
            Shape::PerRow => quote!(::coda_runtime::dsl::ir::Shape::PerRow),
            Shape::PerCol => quote!(::coda_runtime::dsl::ir::Shape::PerCol),
            Shape::RowPartial => quote!(::coda_runtime::dsl::ir::Shape::RowPartial),
            Shape::ColPartial => quote!(::coda_runtime::dsl::ir::Shape::ColPartial),
            Shape::LsePartial => quote!(::coda_runtime::dsl::ir::Shape::LsePartial),
            Shape::RowMaxPartial => quote!(::coda_runtime::dsl::ir::Shape::RowMaxPartial),
            Shape::ColMaxPartial => quote!(::coda_runtime::dsl::ir::Shape::ColMaxPartial),
            Shape::PerGroup(g) => quote!(::coda_runtime::dsl::ir::Shape::PerGroup(#g)),
        };
        let output = t.output;
        infos.push(quote!(::coda_runtime::ParamInfo { name: #pname, shape: #shape, dtype: #dt, output: #output }));
    }
    let scalars: Vec<_> =
        p.inputs.iter().filter(|i| i.kind == InputKind::Scalar).map(|i| format_ident!("{}", i.name)).collect();
    let scalar_names: Vec<_> = scalars.iter().map(|s| s.to_string()).collect();
    let lt = syn::Lifetime::new("'a", Span::call_site());
    let ops = p.config.operands;
    let (a_ty, b_ty) = (elem(ops.a), elem(ops.b));
    let (a_name, b_name) = (ops.a.rust_name(), ops.b.rust_name());
    let a_doc = format!("GEMM operand A: `[M, K]` row-major {a_name}.");
    let (b_doc, b_layout) = match p.config.b_layout {
        BLayout::Nk => (
            format!("GEMM operand B: a `Linear` weight `[N, K]` row-major {b_name} (the GEMM computes `A · Bᵀ`)."),
            quote!(::coda_runtime::dsl::ir::BLayout::Nk),
        ),
        BLayout::Kn => (
            format!("GEMM operand B: `[K, N]` row-major {b_name} (the GEMM computes `A · B`)."),
            quote!(::coda_runtime::dsl::ir::BLayout::Kn),
        ),
    };
    let blockwise = ops.scale == OperandScale::Blockwise;

    // A map program has no GEMM operands: the runtime runs it on an empty
    // GEMM over its first `Tile` input's shape.
    let (operands, shape, launch) = if is_map {
        let tile = params.iter().find(|t| !t.output && t.shape == Shape::Tile).map(|t| format_ident!("{}", t.name));
        (
            quote!(),
            quote!(KERNEL.map_shape(args.#tile)),
            quote!(KERNEL.launch_map(stream, choice, &mut [#(#refs),*], &[#(args.#scalars),*])),
        )
    } else {
        let operands = quote! {
            #[doc = #a_doc]
            pub a: &#lt dyn ::coda_runtime::TensorRef<#a_ty>,
            #[doc = #b_doc]
            pub b: &#lt dyn ::coda_runtime::TensorRef<#b_ty>,
        };
        if blockwise {
            (
                quote! {
                    #operands
                    /// Blockwise scales of A: `[ceil(K / 128), M]` f32, one per row and 128 columns of K (M fastest).
                    pub a_scale: &#lt dyn ::coda_runtime::TensorRef<f32>,
                    /// Blockwise scales of B: `[ceil(N / 128), ceil(K / 128)]` f32, one per 128 × 128 block.
                    pub b_scale: &#lt dyn ::coda_runtime::TensorRef<f32>,
                },
                quote!(KERNEL.gemm_shape(args.a, args.b)),
                quote!(KERNEL.launch_scaled(
                    stream,
                    choice,
                    args.a,
                    args.b,
                    args.a_scale,
                    args.b_scale,
                    &mut [#(#refs),*],
                    &[#(args.#scalars),*]
                )),
            )
        } else {
            (
                operands,
                quote!(KERNEL.gemm_shape(args.a, args.b)),
                quote!(KERNEL.launch(stream, choice, args.a, args.b, &mut [#(#refs),*], &[#(args.#scalars),*])),
            )
        }
    };

    let prob = if binds.is_empty() { quote!() } else { quote!(let prob = shape(&args)?;) };

    quote! {
        #[doc = #doc]
        #[allow(non_snake_case)]
        #vis mod #name {
            /// The arguments of one launch, by name.
            pub struct Args<#lt> {
                #operands
                #(#fields,)*
                #(#[doc = "Runtime scalar."] pub #scalars: f32,)*
            }

            /// The checked program, as JSON (see [`program`]).
            pub const IR_JSON: &str = #json;

            /// The program's IR, e.g. for the CPU reference interpreter.
            pub fn program() -> ::coda_runtime::dsl::Program {
                ::coda_runtime::dsl::Program::from_json(IR_JSON).expect("the macro embeds valid IR")
            }

            #configs

            /// The compiled kernel: its configs and parameter rules.
            // SAFETY: the rules are this program's, from the IR the build
            // compiled; the variants are its compiled configs, own first.
            pub static KERNEL: ::coda_runtime::Kernel = unsafe {
                ::coda_runtime::Kernel::new(
                    #kernel_name,
                    #b_layout,
                    #is_map,
                    &[#(#infos),*],
                    &[#(#scalar_names),*],
                    configs::VARIANTS,
                    configs::TOOLCHAIN,
                    #work,
                )
            };

            /// The GEMM shape `(M, N, K)` of a launch with `args`.
            pub fn shape(args: &Args<'_>) -> ::core::result::Result<::coda_runtime::Problem, ::coda_runtime::Error> {
                #shape
            }

            /// Checks every argument (shape, dtype, alignment, device) and launches on
            /// `stream`, in the config the tuner picks for the shape
            /// ([`::coda_runtime::tune::choose`]). Partial outputs are allocated for it.
            pub fn launch(stream: &::coda_runtime::Stream, args: Args<'_>) -> ::core::result::Result<(), ::coda_runtime::Error> {
                let choice = ::coda_runtime::tune::choose(&KERNEL, stream, shape(&args)?)?;
                launch_as(stream, &choice, args)
            }

            /// As [`launch`], in `choice` (one of `KERNEL.variants()`).
            pub fn launch_as(
                stream: &::coda_runtime::Stream,
                choice: &::coda_runtime::Choice,
                args: Args<'_>,
            ) -> ::core::result::Result<(), ::coda_runtime::Error> {
                // Arguments are read through `args`, never bound by their
                // names, which may be any of this function's own.
                #prob
                #(#binds)*
                #launch?;
                // The partials hold this launch's values only once it is enqueued.
                #(#records)*
                Ok(())
            }
        }
    }
}
