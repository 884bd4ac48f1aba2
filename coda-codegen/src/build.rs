//! The build-script API, in the manner of `cxx_build`:
//!
//! ```no_run
//! // build.rs
//! fn main() {
//!     coda_codegen::epilogues(["src/lib.rs"]).compile("my_kernels");
//! }
//! ```
//!
//! It finds the `#[epilogue]` items of the given files (with the same parser
//! as the macro), writes one `.cu` per program and config, compiles each with
//! nvcc (cached by content hash, bounded parallelism) and links them. Beside
//! each program's own config it can build a set of others for the runtime's
//! tuner to choose from ([`Build::configs`], or `CODA_CONFIGS`); for each
//! program it writes `OUT_DIR/coda-gen/<program>.rs`, the table of compiled
//! configs that the macro's module includes.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use coda_dsl::Program;
use coda_dsl::ir::Config;

use crate::toolchain::Toolchain;

/// Epilogue programs from these Rust files (relative to the crate's manifest).
pub fn epilogues<P: AsRef<Path>>(files: impl IntoIterator<Item = P>) -> Build {
    Build {
        files: files.into_iter().map(|p| p.as_ref().to_path_buf()).collect(),
        manifest_dir: None,
        out_dir: None,
        package: None,
        cache_dir: None,
        cargo_metadata: true,
        configs: ConfigSet::Own,
        config_programs: None,
    }
}

/// The configs each program is compiled for beside its own.
#[derive(Clone, Debug, PartialEq)]
pub enum ConfigSet {
    /// Only the program's own config (the default; what CI builds).
    Own,
    /// The full tuning set, [`Config::all`] (24 configs).
    All,
    /// These configs.
    Named(Vec<Config>),
}

impl ConfigSet {
    /// `own`, `all`, or config names separated by commas (`coop_256x128_c1x2,pp_128x128_c1x2`).
    pub fn parse(s: &str) -> Result<ConfigSet, String> {
        match s.trim() {
            "" | "own" => Ok(ConfigSet::Own),
            "all" => Ok(ConfigSet::All),
            list => list.split(',').map(|n| Config::from_name(n.trim())).collect::<Result<_, _>>().map(ConfigSet::Named),
        }
    }
    fn configs(&self) -> Vec<Config> {
        match self {
            ConfigSet::Own => vec![],
            ConfigSet::All => Config::all(),
            ConfigSet::Named(v) => v.clone(),
        }
    }
}

/// What to build; by default everything comes from cargo's build-script environment.
pub struct Build {
    files: Vec<PathBuf>,
    manifest_dir: Option<PathBuf>,
    out_dir: Option<PathBuf>,
    package: Option<String>,
    cache_dir: Option<PathBuf>,
    cargo_metadata: bool,
    configs: ConfigSet,
    config_programs: Option<Vec<String>>,
}

/// What one build did, for tests and logs.
#[derive(Debug, Default)]
pub struct Report {
    /// (`<program>__<config>`, generated `.cu`, object file, whether nvcc ran for it).
    pub kernels: Vec<(String, PathBuf, PathBuf, bool)>,
    /// (program, config, why it was not built): configs of the set a program cannot take.
    pub dropped: Vec<(String, Config, String)>,
}

impl Report {
    pub fn nvcc_runs(&self) -> usize {
        self.kernels.iter().filter(|k| k.3).count()
    }
}

impl Build {
    /// Resolve files and the toolchain from here instead of `CARGO_MANIFEST_DIR`.
    pub fn manifest_dir(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.manifest_dir = Some(dir.into());
        self
    }
    /// Write sources and the library here instead of `OUT_DIR`.
    pub fn out_dir(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.out_dir = Some(dir.into());
        self
    }
    /// The package name in launcher symbols, instead of `CARGO_PKG_NAME`.
    pub fn package(&mut self, name: &str) -> &mut Self {
        self.package = Some(name.to_string());
        self
    }
    /// Where compiled objects are cached, instead of `CODA_CACHE_DIR` or `<target>/coda-cache`.
    pub fn cache_dir(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.cache_dir = Some(dir.into());
        self
    }
    /// Also compile each program for these configs (the environment's
    /// `CODA_CONFIGS`, when set, overrides this).
    pub fn configs(&mut self, set: ConfigSet) -> &mut Self {
        self.configs = set;
        self
    }
    /// Apply [`Build::configs`] only to these programs (overridden by
    /// `CODA_CONFIG_PROGRAMS`, names separated by commas).
    pub fn config_programs<S: AsRef<str>>(&mut self, names: impl IntoIterator<Item = S>) -> &mut Self {
        self.config_programs = Some(names.into_iter().map(|n| n.as_ref().to_string()).collect());
        self
    }
    /// Whether to print `cargo:` directives (link and rerun rules); on by default.
    pub fn cargo_metadata(&mut self, on: bool) -> &mut Self {
        self.cargo_metadata = on;
        self
    }

