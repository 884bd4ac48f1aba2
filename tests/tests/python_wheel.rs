//! The Python package as CI can check it without a GPU: build the abi3
//! wheel with maturin (pinned in `coda-python/test-requirements.txt`, into a
//! scratch directory; optimised, as users build it and as the GPU machine
//! runs it: maturin's default is cargo's dev profile, whose host code ran the
//! layout converters ~13× slower; in a target directory of its own: a
//! build in the test build's own would replace crates that its later doc
//! tests link against; kernels come from the shared object cache), install
//! it there, and run its CPU tests
//! (`coda-python/tests/test_cpu.py`: import, an optimised build, interfaces,
//! refusals by argument name). `test_gpu.py` runs on the GPU machine (README).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use coda_tests::tools::run;

#[test]
fn the_wheel_builds_installs_and_passes_its_cpu_tests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("python-wheel");
    let (tools, site, dist) = (tmp.join("tools"), tmp.join("site"), tmp.join("dist"));
    for d in [&site, &dist] {
        let _ = std::fs::remove_dir_all(d);
    }
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let pip = |target: &Path| {
        let mut c = Command::new(&python);
        c.args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--upgrade", "--target"]).arg(target);
        c
    };
    run(pip(&tools).arg("-r").arg(root.join("coda-python/test-requirements.txt")));

    let started = Instant::now();
    run(Command::new(tools.join("bin/maturin"))
        .current_dir(root.join("coda-python"))
        .args(["build", "--release", "--interpreter"])
        .arg(&python)
        .arg("--out")
        .arg(&dist)
        .env("CARGO_TARGET_DIR", tmp.join("target")));
    let wheel = std::fs::read_dir(&dist).unwrap().map(|e| e.unwrap().path()).find(|p| p.extension().is_some_and(|e| e == "whl"));
    let wheel = wheel.expect("maturin wrote a wheel");
    let name = wheel.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.contains("abi3"), "an abi3 wheel (any CPython ≥ 3.9): {name}");
    println!("wheel {name}: built in {:.0} s", started.elapsed().as_secs_f64());

    run(pip(&site).arg("--no-deps").arg(&wheel));
    let tests = run(Command::new(&python)
        .current_dir(root.join("coda-python/tests"))
        .args(["-m", "unittest", "-v", "test_cpu", "test_gpu"])
        .env("PYTHONPATH", format!("{}:{}", site.display(), tools.display())));
    println!("{tests}");
}
