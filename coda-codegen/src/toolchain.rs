//! Finding the CUDA compiler and CUTLASS headers. No system CUDA is assumed.
//!
//! The toolkit (a folder with `bin/nvcc` and `lib/libcudart_static.a`, CUDA
//! 13), first match wins:
//! 1. the `CODA_CUDA_HOME` environment variable;
//! 2. [`Build::cuda_home`](crate::Build::cuda_home);
//! 3. `CUDA_HOME`;
//! 4. `nvidia/cu13` in the per-user install location ([`install_dir`]),
//!    where [`install`] and `scripts/install-toolchain.sh` put the pinned wheels.
//!
//! CUTLASS (a folder with `include/cutlass` and `tools/util/include`):
//! `CODA_CUTLASS_HOME`, else [`Build::cutlass_home`](crate::Build::cutlass_home),
//! else `cutlass_library/source` in the install location.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Device-code flags of every kernel: release always (`-DNDEBUG`, or ptxas
/// serializes wgmma), Hopper's sm_90a, never device-debug code.
pub const NVCC_FLAGS: [&str; 6] = [
    "-std=c++17",
    "-DNDEBUG",
    "-O3",
    "--expt-relaxed-constexpr",
    "-gencode=arch=compute_90a,code=sm_90a",
    "-Xcompiler=-fPIC",
];

/// The pinned wheels, one `name==version` a line; `scripts/install-toolchain.sh` reads the same file.
pub const PINS: &str = include_str!("../toolchain-pins.txt");

/// How to get a toolchain, quoted in every error that lacks one.
pub const INSTALL_HINT: &str = "Run `bash scripts/install-toolchain.sh` in the CODA-rs repository or \
     `coda toolchain install`, or set CODA_CUDA_HOME to a CUDA 13 toolkit root and CODA_CUTLASS_HOME to CUTLASS 4.2.";

/// The CUDA major version the generated kernels are written for.
const CUDA_MAJOR: &str = "13";

/// The `name==version` lines of [`PINS`].
pub fn pins() -> Vec<&'static str> {
    PINS.lines().map(str::trim).filter(|l| !l.is_empty()).collect()
}

fn pin(name: &str) -> &'static str {
    pins()
        .into_iter()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix("=="))
        .unwrap_or_else(|| panic!("toolchain-pins.txt pins no {name}"))
}

/// `cuda-13.0.88-cutlass-4.2.0`: names the install folder, so that a new pin set installs beside the old one.
pub fn pin_id() -> String {
    let cutlass: Vec<&str> = pin("nvidia-cutlass").split('.').take(3).collect();
    format!("cuda-{}-cutlass-{}", pin("nvidia-cuda-nvcc"), cutlass.join("."))
}

