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
        insta::assert_snapshot!(p.name.clone(), coda_codegen::emit(&p, "llama-norm"));
    }
}

#[test]
fn test_variant_programs() {
    for p in programs("../tests/src/programs.rs") {
        insta::assert_snapshot!(p.name.clone(), coda_codegen::emit(&p, "coda-tests"));
    }
}

#[test]
fn llama_programs() {
    for p in programs("../coda-runtime/src/llama/programs.rs") {
        insta::assert_snapshot!(format!("llama__{}", p.name), coda_codegen::emit(&p, "coda-runtime"));
    }
}
