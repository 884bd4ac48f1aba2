//! The compiled-object cache: where it lives, what its keys cover, and
//! writes that another build sharing the folder never sees half done.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use sha2::{Digest, Sha256};

/// `CODA_CACHE_DIR`, else `${XDG_CACHE_HOME:-$HOME/.cache}/coda-rs/kernels`.
/// Keys are content hashes, so every project and profile can share it.
pub fn default_dir(var: impl Fn(&str) -> Option<OsString>) -> Result<PathBuf, String> {
    match var("CODA_CACHE_DIR").filter(|v| !v.is_empty()) {
        Some(d) => Ok(PathBuf::from(d)),
        None => Ok(crate::toolchain::user_cache_dir(&var)?.join("coda-rs/kernels")),
    }
}

/// Hash of every file under `dir` (relative paths and contents), walked in sorted order.
pub fn tree_hash(dir: &Path) -> Result<String, String> {
    fn walk(root: &Path, dir: &Path, h: &mut Sha256) -> Result<(), String> {
        let err = |e: std::io::Error| format!("coda: cannot read {}: {e}", dir.display());
        let mut entries = std::fs::read_dir(dir)
            .map_err(err)?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(err)?;
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(root, &path, h)?;
            } else {
                let rel = path.strip_prefix(root).unwrap_or(&path);
                h.update(rel.to_string_lossy().as_bytes());
                h.update([0]);
                h.update(std::fs::read(&path).map_err(|e| format!("coda: cannot read {}: {e}", path.display()))?);
                h.update([0]);
            }
        }
        Ok(())
    }
    let mut h = Sha256::new();
    walk(dir, dir, &mut h)?;
    Ok(format!("{:x}", h.finalize()))
}

/// Hash of what every object depends on besides its source: the compiler
/// `command` (program and arguments, so also the flags cc takes from
/// CXXFLAGS and the like) with each of the `trees` (include folders) replaced
/// by the hash of its contents, so that the key does not depend on where the
/// headers are; and what `nvcc --version` prints, which names the compiler,
/// so the program counts by its file name: the toolchain's folder is under
/// the user's home by default, and a key that changed with it would retire
/// the shipped tuning caches, which name kernels by key, for every user but
/// the one who searched them.
///
/// `env`: the variables nvcc and the host compiler read besides their
/// arguments ([`COMPILER_ENV`]), those set (`NVCC_APPEND_FLAGS=-lineinfo` changes
/// the object as a flag would); with none set the key is as without them.
pub fn fingerprint(command: &[OsString], trees: &[PathBuf], nvcc_version: &str, env: &[(String, String)]) -> Result<String, String> {
    let hashes = trees
        .iter()
        .map(|t| Ok((t.to_string_lossy().into_owned(), tree_hash(t)?)))
        .collect::<Result<Vec<_>, String>>()?;
    let mut h = Sha256::new();
    let program = command.first().map(|p| Path::new(p).file_name().unwrap_or(p.as_os_str()).to_os_string());
    for arg in program.iter().chain(command.iter().skip(1)) {
        let mut arg = arg.to_string_lossy().into_owned();
        for (path, hash) in &hashes {
            arg = arg.replace(path.as_str(), &format!("<tree {hash}>"));
        }
        h.update(arg.as_bytes());
        h.update([0]);
    }
    h.update(nvcc_version.as_bytes());
    for (name, value) in env {
        h.update([0]);
        h.update(format!("{name}={value}").as_bytes());
    }
    Ok(format!("{:x}", h.finalize()))
}

/// The host compiler nvcc runs for a `command`: its `-ccbin`, else
/// `NVCC_CCBIN` (as `var` reads it), else nvcc's default, `gcc`.
pub fn host_compiler_program(command: &[OsString], var: impl Fn(&str) -> Option<OsString>) -> OsString {
    let ccbin = command.iter().find_map(|a| a.to_str().and_then(|a| a.strip_prefix("-ccbin=")).map(OsString::from));
    ccbin.or_else(|| var("NVCC_CCBIN").filter(|v| !v.is_empty())).unwrap_or_else(|| "gcc".into())
}

