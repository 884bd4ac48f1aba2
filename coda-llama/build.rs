// Compiles the Llama block's epilogue programs, written in CODA's DSL.
use std::collections::{BTreeMap, BTreeSet};

fn main() {
    // Beside each program's own config, the configs the shipped H200
    // searches (`tuning/nvidia-h200.json`) picked for it at some shape, so
    // that every shipped choice is compiled and nothing else is.
    let path = "tuning/nvidia-h200.json";
    println!("cargo:rerun-if-changed={path}");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let entries: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut picked: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in &entries {
        let field = |k: &str| e[k].as_str().unwrap_or_else(|| panic!("{path}: an entry without `{k}`")).to_string();
        let program = field("program");
        let name = program.strip_prefix("coda-llama::").unwrap_or_else(|| panic!("{path}: `{program}` is not this crate's"));
        picked.entry(name.to_string()).or_default().insert(field("config"));
    }
    let mut build = coda_codegen::epilogues(["src/programs.rs"]);
    for (program, configs) in &picked {
        let names = configs.iter().cloned().collect::<Vec<_>>().join(",");
        build.program_configs(program, coda_codegen::ConfigSet::parse(&names).unwrap_or_else(|e| panic!("{path}: {e}")));
    }
    // A program no shipped search covers (yet) gets its own config alone:
    // this crate's build is already the heaviest users pay for.
    build.configs(coda_codegen::ConfigSet::Own);
    build.compile("coda_llama_kernels");
}
