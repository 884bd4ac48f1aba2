//! Property tests of the codegen over generated programs
//! ([`coda_dsl::testgen`], fixed seed; `CODA_PROPTEST_CASES` runs more):
//! every program that lowers gets an EVT plan and a `.cu` translation unit
//! without panicking, and the C++ defines the program's `_run` and
//! `_workspace` launchers under its symbol prefix.

use coda_dsl::testgen;
use proptest::test_runner::TestCaseError;

/// Plans and emits `source`'s program, checking the launcher symbols.
fn check(source: &str) -> Result<(), TestCaseError> {
    let file = syn::parse_file(source).map_err(|e| TestCaseError::fail(format!("syn: {e}")))?;
    let programs = coda_dsl::lower_file(&file).map_err(|e| TestCaseError::fail(format!("does not lower: {e}")))?;
    for p in programs {
        let plan = coda_codegen::plan::plan(&p);
        if p.outputs.iter().any(|o| matches!(o.kind, coda_dsl::ir::OutputKind::Tile(_))) {
            proptest::prop_assert!(plan.element_d.is_some() && plan.d_tensor.is_some(), "a Tile output is D");
        }
        let cu = coda_codegen::emit(&p, "fuzz-crate", "0.1.0");
        let prefix = coda_dsl::symbol_prefix("fuzz-crate", "0.1.0", &p.name, &p.config);
        for launcher in ["_run(", "_workspace("] {
            let symbol = format!("extern \"C\" int {prefix}{launcher}");
            proptest::prop_assert!(cu.contains(&symbol), "no `{}` in the C++", symbol);
        }
    }
    Ok(())
}

#[test]
fn generated_programs_plan_and_emit() {
    let result = testgen::runner(2000, 0xc0da_0101).run(&testgen::programs(), |g| check(&g.source));
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// Each generated program in every config of the tuning set
/// (`lower_file_variants`, as a build with `ConfigSet::all` does): each
/// variant plans and emits, and a config is dropped only for shared memory,
/// for a program with group reductions a tile N its group size does not
/// divide, or for 8-bit operands any tile but theirs (`Config::all_for`
/// leaves those out of a build's `all` set).
#[test]
fn generated_programs_in_every_config() {
    let all = coda_dsl::ir::Config::all();
    let result = testgen::runner(200, 0xc0da_0102).run(&testgen::programs(), |g| {
        let file = syn::parse_file(&g.source).map_err(|e| TestCaseError::fail(format!("syn: {e}")))?;
        let variants = coda_dsl::lower_file_variants(&file, |_| all.clone())
            .map_err(|e| TestCaseError::fail(format!("does not lower: {e}")))?;
        for (programs, dropped) in variants {
            // The own config is one of the set, and comes first.
            proptest::prop_assert_eq!(programs.len() + dropped.len(), all.len());
            for (config, why) in &dropped {
                let group = programs[0].group_size().is_some_and(|g| config.tile_n % g != 0);
                let fp8 = programs[0].config.operands.is_fp8() && why.contains("8-bit operands take the cooperative schedule");
                let allowed = why.contains("too many TMA-staged tiles") || (group && why.contains("must divide the tile's")) || fp8;
                proptest::prop_assert!(allowed, "{} dropped: {}", config.name(), why);
            }
            for p in &programs {
                let cu = coda_codegen::emit(p, "fuzz-crate", "0.1.0");
                let prefix = coda_dsl::symbol_prefix("fuzz-crate", "0.1.0", &p.name, &p.config);
                let run = format!("{prefix}_run(");
                proptest::prop_assert!(cu.contains(&run), "no `{}`", run);
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

fn lower_error(source: &str) -> String {
    coda_dsl::lower_file(&syn::parse_file(source).expect("valid Rust")).expect_err("refused").to_string()
}

/// Found by `generated_programs_plan_and_emit`: `unpair` of a `pair` (a
/// double-width value that is not a `DoubleTile` input) lowered, and `emit`
/// panicked (`unpaired values are materialized`, emit.rs): the plan never
/// materializes a double-width `pair`, which is only a `DoubleTile` store.
/// The frontend now refuses it, as its messages always described.
#[test]
fn unpair_of_a_pair() {
    let source = "#[coda::epilogue]\nfn gen_0(acc: Acc) -> RowPartial<f32> {\n    let v0 = pair(acc, acc);\n    let (v1, v2) = unpair(v0);\n    let v3 = row_sum(v1 - v2);\n    v3\n}\n";
    let e = lower_error(source);
    assert!(e.contains("splits only a DoubleTile input"), "{e}");
    // Unpairing a DoubleTile input, also through an alias, is fine.
    check("#[coda::epilogue]\nfn gen_0(acc: Acc, d: DoubleTile<bf16>) -> Tile<bf16> {\n    let z = d;\n    let (e, o) = unpair(z);\n    let y = acc * e + o;\n    y\n}\n").unwrap();
}

/// Found by `generated_programs_plan_and_emit`: a `DoubleTile` input
/// returned (through a `let` alias) as a `DoubleTile` output lowered, and
/// `plan` hit `unreachable!("the frontend checks output values")`, since a
/// `DoubleTile` store takes a `pair`. The frontend now refuses it.
#[test]
fn double_tile_input_returned_as_output() {
    let source = "#[coda::epilogue]\nfn gen_0(acc: Acc, x1: DoubleTile<bf16>) -> (Tile<bf16>, DoubleTile<bf16>) {\n    let v0 = acc;\n    let v1 = x1;\n    (v0, v1)\n}\n";
    let e = lower_error(source);
    assert!(e.contains("`v1` is a DoubleTile input"), "{e}");
}
