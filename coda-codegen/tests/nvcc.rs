//! nvcc-compiles every generated kernel for sm_90a on the CPU (no GPU needed),
//! through the same build helper that `build.rs` files use, and checks that a
//! second build reuses every object (nvcc runs zero times).
//!
//! Objects are cached by content hash (`.toolchain/coda-cache`), so after
//! `cargo build` of the workspace (which compiles the same programs) this
//! test finds them all cached; from a cold cache it compiles them (~1 min each).

use std::path::{Path, PathBuf};

fn build(files: &[&str], package: &str, out: &Path) -> coda_codegen::Report {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    coda_codegen::epilogues(files.iter().map(|f| manifest.join(f)))
        .manifest_dir(manifest)
        .out_dir(out)
        .package(package)
        .cargo_metadata(false)
        .try_compile("nvcc_test")
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_generated_kernel_compiles_and_rebuilds_from_cache() {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("nvcc-test");
    let files = [
        ("../examples/llama-norm/src/programs.rs", "llama-norm"),
        ("../tests/src/programs.rs", "coda-tests"),
        ("../coda-runtime/src/llama/programs.rs", "coda-runtime"),
    ];
    for (file, package) in files {
        let out = tmp.join(package);
        let first = build(&[file], package, &out);
        assert!(!first.kernels.is_empty());
        for (name, cu, obj, _) in &first.kernels {
            assert!(obj.metadata().unwrap().len() > 100_000, "{name}: {} is not a compiled kernel", obj.display());
            let src = std::fs::read_to_string(cu).unwrap();
            assert!(src.contains(&format!("coda_{}_{name}_run", package.replace('-', "_"))));
        }
        assert!(out.join("libnvcc_test.a").is_file());
        let second = build(&[file], package, &out);
        assert_eq!(second.nvcc_runs(), 0, "a rebuild must reuse every cached object");
        assert_eq!(second.kernels.len(), first.kernels.len());
    }
}

#[test]
fn user_errors_fail_the_build_with_file_line_and_caret() {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("nvcc-test-bad");
    std::fs::create_dir_all(&tmp).unwrap();
    let bad = tmp.join("bad.rs");
    std::fs::write(&bad, "#[coda::epilogue]\nfn p(acc: Acc) -> Tile<bf16> {\n    let y = gelu(acc);\n    y\n}\n").unwrap();
    let err = coda_codegen::epilogues([&bad])
        .manifest_dir(&tmp)
        .out_dir(&tmp)
        .package("bad")
        .cargo_metadata(false)
        .try_compile("bad")
        .unwrap_err();
    assert!(err.contains("error: unknown function `gelu`"), "{err}");
    assert!(err.contains("bad.rs:3:13"), "{err}");
    assert!(err.contains("    let y = gelu(acc);\n   |             ^^^^"), "{err}");
}

#[test]
fn a_missing_toolchain_says_how_to_install_it() {
    let empty = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("no-cuda");
    std::fs::create_dir_all(&empty).unwrap();
    let env = |k: &str| (k == "CODA_CUDA_HOME").then(|| empty.clone().into_os_string());
    let err = coda_codegen::Toolchain::find_with(&empty, env).unwrap_err();
    assert!(err.contains("CODA_CUDA_HOME") && err.contains("bash scripts/install-toolchain.sh"), "{err}");
    let err = coda_codegen::Toolchain::find_with(Path::new("/"), |_| None).unwrap_err();
    assert!(err.contains("no CUDA toolchain found") && err.contains("bash scripts/install-toolchain.sh"), "{err}");
}
