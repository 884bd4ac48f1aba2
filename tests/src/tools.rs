//! External commands the integration tests drive (cargo, pip, maturin).

use std::process::Command;

/// Runs `cmd` to completion; its stdout and stderr together. Panics (these
/// are tests) with the command and its output when it cannot start or fails.
pub fn run(cmd: &mut Command) -> String {
    let shown = format!("{cmd:?}");
    let out = cmd.output().unwrap_or_else(|e| panic!("{shown}: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{shown} failed:\n{text}");
    text
}