    /// Generates, compiles and links; on error prints a diagnostic and fails the build.
    pub fn compile(&self, lib_name: &str) -> Report {
        match self.try_compile(lib_name) {
            Ok(r) => r,
            Err(msg) => {
                eprintln!("\n{msg}\n");
                panic!("coda-codegen failed; see the message above");
            }
        }
    }

    /// As [`Build::compile`], returning the diagnostic instead of panicking.
    pub fn try_compile(&self, lib_name: &str) -> Result<Report, String> {
        let manifest_dir = self.manifest_dir.clone().map_or_else(|| env("CARGO_MANIFEST_DIR").map(PathBuf::from), Ok)?;
        let out_dir = self.out_dir.clone().map_or_else(|| env("OUT_DIR").map(PathBuf::from), Ok)?;
        let package = self.package.clone().map_or_else(|| env("CARGO_PKG_NAME"), Ok)?;
        let cargo = |line: String| {
            if self.cargo_metadata {
                println!("cargo:{line}");
            }
        };
        for var in ["CODA_CUDA_HOME", "CUDA_HOME", "CODA_CUTLASS_HOME", "CODA_CACHE_DIR", "CODA_JOBS", "CODA_CONFIGS", "CODA_CONFIG_PROGRAMS"] {
            cargo(format!("rerun-if-env-changed={var}"));
        }
        let set = match std::env::var("CODA_CONFIGS") {
            Ok(v) => ConfigSet::parse(&v).map_err(|e| format!("coda: CODA_CONFIGS: {e}"))?,
            Err(_) => self.configs.clone(),
        };
        let only = match std::env::var("CODA_CONFIG_PROGRAMS") {
            Ok(v) if !v.trim().is_empty() => Some(v.split(',').map(|n| n.trim().to_string()).collect::<Vec<_>>()),
            _ => self.config_programs.clone(),
        };
        let extra = |p: &Program| {
            if only.as_ref().is_none_or(|o| o.contains(&p.name)) { set.configs() } else { vec![] }
        };
        let mut programs = vec![];
        for file in &self.files {
            let path = manifest_dir.join(file);
            cargo(format!("rerun-if-changed={}", path.display()));
            let src = std::fs::read_to_string(&path).map_err(|e| format!("coda: cannot read {}: {e}", path.display()))?;
            let ast = syn::parse_file(&src).map_err(|e| render(&path, &src, &e))?;
            programs.extend(coda_dsl::lower_file_variants(&ast, extra).map_err(|e| render(&path, &src, &e))?);
        }
        let mut tc = Toolchain::find(&manifest_dir)?;
        tc.templates = crate::templates::write(&out_dir.join("coda-include"))?;
        let cache = self.cache_dir.clone().unwrap_or_else(|| cache_dir(&manifest_dir, &out_dir));
        std::fs::create_dir_all(&cache).map_err(|e| format!("coda: cannot create {}: {e}", cache.display()))?;
        let fingerprint = tc.fingerprint()?;
        let toolchain = tc.version()?;
        let compiler = tc.cc_build().get_compiler();

        let gen_dir = out_dir.join("coda-gen");
        std::fs::create_dir_all(&gen_dir).map_err(|e| e.to_string())?;
        // (program index, variant index, `<program>__<config>`, .cu, object, content key)
        let mut jobs = vec![];
        for (pi, (variants, _)) in programs.iter().enumerate() {
            for (vi, p) in variants.iter().enumerate() {
                let stem = format!("{}__{}", p.name, p.config.name());
                let cu = gen_dir.join(format!("{stem}.cu"));
                let src = crate::emit::emit(p, &package);
                std::fs::write(&cu, &src).map_err(|e| format!("coda: cannot write {}: {e}", cu.display()))?;
                let key = format!("{:x}", Sha256::new().chain_update(&src).chain_update(&fingerprint).finalize());
                let obj = cache.join(format!("{stem}-{}.o", &key[..16]));
                jobs.push((pi, vi, stem, cu, obj, key));
            }
        }
        let built = Mutex::new(vec![]);
        let todo = Mutex::new(jobs.into_iter());
        let errors = Mutex::new(vec![]);
        std::thread::scope(|s| {
            for _ in 0..parallelism() {
                s.spawn(|| {
                    loop {
                        let Some(job) = todo.lock().unwrap().next() else { break };
                        let ran = !job.4.is_file();
                        match if ran { nvcc(&compiler, &job.3, &job.4) } else { Ok(()) } {
                            Ok(()) => built.lock().unwrap().push((job, ran)),
                            Err(e) => errors.lock().unwrap().push((job, e)),
                        }
                    }
                });
            }
        });
        // A program's own config must compile; another config of the tuning
        // set that does not is left out of its table, with a warning.
        let mut report = Report::default();
        let mut failed_extra = vec![];
        let mut fatal = vec![];
        for (job, e) in errors.into_inner().unwrap() {
            if job.1 == 0 {
                fatal.push(e);
            } else {
                cargo(format!("warning=coda: {} left out of the tuning set: nvcc failed ({})", job.2, job.3.display()));
                failed_extra.push((job.0, job.1, e));
            }
        }
        if !fatal.is_empty() {
            return Err(fatal.join("\n\n"));
        }
        let mut built = built.into_inner().unwrap();
        built.sort_by_key(|(job, _)| (job.0, job.1));
        for (pi, (variants, skipped)) in programs.iter().enumerate() {
            let (mut compiled, mut keys) = (vec![], vec![]);
            for (job, ran) in built.iter().filter(|(job, _)| job.0 == pi) {
                compiled.push(variants[job.1].clone());
                keys.push(job.5.clone());
                report.kernels.push((job.2.clone(), job.3.clone(), job.4.clone(), *ran));
            }
            let mut dropped = skipped.clone();
            for (_, vi, e) in failed_extra.iter().filter(|f| f.0 == pi) {
                let first = e.lines().find(|l| l.contains("error")).unwrap_or("nvcc failed").to_string();
                dropped.push((variants[*vi].config, first));
            }
            let name = &variants[0].name;
            let table = crate::registry::variants_table(&compiled, &dropped, &package, &keys, &toolchain);
            let rs = gen_dir.join(format!("{name}.rs"));
            std::fs::write(&rs, table).map_err(|e| format!("coda: cannot write {}: {e}", rs.display()))?;
            report.dropped.extend(dropped.into_iter().map(|(c, why)| (name.clone(), c, why)));
        }
        report.kernels.sort();
        archive(&out_dir, lib_name, &report)?;
        cargo(format!("rustc-link-search=native={}", out_dir.display()));
        cargo(format!("rustc-link-lib=static={lib_name}"));
        Ok(report)
    }
}

