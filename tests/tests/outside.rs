//! The README's "Using it from your crate", done as a user outside the
//! repository would: package the library crates, unpack them in a temporary
//! directory, copy `examples/standalone` (one program) beside them with its
//! two path dependencies pointing at the unpacked packages, and build it
//! there from a cold target directory. Nothing of the checkout is visible to
//! that build but the packages, so headers, toolchain discovery and the build
//! helper must all work from them. Prints the cold build's time and kernels.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use coda_tests::tools::run;

const LIBRARY: [&str; 5] = ["coda-dsl", "coda-macros", "coda-cutlass-templates", "coda-codegen", "coda-runtime"];

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

#[test]
fn a_crate_outside_the_workspace_builds_against_the_packaged_crates() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("outside");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();

    let mut package = Command::new(&cargo);
    package.current_dir(&root).args(["package", "--no-verify", "--allow-dirty", "--offline", "--target-dir"]).arg(tmp.join("pkg"));
    for p in LIBRARY {
        package.args(["-p", p]);
    }
    run(&mut package);
    let crates = tmp.join("crates");
    std::fs::create_dir_all(&crates).unwrap();
    for p in LIBRARY {
        let file = tmp.join(format!("pkg/package/{p}-{}.crate", env!("CARGO_PKG_VERSION")));
        run(Command::new("tar").arg("xzf").arg(&file).arg("-C").arg(&crates));
    }

    let app = tmp.join("app");
    copy_dir(&root.join("examples/standalone"), &app);
    let manifest = std::fs::read_to_string(app.join("Cargo.toml")).unwrap();
    let version = env!("CARGO_PKG_VERSION");
    let manifest = manifest
        .replace("../../coda-runtime", &format!("{}/coda-runtime-{version}", crates.display()))
        .replace("../../coda-codegen", &format!("{}/coda-codegen-{version}", crates.display()));
    assert!(manifest.matches(crates.to_str().unwrap()).count() == 2, "both path dependencies rewritten:\n{manifest}");
    // Packaged crates name each other by version; resolve those to the
    // unpacked packages, as a registry would serve them.
    let patch: String = LIBRARY.iter().map(|p| format!("{p} = {{ path = \"{}/{p}-{version}\" }}\n", crates.display())).collect();
    std::fs::write(app.join("Cargo.toml"), format!("{manifest}\n[patch.crates-io]\n{patch}")).unwrap();

    let started = Instant::now();
    let log = run(Command::new(&cargo)
        .current_dir(&app)
        .args(["build", "--release", "--offline", "-vv"])
        .env("CARGO_TARGET_DIR", tmp.join("target"))
        .env_remove("CARGO_MANIFEST_DIR"));
    let secs = started.elapsed().as_secs_f64();
    let summary = log.lines().filter(|l| l.contains("coda:") && l.contains("kernels")).collect::<Vec<_>>().join("\n");
    println!("outside crate, cold build: {secs:.0} s on {} cores\n{summary}", std::thread::available_parallelism().map_or(1, |n| n.get()));
    let out = run(&mut Command::new(tmp.join("target/release/coda-standalone")));
    assert!(out.contains("built; not run") || out.contains("max relative error"), "{out}");
}
