//! `coda bench` refuses arguments it cannot serve before it looks for a GPU.

use std::process::Command;

/// `coda bench ARGS`: its failure message (the command must fail).
fn refused(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_coda")).arg("bench").args(args).output().unwrap();
    assert!(!out.status.success(), "{args:?} was not refused");
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn program_filters_pick_from_a_suite() {
    assert!(refused(&["--program", "geglu"]).contains("use it with --part untuned or --part heldout"));
    assert!(refused(&["--part", "llama", "--program", "geglu"]).contains("use it with --part untuned or --part heldout"));
    assert!(refused(&["--part", "untuned", "--program", "no_such_program"]).contains("--program `no_such_program`: no program's name"));
}

#[cfg(not(feature = "heldout"))]
#[test]
fn the_heldout_suite_needs_its_feature() {
    let msg = refused(&["--part", "heldout"]);
    assert!(msg.contains("built without the held-out suite") && msg.contains("--features heldout"), "{msg}");
}
