//! `coda emit` picks programs by name as `inspect` and `tune` do (README,
//! "The `coda` command"); it needs no GPU.

use std::process::{Command, Output};

const PROGRAMS: &str = r#"
#[coda::epilogue]
/// Two programs whose names share a prefix.
pub fn gate(acc: Acc, g: PerCol<bf16>) -> Tile<bf16> {
    let y = acc * g;
    y
}

#[coda::epilogue]
pub fn gate_bias(acc: Acc, bias: PerCol<bf16>) -> Tile<bf16> {
    let y = acc + bias;
    y
}
"#;

fn emit(args: &[&str]) -> Output {
    let file = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("emit_programs.rs");
    std::fs::write(&file, PROGRAMS).unwrap();
    Command::new(env!("CARGO_BIN_EXE_coda")).arg("emit").arg(&file).args(args).output().unwrap()
}

/// The programs whose C++ one `coda emit` printed, by their namespaces
/// (`coda_gen::coda_<package>_<version>_<program>__<config>`).
fn emitted(args: &[&str]) -> Vec<&'static str> {
    let out = emit(args);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    let cpp = String::from_utf8(out.stdout).unwrap();
    ["gate", "gate_bias"].into_iter().filter(|p| cpp.contains(&format!("_{p}__"))).collect()
}

#[test]
fn emit_picks_programs_by_name_with_or_without_the_package() {
    assert_eq!(emitted(&[]), ["gate", "gate_bias"]);
    assert_eq!(emitted(&["--program", "gate"]), ["gate"]);
    assert_eq!(emitted(&["--program", "user::gate"]), ["gate"]);
    assert_eq!(emitted(&["--program", "bias"]), ["gate_bias"]);
    assert_eq!(emitted(&["--package", "mine", "--program", "mine::gate_bias"]), ["gate_bias"]);
    let out = emit(&["--program", "mine::gate"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--program `mine::gate`: no program's name is or contains it"), "{err}");
}

/// `emit` lowers a file as a build does: a program name used twice is an
/// error there as well.
#[test]
fn emit_refuses_a_program_name_used_twice() {
    let file = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("emit_twice.rs");
    std::fs::write(&file, format!("{PROGRAMS}\n#[coda::epilogue]\npub fn gate(acc: Acc) -> Tile<bf16> {{ let y = acc; y }}\n")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_coda")).arg("emit").arg(&file).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("epilogue program `gate` is defined twice"), "{err}");
}
