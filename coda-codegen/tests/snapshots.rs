//! The generated C++ of every example and test program, snapshot-tested:
//! a change to codegen shows up as a reviewable diff.

use std::path::Path;

fn programs(rel: &str) -> Vec<coda_dsl::Program> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    let src = std::fs::read_to_string(&path).unwrap();
    coda_dsl::lower_file(&syn::parse_file(&src).unwrap()).unwrap()
}

#[test]
fn example_programs() {
    for p in programs("../examples/llama-norm/src/programs.rs") {
        insta::assert_snapshot!(p.name.clone(), coda_codegen::emit(&p, "llama-norm", "0.1.0"));
    }
}

#[test]
fn test_variant_programs() {
    for p in programs("../tests/src/programs.rs") {
        insta::assert_snapshot!(p.name.clone(), coda_codegen::emit(&p, "coda-tests", "0.1.0"));
    }
}

#[test]
fn llama_programs() {
    for p in programs("../coda-llama/src/programs.rs") {
        insta::assert_snapshot!(format!("llama__{}", p.name), coda_codegen::emit(&p, "coda-llama", "0.1.0"));
    }
}

/// The table of compiled configs the macro's module includes, for the o_proj
/// program with a set of three configs, one its own (the own config first;
/// `pp_128x256_c1x1` is not a config, `Config::from_name` refuses it).
#[test]
fn config_table() {
    use coda_dsl::ir::Config;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../coda-llama/src/programs.rs");
    let file = syn::parse_file(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let set = ["coop_128x256_c1x1", "pp_128x128_c1x2", "coop_256x128_c1x2", "pp_128x256_c1x1"];
    let extra = |_: &coda_dsl::Program| set.iter().filter_map(|n| Config::from_name(n).ok()).collect();
    let all = coda_dsl::lower_file_variants(&file, extra).unwrap();
    let (variants, dropped) = all.iter().find(|(v, _)| v[0].name == "linear_residual_rms_partial").unwrap();
    let names: Vec<String> = variants.iter().map(|v| v.config.name()).collect();
    // The own config (ping-pong 128×128 c1×2) is listed once, first.
    assert_eq!(names, ["pp_128x128_c1x2", "coop_128x256_c1x1", "coop_256x128_c1x2"]);
    assert!(dropped.is_empty(), "{dropped:?}");
    let keys: Vec<String> = (0..variants.len()).map(|i| format!("c0da{i}{}", "0".repeat(59))).collect();
    let ptxas = "168 registers, 0 bytes stack, 0 bytes spill stores, 0 bytes spill loads, 0 bytes smem";
    let compiled: Vec<_> =
        variants.iter().zip(&keys).map(|(program, key)| coda_codegen::registry::Compiled { program, key, ptxas }).collect();
    let table = coda_codegen::registry::variants_table(&compiled, dropped, "coda-llama", "0.1.0", "nvcc V13.0.88, CUTLASS 4.2.0");
    insta::assert_snapshot!("config_table", table);
}
