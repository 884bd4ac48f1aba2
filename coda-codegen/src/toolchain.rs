//! Finding the CUDA compiler and CUTLASS headers. No system CUDA is assumed.
//!
//! Search order (first match wins):
//! 1. `CODA_CUDA_HOME`: a toolkit root with `bin/nvcc` and `lib/libcudart_static.a`;
//! 2. `CUDA_HOME`: the same layout;
//! 3. the repository's `.toolchain/cuda/nvidia/cu13`, installed by
//!    `scripts/install-toolchain.sh`, found by walking up from the crate being built.
//!
//! CUTLASS: `CODA_CUTLASS_HOME` (a folder with `include/cutlass` and
//! `tools/util/include`), else the `.toolchain/cuda/cutlass_library/source` beside step 3.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

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

/// The command that installs the pinned toolchain, quoted in every error.
pub const INSTALL_HINT: &str = "bash scripts/install-toolchain.sh";

#[derive(Clone, Debug)]
pub struct Toolchain {
    /// Toolkit root: `bin/nvcc`, `include/`, `lib/libcudart_static.a`.
    pub cuda_home: PathBuf,
    /// CUTLASS source root: `include/` and `tools/util/include/`.
    pub cutlass_home: PathBuf,
    /// The folder holding our headers as `coda/*.hpp` (see [`crate::templates`]).
    pub templates: PathBuf,
}

impl Toolchain {
    /// Finds the toolchain for a crate whose manifest is at `manifest_dir`.
    pub fn find(manifest_dir: &Path) -> Result<Toolchain, String> {
        Self::find_with(manifest_dir, |k| std::env::var_os(k))
    }

    /// [`Toolchain::find`] with the environment given as a function (for tests).
    pub fn find_with(manifest_dir: &Path, var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Result<Toolchain, String> {
        let env_dir = |k: &str| var(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        let repo = manifest_dir.ancestors().map(|d| d.join(".toolchain/cuda")).find(|d| d.is_dir());
        let cuda_home = match (env_dir("CODA_CUDA_HOME"), env_dir("CUDA_HOME")) {
            (Some(d), _) => checked(d, "CODA_CUDA_HOME")?,
            (None, Some(d)) => checked(d, "CUDA_HOME")?,
            (None, None) => match &repo {
                Some(r) => checked(r.join("nvidia/cu13"), "the repository's .toolchain/cuda")?,
                None => {
                    return Err(format!(
                        "coda: no CUDA toolchain found. Run `{INSTALL_HINT}` in the CODA-rs repository \
                         (it installs the pinned nvcc 13.0 and CUTLASS 4.2 wheels into .toolchain/cuda), \
                         or set CODA_CUDA_HOME to a CUDA 13 toolkit root and CODA_CUTLASS_HOME to CUTLASS 4.2."
                    ));
                }
            },
        };
        let cutlass_home = match (env_dir("CODA_CUTLASS_HOME"), &repo) {
            (Some(d), _) => d,
            (None, Some(r)) => r.join("cutlass_library/source"),
            (None, None) => {
                return Err(format!(
                    "coda: CUTLASS headers not found: set CODA_CUTLASS_HOME or run `{INSTALL_HINT}`"
                ));
            }
        };
        if !cutlass_home.join("include/cutlass/cutlass.h").is_file() {
            return Err(format!(
                "coda: {} has no include/cutlass/cutlass.h; run `{INSTALL_HINT}` or fix CODA_CUTLASS_HOME",
                cutlass_home.display()
            ));
        }
        let templates = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cutlass-templates/include");
        Ok(Toolchain { cuda_home, cutlass_home, templates })
    }

    pub fn nvcc(&self) -> PathBuf {
        self.cuda_home.join("bin/nvcc")
    }

    pub fn lib_dir(&self) -> PathBuf {
        self.cuda_home.join("lib")
    }

    pub fn include_dirs(&self) -> Vec<PathBuf> {
        vec![
            self.templates.clone(),
            self.cutlass_home.join("include"),
            self.cutlass_home.join("tools/util/include"),
        ]
    }

    /// A `cc::Build` for sm_90a `.cu` files: release flags always, never device-debug code.
    ///
    /// cc reads the CUDA compiler from the `NVCC` environment variable only, so
    /// this sets it for the build script's process. Call it from the build
    /// script's main thread before spawning any (build scripts start single-threaded).
    pub fn cc_build(&self) -> cc::Build {
        // SAFETY: called on the build script's main thread while no other thread runs.
        unsafe { std::env::set_var("NVCC", self.nvcc()) };
        let mut b = host_build();
        b.cuda(true)
            .cudart("none") // linked once, by coda-runtime, from the wheel's lib/
            .debug(false)
            .opt_level(3)
            .warnings(false)
            .cargo_metadata(false);
        for f in NVCC_FLAGS {
            b.flag(f);
        }
        for d in self.include_dirs() {
            b.include(d);
        }
        b
    }

    /// Hash of everything besides the source that changes the object code:
    /// the nvcc version line, our headers, the compile flags.
    pub fn fingerprint(&self) -> Result<String, String> {
        let mut h = Sha256::new();
        h.update(self.nvcc_version_text()?.as_bytes());
        for (name, text) in crate::templates::HEADERS {
            h.update(name.as_bytes());
            h.update(text.as_bytes());
        }
        let version = self.cutlass_home.join("include/cutlass/version.h");
        h.update(std::fs::read(&version).map_err(|e| format!("coda: {}: {e}", version.display()))?);
        h.update(format!("{NVCC_FLAGS:?}").as_bytes());
        Ok(format!("{:x}", h.finalize()))
    }

    /// `nvcc V13.0.88, CUTLASS 4.2.0`: the toolchain part of a tuning-cache key.
    pub fn version(&self) -> Result<String, String> {
        let nvcc = self.nvcc_version_text()?;
        let nvcc = nvcc.split_whitespace().rfind(|w| w.starts_with('V')).unwrap_or("unknown").to_string();
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

    fn nvcc_version_text(&self) -> Result<String, String> {
        let out = std::process::Command::new(self.nvcc())
            .arg("--version")
            .output()
            .map_err(|e| format!("coda: cannot run {}: {e}. Run `{INSTALL_HINT}`.", self.nvcc().display()))?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
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

fn checked(dir: PathBuf, source: &str) -> Result<PathBuf, String> {
    let nvcc = dir.join("bin/nvcc");
    if nvcc.is_file() && dir.join("lib/libcudart_static.a").is_file() {
        Ok(dir)
    } else {
        Err(format!(
            "coda: {source} = {} has no bin/nvcc and lib/libcudart_static.a. Run `{INSTALL_HINT}` \
             (installs nvcc 13.0 and CUTLASS 4.2 into .toolchain/cuda) or point it at a CUDA 13 toolkit.",
            dir.display()
        ))
    }
}