/// `$XDG_CACHE_HOME`, else `$HOME/.cache`.
pub(crate) fn user_cache_dir(var: &dyn Fn(&str) -> Option<OsString>) -> Result<PathBuf, String> {
    let dir = |k: &str| var(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    dir("XDG_CACHE_HOME")
        .or_else(|| dir("HOME").map(|h| h.join(".cache")))
        .ok_or_else(|| "coda: neither XDG_CACHE_HOME nor HOME is set, so there is no per-user cache folder".to_string())
}

/// Where the pinned toolchain is installed: `CODA_TOOLCHAIN_DIR`, else
/// `${XDG_CACHE_HOME:-$HOME/.cache}/coda-rs/toolchain/<pin id>`.
pub fn install_dir() -> Result<PathBuf, String> {
    install_dir_with(&|k| std::env::var_os(k))
}

fn install_dir_with(var: &dyn Fn(&str) -> Option<OsString>) -> Result<PathBuf, String> {
    match var("CODA_TOOLCHAIN_DIR").filter(|v| !v.is_empty()) {
        Some(d) => Ok(PathBuf::from(d)),
        None => Ok(user_cache_dir(var)?.join("coda-rs/toolchain").join(pin_id())),
    }
}

/// The stamp an install leaves: the pin set it installed.
const STAMP: &str = ".coda-pins";

/// The marker an install leaves while pip runs, removed with the stamp
/// written: a folder holding it is an install that did not finish.
const INSTALLING: &str = ".coda-installing";

/// Whether `dest` was made by an install, finished or not (so an install may
/// delete it; a folder of anything else is never deleted).
fn made_by_install(dest: &Path) -> bool {
    dest.join(STAMP).is_file() || dest.join(INSTALLING).is_file()
}

/// Installs the pinned wheels into `dest` (default [`install_dir`]) with
/// `python3 -m pip install --no-deps --target`, as `scripts/install-toolchain.sh`
/// does, and returns the folder. Does nothing when the stamp there matches the pins.
pub fn install(dest: Option<&Path>) -> Result<PathBuf, String> {
    let dest = dest.map_or_else(install_dir, |d| Ok(d.to_path_buf()))?;
    let pins = pins();
    let stamp = dest.join(STAMP);
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s.trim() == pins.join(" "))
        && dest.join("nvidia/cu13/bin/nvcc").is_file()
    {
        return Ok(dest);
    }
    // Only ever delete a folder an earlier install made (an interrupted one included).
    if dest.exists() && !made_by_install(&dest) && std::fs::read_dir(&dest).is_ok_and(|mut d| d.next().is_some()) {
        return Err(format!(
            "coda: {} is not empty and holds no earlier toolchain install; choose another folder",
            dest.display()
        ));
    }
    let _ = std::fs::remove_dir_all(&dest);
    std::fs::create_dir_all(&dest).map_err(|e| format!("coda: cannot create {}: {e}", dest.display()))?;
    let installing = dest.join(INSTALLING);
    std::fs::write(&installing, "").map_err(|e| format!("coda: cannot write {}: {e}", installing.display()))?;
    let status = Command::new(std::env::var_os("PYTHON").unwrap_or_else(|| "python3".into()))
        .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps", "--target"])
        .arg(&dest)
        .args(&pins)
        .status()
        .map_err(|e| format!("coda: cannot run python3 (pip installs the CUDA wheels): {e}"))?;
    if !status.success() {
        return Err(format!("coda: pip failed ({status}) installing {} into {}", pins.join(" "), dest.display()));
    }
    for f in [
        "nvidia/cu13/bin/nvcc",
        "nvidia/cu13/lib/libcudart_static.a",
        "cutlass_library/source/include/cutlass/cutlass.h",
    ] {
        if !dest.join(f).exists() {
            return Err(format!("coda: {} is missing after the install", dest.join(f).display()));
        }
    }
    // Wheels do not keep the executable bit.
    for dir in ["nvidia/cu13/bin", "nvidia/cu13/nvvm/bin"] {
        for entry in std::fs::read_dir(dest.join(dir)).into_iter().flatten().flatten() {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(0o755));
        }
    }
    std::fs::write(&stamp, pins.join(" ") + "\n")
        .map_err(|e| format!("coda: cannot write {}: {e}", stamp.display()))?;
    let _ = std::fs::remove_file(&installing);
    Ok(dest)
}

#[derive(Clone, Debug)]
pub struct Toolchain {
    /// Toolkit root: `bin/nvcc`, `include/`, `lib/libcudart_static.a`.
    pub cuda_home: PathBuf,
    /// CUTLASS source root: `include/` and `tools/util/include/`.
    pub cutlass_home: PathBuf,
    /// What `nvcc --version` printed.
    nvcc_version: String,
}

impl Toolchain {
    /// Finds the toolchain from the process environment (see the module docs).
    pub fn find() -> Result<Toolchain, String> {
        Self::find_with(None, None, |k| std::env::var_os(k))
    }