/// What names a host compiler `program` ([`host_compiler_program`]): its name and
/// what it prints for `--version` (in the C locale, so that a terminal and
/// an IDE with other languages agree), or why that could not be run. The
/// objects' host code is that compiler's, so a compiler upgraded in place
/// must not take objects its predecessor built. Their device code is nvcc's
/// alone, so the kernels' keys, which tuning caches record, leave it out:
/// it reaches only the objects' names ([`object_fingerprint`]).
pub fn host_compiler(program: &OsString) -> String {
    let run = std::process::Command::new(program).arg("--version").env("LC_ALL", "C").env("LANG", "C").output();
    let version = match run {
        Ok(out) if out.status.success() => format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
        Ok(out) => format!("--version exited with {}: {}", out.status, String::from_utf8_lossy(&out.stderr)),
        Err(e) => format!("--version could not run: {e}"),
    };
    format!("{}\n{version}", program.to_string_lossy())
}

/// Where `program` is: itself if it names a path, else the first match on
/// `PATH` (as `var` reads it), symbolic links resolved, so that a rebuild
/// rule on it sees the compiler behind `/usr/bin/c++` replaced.
pub fn resolve_program(program: &OsString, var: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let path = Path::new(program);
    let found = if path.components().count() > 1 {
        Some(path.to_path_buf())
    } else {
        std::env::split_paths(&var("PATH")?).map(|d| d.join(path)).find(|p| p.is_file())
    };
    found.and_then(|p| std::fs::canonicalize(p).ok())
}

/// The fingerprint of the compiled objects: the kernels' [`fingerprint`]
/// and the [`host_compiler`].
pub fn object_fingerprint(fingerprint: &str, host_compiler: &str) -> String {
    format!("{:x}", Sha256::new().chain_update(fingerprint).chain_update([0]).chain_update(host_compiler).finalize())
}

/// Variables that change what nvcc or its host compiler produce without
/// appearing in the command line.
pub const COMPILER_ENV: [&str; 8] =
    ["NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS", "NVCC_CCBIN", "CPATH", "CPLUS_INCLUDE_PATH", "C_INCLUDE_PATH", "GCC_EXEC_PREFIX", "COMPILER_PATH"];

/// The [`COMPILER_ENV`] variables set to something, as `var` reads them.
pub fn compiler_env(var: impl Fn(&str) -> Option<OsString>) -> Vec<(String, String)> {
    COMPILER_ENV
        .iter()
        .filter_map(|name| var(name).filter(|v| !v.is_empty()).map(|v| (name.to_string(), v.to_string_lossy().into_owned())))
        .collect()
}

/// Creates `dir` if needed and checks that a file can be written in it.
pub fn writable_dir(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let probe = temp_path(&dir.join("write-probe"));
    let written = std::fs::write(&probe, b"").map_err(|e| e.to_string());
    let _ = std::fs::remove_file(&probe);
    written
}

/// The cache key of one generated source under a [`fingerprint`].
pub fn key(fingerprint: &str, source: &str) -> String {
    format!("{:x}", Sha256::new().chain_update(fingerprint).chain_update([0]).chain_update(source).finalize())
}

/// A name beside `path` that no other writer uses: this process's id and a
/// process-wide counter (threads of one build write side by side).
pub fn temp_path(path: &Path) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp{}-{n}", std::process::id()));
    path.with_file_name(name)
}

/// Writes `path` through a [`temp_path`] and a rename, so readers see the
/// old contents or the new, never part.
pub fn write_atomic(path: &Path, contents: impl AsRef<[u8]>) -> Result<(), String> {
    let tmp = temp_path(path);
    let done = std::fs::write(&tmp, contents).and_then(|()| std::fs::rename(&tmp, path));
    done.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("coda: cannot write {}: {e}", path.display())
    })
}
