//! nvcc-compiles every generated kernel for sm_90a on the CPU (no GPU needed),
//! through the same build helper that `build.rs` files use, and checks that a
//! second build reuses every object (nvcc runs zero times). The user-error
//! tests here stop before the toolchain is looked up.
//!
//! Objects are cached by content hash (`CODA_CACHE_DIR` or
//! `~/.cache/coda-rs/kernels`), so after `cargo build` of the workspace
//! (which compiles the same programs) this test finds them all cached; from
//! a cold cache it compiles them (~1 min each).

use std::path::{Path, PathBuf};

fn build(files: &[&str], package: &str, out: &Path) -> coda_codegen::Report {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    coda_codegen::epilogues(files.iter().map(|f| manifest.join(f)))
        .manifest_dir(manifest)
        .out_dir(out)
        .package(package)
        .version("0.1.0")
        .cargo_metadata(false)
        .try_compile("nvcc_test")
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_generated_kernel_compiles_and_rebuilds_from_cache() {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("nvcc-test");
    // The builds of these crates use the default config sets, as here, so
    // their objects are these (coda-llama's build picks its configs from its
    // shipped tuning file: its own build is the check of its kernels).
    let files = [("../examples/llama-norm/src/programs.rs", "llama-norm"), ("../tests/src/programs.rs", "coda-tests")];
    for (file, package) in files {
        let out = tmp.join(package);
        let first = build(&[file], package, &out);
        assert!(!first.kernels.is_empty());
        for k in &first.kernels {
            assert!(
                k.object.metadata().unwrap().len() > 100_000,
                "{}: {} is not a compiled kernel",
                k.name,
                k.object.display()
            );
            let src = std::fs::read_to_string(&k.cu).unwrap();
            assert!(src.contains(&format!("coda_{}_0_1_0_{}_run", package.replace('-', "_"), k.name)));
            assert!(
                k.ptxas.contains(" registers, ") && k.ptxas.contains(" bytes spill stores"),
                "{}: {}",
                k.name,
                k.ptxas
            );
            let program = k.name.split("__").next().unwrap();
            let table = std::fs::read_to_string(out.join(format!("coda-gen/{program}.rs"))).unwrap();
            assert!(table.contains(&format!("{:?}", k.ptxas)), "{table}");
        }
        assert_eq!(first.nvcc_runs() + first.cache_hits(), first.kernels.len());
        // A program's configs are one translation unit, and ptxas's report is split among them.
        let two = first.kernels.iter().filter(|k| k.name.starts_with("dswiglu__")).collect::<Vec<_>>();
        if package == "coda-tests" {
            assert_eq!(two.len(), 2, "dswiglu is built in two configs");
            assert_eq!((&two[0].cu, &two[0].object), (&two[1].cu, &two[1].object));
            assert!(two[0].cu.ends_with("coda-gen/dswiglu.cu"), "{}", two[0].cu.display());
            // Each config's own entry function, not both.
            assert!(two.iter().all(|k| !k.ptxas.contains("; ")), "{} / {}", two[0].ptxas, two[1].ptxas);
        }
        assert!(out.join("libnvcc_test.a").is_file());
        let second = build(&[file], package, &out);
        assert_eq!(second.nvcc_runs(), 0, "a rebuild must reuse every cached object");
        assert_eq!(second.cache_hits(), first.kernels.len());
        // Cache hits have the summary nvcc's run gave.
        let ptxas = |r: &coda_codegen::Report| r.kernels.iter().map(|k| k.ptxas.clone()).collect::<Vec<_>>();
        assert_eq!(ptxas(&second), ptxas(&first));
    }
}

/// The helper's result for a file of these contents.
fn try_file(test: &str, src: &str) -> String {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(test);
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::write(tmp.join("bad.rs"), src).unwrap();
    coda_codegen::epilogues(["bad.rs"])
        .manifest_dir(&tmp)
        .out_dir(&tmp)
        .package("bad")
        .version("0.1.0")
        .cargo_metadata(false)
        .try_compile("bad")
        .unwrap_err()
}

#[test]
fn user_errors_fail_the_build_with_file_line_and_caret() {
    let err = try_file(
        "nvcc-test-bad",
        "#[coda::epilogue]\nfn p(acc: Acc) -> Tile<bf16> {\n    let y = mish(acc);\n    y\n}\n",
    );
    assert!(err.contains("error: unknown function `mish`"), "{err}");
    assert!(err.contains("bad.rs:3:13"), "{err}");
    assert!(err.contains("    let y = mish(acc);\n   |             ^^^^"), "{err}");
}

/// Every program is lowered, so one build reports all their errors.
#[test]
fn every_error_of_a_file_is_reported_at_once() {
    let err = try_file(
        "nvcc-test-two-errors",
        "#[coda::epilogue]\nfn p(acc: Acc) -> Tile<bf16> {\n    let y = mish(acc);\n    y\n}\n\n\
         #[coda::epilogue]\nfn q(acc: Acc) -> Tile<bf16> {\n    let y = acc + zz;\n    y\n}\n",
    );
    assert_eq!(err.matches("error: ").count(), 2, "{err}");
    assert!(err.contains("unknown function `mish`") && err.contains("bad.rs:3:13"), "{err}");
    assert!(err.contains("unknown name `zz`") && err.contains("bad.rs:9:19"), "{err}");
}

/// Option errors point at the attribute's arguments, not at 1:1.
#[test]
fn an_option_error_is_reported_at_the_attribute() {
    let err = try_file(
        "nvcc-test-option",
        "// kernels\n\n#[coda::epilogue(tile = (256, 128), schedule = pingpong)]\nfn p(acc: Acc) -> Tile<bf16> {\n    let y = acc;\n    y\n}\n",
    );
    assert!(err.contains("pingpong schedule needs tile_m = 128"), "{err}");
    assert!(err.contains("bad.rs:3:18"), "{err}");
}

/// An option that is not `name = value` is reported at the attribute's
/// arguments too (syn places it at the call site: 1:1 of the file).
#[test]
fn an_option_syntax_error_is_reported_at_the_attribute() {
    let err = try_file("nvcc-test-option-syntax", "// kernels\n\n#[coda::epilogue(cooperative)]\nfn p(acc: Acc) -> Tile<bf16> {\n    let y = acc;\n    y\n}\n");
    assert!(err.contains("`name = value` pairs") && err.contains("bad.rs:3:18"), "{err}");
}

/// A line indented by a tab is shown with four spaces, the caret under the span.
#[test]
fn a_tab_keeps_the_caret_under_the_span() {
    let err = try_file("nvcc-test-tab", "#[coda::epilogue]\nfn p(acc: Acc) -> Tile<bf16> {\n\tlet y = mish(acc);\n\ty\n}\n");
    assert!(err.contains("bad.rs:3:10"), "{err}");
    assert!(err.contains("    let y = mish(acc);\n   |             ^^^^"), "{err}");
}

/// A file that does not lex (an unbalanced bracket) says so, rather than
/// proc-macro2's "cannot parse string into token stream".
#[test]
fn a_file_that_does_not_lex_says_so() {
    let err = try_file("nvcc-test-lex", "#[coda::epilogue]\nfn p(acc: Acc) -> Tile<bf16> {\n    let y = exp((acc);\n    y\n}\n");
    assert!(err.contains("this file is not Rust tokens: an unbalanced bracket"), "{err}");
}

/// Program names name launcher symbols and tables: two modules (whatever
/// their `#[cfg]`) cannot both define `p`.
#[test]
fn a_program_name_used_twice_is_an_error_at_the_second() {
    let err = try_file(
        "nvcc-test-duplicate",
        "#[cfg(feature = \"x\")]\nmod a {\n    #[coda::epilogue]\n    fn p(acc: Acc) -> Tile<bf16> { let y = acc; y }\n}\n\
         #[cfg(not(feature = \"x\"))]\nmod b {\n    #[coda::epilogue]\n    fn p(acc: Acc) -> Tile<bf16> { let y = acc; y }\n}\n",
    );
    assert_eq!(err.matches("error: ").count(), 1, "{err}");
    assert!(err.contains("epilogue program `p` is defined twice (first at "), "{err}");
    assert!(err.contains("bad.rs:4)"), "{err}");
    assert!(err.contains("bad.rs:9:8"), "{err}");
}

/// Per-program configs must name a program of the files: a renamed program
/// would otherwise quietly lose them.
#[test]
fn program_configs_of_an_unknown_program_are_an_error() {
    let err = one_program("nvcc-test-unknown-program").program_configs("q", coda_codegen::ConfigSet::All).try_compile("p").unwrap_err();
    assert!(err.contains("program_configs names `q`, which no listed file defines"), "{err}");
}

/// The build of a file holding one program `p`, in `test`'s folder.
fn one_program(test: &str) -> coda_codegen::Build {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(test);
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::write(tmp.join("p.rs"), "#[coda::epilogue]\nfn p(acc: Acc) -> Tile<bf16> {\n    let y = acc;\n    y\n}\n").unwrap();
    let mut b = coda_codegen::epilogues(["p.rs"]);
    b.manifest_dir(&tmp).out_dir(&tmp).package("p").version("0.1.0").cargo_metadata(false);
    b
}

/// A file listed twice (under two spellings of its path) is read once: its
/// programs are not "defined twice", and each error is reported once.
#[test]
fn a_file_listed_twice_is_read_once() {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("nvcc-test-listed-twice");
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::write(tmp.join("bad.rs"), "#[coda::epilogue]\nfn p(acc: Acc) -> Tile<bf16> {\n    let y = mish(acc);\n    y\n}\n").unwrap();
    let err = coda_codegen::epilogues(["bad.rs", "./bad.rs"])
        .manifest_dir(&tmp)
        .out_dir(&tmp)
        .package("bad")
        .version("0.1.0")
        .cargo_metadata(false)
        .try_compile("bad")
        .unwrap_err();
    assert!(!err.contains("defined twice"), "{err}");
    assert_eq!(err.matches("unknown function `mish`").count(), 1, "{err}");
}

/// `config_programs` must name programs of the files, as `program_configs` must.
#[test]
fn config_programs_of_an_unknown_program_are_an_error() {
    let err = one_program("nvcc-test-unknown-config-program").config_programs(["q"]).try_compile("p").unwrap_err();
    assert!(err.contains("config_programs names `q`, which no listed file defines"), "{err}");
}