fn env(k: &str) -> Result<String, String> {
    std::env::var(k).map_err(|_| format!("coda: {k} is not set; call coda_codegen from a build script"))
}

/// Compiled objects live outside OUT_DIR so that every profile, target dir
/// and fresh `OUT_DIR` reuses them (keys are content hashes, so sharing is
/// safe): `CODA_CACHE_DIR`, else `coda-cache` beside the repository's
/// `.toolchain/cuda`, else `<target dir>/coda-cache`.
pub fn cache_dir(manifest_dir: &Path, out_dir: &Path) -> PathBuf {
    if let Some(d) = std::env::var_os("CODA_CACHE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    if let Some(t) = manifest_dir.ancestors().map(|d| d.join(".toolchain")).find(|d| d.join("cuda").is_dir()) {
        return t.join("coda-cache");
    }
    // OUT_DIR = <target>/<profile>/build/<pkg>-<hash>/out
    out_dir.ancestors().nth(4).unwrap_or(out_dir).join("coda-cache")
}

/// One Hopper GEMM TU takes ~3.3 GB and ~40 s: at most `CODA_JOBS` (default: cores, max 2) at once.
fn parallelism() -> usize {
    std::env::var("CODA_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(2)))
        .max(1)
}

fn nvcc(compiler: &cc::Tool, cu: &Path, obj: &Path) -> Result<(), String> {
    let tmp = obj.with_extension(format!("o.tmp{}", std::process::id()));
    let mut cmd: Command = compiler.to_command();
    cmd.arg("-c").arg(cu).arg("-o").arg(&tmp);
    let shown = std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    let out = cmd.output().map_err(|e| format!("coda: cannot run nvcc ({shown}): {e}"))?;
    if !out.status.success() {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!(
            "coda: nvcc failed on {}\ncommand: {shown}\n--- nvcc output ---\n{}{}",
            cu.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    std::fs::rename(&tmp, obj).map_err(|e| format!("coda: cannot store {}: {e}", obj.display()))
}

fn archive(out_dir: &Path, lib_name: &str, report: &Report) -> Result<(), String> {
    let lib = out_dir.join(format!("lib{lib_name}.a"));
    let _ = std::fs::remove_file(&lib);
    let mut cmd = crate::toolchain::host_build().get_archiver();
    cmd.arg("crs").arg(&lib);
    for k in &report.kernels {
        cmd.arg(&k.2);
    }
    let out = cmd.output().map_err(|e| format!("coda: cannot run the archiver: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("coda: archiving {} failed: {}", lib.display(), String::from_utf8_lossy(&out.stderr)))
    }
}

/// A user error as `error: … --> file:line:col` with the source line and a caret.
pub fn render(path: &Path, src: &str, e: &syn::Error) -> String {
    let mut out = String::new();
    for err in e.clone() {
        let start = err.span().start();
        let end = err.span().end();
        let line = src.lines().nth(start.line.saturating_sub(1)).unwrap_or("");
        let width = if end.line == start.line { end.column.saturating_sub(start.column).max(1) } else { 1 };
        out.push_str(&format!(
            "error: {err}\n  --> {}:{}:{}\n   |\n{:>3}| {line}\n   | {}{}\n",
            path.display(),
            start.line,
            start.column + 1,
            start.line,
            " ".repeat(start.column),
            "^".repeat(width)
        ));
    }
    out
}
