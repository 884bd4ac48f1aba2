// Compiles the Llama block's epilogue programs, written in CODA's DSL.
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn main() {
    // `tuning/` holds one file of timed searches per GPU, named for the GPU
    // (`NVIDIA H200` → `nvidia-h200.json`). Beside each program's own config,
    // the build compiles the configs those searches picked for it at some
    // shape on any GPU, so that every shipped choice is compiled and nothing
    // else is; `shipped_tuning.rs` lists the files for `SHIPPED_TUNING`.
    let dir = Path::new("tuning");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|f| f.unwrap_or_else(|e| panic!("{}: {e}", dir.display())).path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut picked: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in &files {
        let path = path.display();
        let text = std::fs::read_to_string(path.to_string()).unwrap_or_else(|e| panic!("{path}: {e}"));
        let entries: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
        for e in &entries {
            let field = |k: &str| e[k].as_str().unwrap_or_else(|| panic!("{path}: an entry without `{k}`")).to_string();
            let gpu = field("gpu");
            // The runtime matches entries by the GPU's name, so a file named
            // for another GPU would ship searches where they were not run.
            let named = format!("tuning/{}.json", file_stem(&gpu));
            assert!(path.to_string() == named, "{path}: an entry of `{gpu}`, whose searches belong in {named}");
            let program = field("program");
            let name = program.strip_prefix("coda-llama::").unwrap_or_else(|| panic!("{path}: `{program}` is not this crate's"));
            picked.entry(name.to_string()).or_default().insert(field("config"));
        }
    }
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let list: String = files.iter().map(|p| format!("    include_str!({:?}),\n", Path::new(&manifest).join(p).display().to_string())).collect();
    let out = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("shipped_tuning.rs");
    std::fs::write(&out, format!("&[\n{list}]\n")).unwrap_or_else(|e| panic!("{}: {e}", out.display()));

    let mut build = coda_codegen::epilogues(["src/programs.rs"]);
    for (program, configs) in &picked {
        let names = configs.iter().cloned().collect::<Vec<_>>().join(",");
        build.program_configs(program, coda_codegen::ConfigSet::parse(&names).unwrap_or_else(|e| panic!("tuning/: {e}")));
    }
    // A program no shipped search covers (yet) gets its own config alone:
    // this crate's build is already the heaviest users pay for.
    build.configs(coda_codegen::ConfigSet::Own);
    build.compile("coda_llama_kernels");
}

/// A GPU's name as a file name: lower case, each run of other characters than
/// ASCII letters and digits one `-` (`NVIDIA H100 80GB HBM3` → `nvidia-h100-80gb-hbm3`).
fn file_stem(gpu: &str) -> String {
    let lower = gpu.to_ascii_lowercase();
    lower.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).collect::<Vec<_>>().join("-")
}