    /// [`Toolchain::find`] with a build's own choices (step 2 of the module
    /// docs) and the environment given as a function.
    pub fn find_with(
        cuda_home: Option<&Path>,
        cutlass_home: Option<&Path>,
        var: impl Fn(&str) -> Option<OsString>,
    ) -> Result<Toolchain, String> {
        let env_dir = |k: &str| var(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        let installed =
            || -> Result<PathBuf, String> { install_dir_with(&var).map_err(|e| format!("{e}. {INSTALL_HINT}")) };
        let (cuda_home, source) = match (env_dir("CODA_CUDA_HOME"), cuda_home, env_dir("CUDA_HOME")) {
            (Some(d), _, _) => (d.clone(), format!("CODA_CUDA_HOME = {}", d.display())),
            (None, Some(d), _) => (d.to_path_buf(), format!("Build::cuda_home({})", d.display())),
            (None, None, Some(d)) => (d.clone(), format!("CUDA_HOME = {}", d.display())),
            (None, None, None) => {
                let dir = installed()?;
                if !dir.is_dir() {
                    return Err(format!(
                        "coda: no CUDA toolchain found: none is installed in {} and CODA_CUDA_HOME and CUDA_HOME \
                         are not set. {INSTALL_HINT} To install by hand: python3 -m pip install --no-deps --target {} {}",
                        dir.display(),
                        dir.display(),
                        pins().join(" ")
                    ));
                }
                if dir.join(INSTALLING).is_file() && !dir.join(STAMP).is_file() {
                    return Err(format!(
                        "coda: the toolchain install in {} did not finish (interrupted?); run it again. {INSTALL_HINT}",
                        dir.display()
                    ));
                }
                (dir.join("nvidia/cu13"), format!("the toolchain installed in {}", dir.display()))
            }
        };
        if !cuda_home.join("bin/nvcc").is_file() || !cuda_home.join("lib/libcudart_static.a").is_file() {
            return Err(format!("coda: {source} has no bin/nvcc and lib/libcudart_static.a. {INSTALL_HINT}"));
        }
        let nvcc = cuda_home.join("bin/nvcc");
        let out = Command::new(&nvcc)
            .arg("--version")
            .output()
            .map_err(|e| format!("coda: cannot run {} (from {source}): {e}. {INSTALL_HINT}", nvcc.display()))?;
        let nvcc_version = String::from_utf8_lossy(&out.stdout).into_owned();
        let release = nvcc_version.split_once("release ").and_then(|(_, r)| r.split([',', ' ', '\n']).next());
        if release.and_then(|r| r.split('.').next()) != Some(CUDA_MAJOR) {
            return Err(format!(
                "coda: {source} is CUDA {}, but CODA needs CUDA {CUDA_MAJOR}.x (nvcc --version: {}). {INSTALL_HINT}",
                release.unwrap_or("of unknown release"),
                nvcc_version.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("no output").trim()
            ));
        }
        let cutlass_home = match (env_dir("CODA_CUTLASS_HOME"), cutlass_home) {
            (Some(d), _) => d,
            (None, Some(d)) => d.to_path_buf(),
            (None, None) => installed()?.join("cutlass_library/source"),
        };
        if !cutlass_home.join("include/cutlass/cutlass.h").is_file()
            || !cutlass_home.join("tools/util/include").is_dir()
        {
            return Err(format!(
                "coda: CUTLASS not found: {} has no include/cutlass/cutlass.h and tools/util/include. {INSTALL_HINT}",
                cutlass_home.display()
            ));
        }
        Ok(Toolchain { cuda_home, cutlass_home, nvcc_version })
    }

    pub fn nvcc(&self) -> PathBuf {
        self.cuda_home.join("bin/nvcc")
    }

    /// CUTLASS's version header: an install upgraded in place changes it.
    pub fn cutlass_version_header(&self) -> PathBuf {
        self.cutlass_home.join("include/cutlass/version.h")
    }

    pub fn lib_dir(&self) -> PathBuf {
        self.cuda_home.join("lib")
    }

    /// CUTLASS's include folders.
    pub fn include_dirs(&self) -> Vec<PathBuf> {
        vec![self.cutlass_home.join("include"), self.cutlass_home.join("tools/util/include")]
    }

    /// What `nvcc --version` printed.
    pub fn nvcc_version_text(&self) -> &str {
        &self.nvcc_version
    }

    /// A `cc::Build` for sm_90a `.cu` files with this toolkit's nvcc: release
    /// flags always, never device-debug code.
    pub fn cc_build(&self) -> cc::Build {
        let mut b = host_build();
        b.compiler(self.nvcc())
            .cuda(true)
            // cc writes its default flags (-fPIC, -march, …) for the host
            // compiler unless it found nvcc through the `NVCC` variable; nvcc
            // needs them behind -Xcompiler, so NVCC_FLAGS has what we need.
            .no_default_flags(true)
            .cudart("none") // linked once, by coda-runtime, from the toolkit's lib/
            .debug(false)
            .opt_level(3)
            .warnings(false)
            .cargo_metadata(false);
        // The host compiler cc would use (honouring CXX, and telling cargo it
        // read it), as cc passes it when it finds nvcc itself.
        if let Ok(cxx) = host_build().cpp(true).opt_level(3).try_get_compiler() {
            b.flag(format!("-ccbin={}", cxx.path().display()));
        }
        for f in NVCC_FLAGS {
            b.flag(f);
        }
        for d in self.include_dirs() {
            b.include(d);
        }
        b
    }

    /// `nvcc V13.0.88, CUTLASS 4.2.0`: the toolchain part of a tuning-cache key.
    pub fn version(&self) -> Result<String, String> {
        let nvcc = self.nvcc_version.split_whitespace().rfind(|w| w.starts_with('V')).unwrap_or("unknown");
        let path = self.cutlass_home.join("include/cutlass/version.h");
        let header = std::fs::read_to_string(&path).map_err(|e| format!("coda: {}: {e}", path.display()))?;
        let part = |name: &str| {
            header
                .lines()
                .find_map(|l| l.strip_prefix(&format!("#define CUTLASS_{name} ")))
                .map_or("?".to_string(), |v| v.trim().to_string())
        };
        Ok(format!("nvcc {nvcc}, CUTLASS {}.{}.{}", part("MAJOR"), part("MINOR"), part("PATCH")))
    }

    /// Tells cargo to link the static CUDA runtime from this toolkit.
    pub fn emit_cudart_link(&self) {
        println!("cargo:rustc-link-search=native={}", self.lib_dir().display());
        println!("cargo:rustc-link-lib=static=cudart_static");
        for lib in ["dl", "rt", "pthread", "stdc++"] {
            println!("cargo:rustc-link-lib=dylib={lib}");
        }
    }
}

/// A `cc::Build` for this machine; outside a build script (tests), it gets
/// the target, host and scratch folder a build script would have.
pub fn host_build() -> cc::Build {
    let mut b = cc::Build::new();
    if std::env::var_os("TARGET").is_none() {
        let triple = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
        b.target(&triple).host(&triple).out_dir(std::env::temp_dir());
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder an install made, finished (stamp) or interrupted (marker),
    /// may be replaced by the next install; any other is never deleted.
    #[test]
    fn only_folders_an_install_made_may_be_replaced() {
        let dir = std::env::temp_dir().join(format!("coda-made-by-install-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("notes.txt"), "mine").unwrap();
        assert!(!made_by_install(&dir));
        std::fs::write(dir.join(INSTALLING), "").unwrap();
        assert!(made_by_install(&dir));
        std::fs::remove_file(dir.join(INSTALLING)).unwrap();
        std::fs::write(dir.join(STAMP), "pins").unwrap();
        assert!(made_by_install(&dir));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
