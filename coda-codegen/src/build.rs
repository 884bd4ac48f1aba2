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
//! as the macro), writes one `.cu` per program holding all its configs (one
//! translation unit: the configs share nvcc's front end), compiles each with
//! nvcc (cached by content hash in [`cache::default_dir`], bounded by
//! `CODA_JOBS` and cargo's jobserver, a progress line per unit) and links
//! them. Beside
//! each program's own config it builds others for the runtime's tuner to
//! choose from: by default ping-pong 128×128 beside the default config
//! ([`ConfigSet::Default`]), or a set [`Build::configs`] or `CODA_CONFIGS`
//! names; for each
//! program it writes `OUT_DIR/coda-gen/<program>.rs`, the table of compiled
//! configs that the macro's module includes.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use coda_dsl::Program;
use coda_dsl::ir::{Accumulation, Config};

use crate::cache;
use crate::registry::Compiled;
use crate::toolchain::Toolchain;

/// Epilogue programs from these Rust files (relative to the crate's manifest).
pub fn epilogues<P: AsRef<Path>>(files: impl IntoIterator<Item = P>) -> Build {
    Build {
        files: files.into_iter().map(|p| p.as_ref().to_path_buf()).collect(),
        manifest_dir: None,
        out_dir: None,
        package: None,
        version: None,
        cuda_home: None,
        cutlass_home: None,
        cache_dir: None,
        cargo_metadata: true,
        configs: ConfigSet::Default,
        config_programs: None,
        program_configs: HashMap::new(),
    }
}

/// The configs each program is compiled for beside its own.
#[derive(Clone, Debug, PartialEq)]
pub enum ConfigSet {
    /// The default: beside a program that chose no tile, cluster or schedule
    /// (its own config is cooperative 128×256, cluster 1×1), ping-pong
    /// 128×128 with a 1×2 cluster, so that the tuner's heuristic has the two
    /// configs that serve small and large grids, light and heavy epilogues
    /// (together within 0.2% of the best of three configs on the 57 Llama
    /// shapes session 8 searched in both; bench/NOTES.md, session 7). A
    /// program in another config (options that differ from the default), and
    /// a map program (whose empty GEMM the model always gives the
    /// cooperative tile), gets only its own.
    Default,
    /// Only the program's own config.
    Own,
    /// The full tuning set the program's operands allow, [`Config::all_for`] (24 configs for bf16).
    All,
    /// These configs.
    Named(Vec<Config>),
}

impl ConfigSet {
    /// `default`, `own`, `all`, or config names separated by commas (`coop_256x128_c1x2,pp_128x128_c1x2`).
    pub fn parse(s: &str) -> Result<ConfigSet, String> {
        match s.trim() {
            "" | "default" => Ok(ConfigSet::Default),
            "own" => Ok(ConfigSet::Own),
            "all" => Ok(ConfigSet::All),
            list => list.split(',').map(|n| Config::from_name(n.trim())).collect::<Result<_, _>>().map(ConfigSet::Named),
        }
    }
    /// The configs beside `p`'s own.
    fn configs(&self, p: &Program) -> Vec<Config> {
        let own = &p.config;
        match self {
            ConfigSet::Default if !p.is_map() && Config::default().with_options_of(own) == *own => {
                vec![Config::from_name("pp_128x128_c1x2").expect("a valid config name")]
            }
            // 8-bit operands that promote take one tile (`Config::check`): both of its clusters along N.
            ConfigSet::Default if own.operands.is_fp8() && own.operands.accum == Accumulation::Promoted => {
                ["coop_128x128_c1x1", "coop_128x128_c1x2"].map(|n| Config::from_name(n).expect("a valid config name")).to_vec()
            }
            ConfigSet::Default | ConfigSet::Own => vec![],
            ConfigSet::All => Config::all_for(own),
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
    version: Option<String>,
    cuda_home: Option<PathBuf>,
    cutlass_home: Option<PathBuf>,
    cache_dir: Option<PathBuf>,
    cargo_metadata: bool,
    configs: ConfigSet,
    config_programs: Option<Vec<String>>,
    program_configs: HashMap<String, ConfigSet>,
}

/// One compiled config of a program.
#[derive(Clone, Debug)]
pub struct Kernel {
    /// `<program>__<config>`.
    pub name: String,
    /// The generated source.
    pub cu: PathBuf,
    /// The object file in the cache.
    pub object: PathBuf,
    /// Whether nvcc ran for it (else the cache had it).
    pub nvcc_ran: bool,
    /// How long nvcc took, or finding it in the cache.
    pub seconds: f64,
    /// What ptxas reported for the kernel (see [`ptxas_summary`]).
    pub ptxas: String,
}

/// What one build did, for tests and logs.
#[derive(Debug, Default)]
pub struct Report {
    /// Sorted by name.
    pub kernels: Vec<Kernel>,
    /// (program, config, why it was not built): configs of the set a program cannot take.
    pub dropped: Vec<(String, Config, String)>,
    /// Wall time of the whole build.
    pub seconds: f64,
}

impl Report {
    pub fn nvcc_runs(&self) -> usize {
        self.kernels.iter().filter(|k| k.nvcc_ran).count()
    }
    pub fn cache_hits(&self) -> usize {
        self.kernels.len() - self.nvcc_runs()
    }
}

/// One program in one config: a kernel of a [`Unit`].
#[derive(Clone)]
struct Job {
    variant: usize,
    /// `<program>__<config>`.
    name: String,
    /// Its launchers' prefix, [`coda_dsl::symbol_prefix`], also its C++ namespace.
    tag: String,
    /// Its generated source.
    src: String,
    /// The content hash of `src` under the build's fingerprint, which tuning caches record.
    key: String,
}

/// What building one kernel gave: whether nvcc ran, the ptxas summary, the
/// `.cu` and the object that hold it; or nvcc's error.
type Built = Result<(bool, String, PathBuf, PathBuf), String>;

/// One translation unit to compile or find in the cache: every config of a
/// program, each in its own namespace. The configs share the CUTLASS front
/// end and host compile (~20 s of a ~47 s build with nvcc 13.0 on two cores,
/// so two configs take ~66 s together against ~95 s apart; bench/NOTES.md).
struct Unit {
    program: usize,
    kernels: Vec<Job>,
    /// The kernels' sources, in order.
    src: String,
    cu: PathBuf,
    object: PathBuf,
    gen_dir: PathBuf,
    cache: PathBuf,
    /// [`cache::object_fingerprint`], which names the object.
    objects: String,
}

impl Unit {
    /// A single config keeps the kernel's own name (`<program>__<config>`), several take the program's.
    fn new(program: usize, kernels: Vec<Job>, gen_dir: &Path, cache: &Path, objects: &str) -> Unit {
        let name = match &kernels[..] {
            [one] => one.name.clone(),
            // Config names have no `__`: the program's name is all before the last.
            _ => kernels[0].name.rsplit_once("__").map_or(kernels[0].name.as_str(), |(program, _)| program).to_string(),
        };
        let src = kernels.iter().map(|k| k.src.as_str()).collect::<Vec<_>>().join("\n");
        let key = cache::key(objects, &src);
        Unit {
            program,
            cu: gen_dir.join(format!("{name}.cu")),
            object: cache.join(format!("{name}-{}.o", &key[..16])),
            kernels,
            src,
            gen_dir: gen_dir.to_path_buf(),
            cache: cache.to_path_buf(),
            objects: objects.to_string(),
        }
    }

    /// Each kernel's result. When the unit of several configs fails, each is
    /// compiled alone, so that one config nvcc rejects costs only itself.
    fn build(&self, compiler: &cc::Tool) -> Vec<(&Job, Built)> {
        let tags: Vec<&str> = self.kernels.iter().map(|k| k.tag.as_str()).collect();
        let together = cache::write_atomic(&self.cu, &self.src).and_then(|()| compile_cached(compiler, &self.cu, &self.object, &tags));
        match together {
            Ok((ran, summaries)) => self
                .kernels
                .iter()
                .zip(summaries)
                .map(|(k, ptxas)| (k, Ok((ran, ptxas, self.cu.clone(), self.object.clone()))))
                .collect(),
            Err(e) if self.kernels.len() == 1 => vec![(&self.kernels[0], Err(e))],
            Err(_) => self
                .kernels
                .iter()
                .map(|k| {
                    let alone = Unit::new(self.program, vec![k.clone()], &self.gen_dir, &self.cache, &self.objects);
                    let (_, result) = alone.build(compiler).pop().expect("one kernel");
                    (k, result)
                })
                .collect(),
        }
    }
}

impl Build {
    /// Resolve files from here instead of `CARGO_MANIFEST_DIR`.
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
    /// The package version in launcher symbols, instead of `CARGO_PKG_VERSION`.
    pub fn version(&mut self, version: &str) -> &mut Self {
        self.version = Some(version.to_string());
        self
    }
    /// The CUDA toolkit root, unless `CODA_CUDA_HOME` is set (see [`crate::toolchain`]).
    pub fn cuda_home(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.cuda_home = Some(dir.into());
        self
    }
    /// The CUTLASS source root, unless `CODA_CUTLASS_HOME` is set.
    pub fn cutlass_home(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.cutlass_home = Some(dir.into());
        self
    }
    /// Where compiled objects are cached, instead of [`cache::default_dir`].
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
    /// Apply [`Build::configs`] (or `CODA_CONFIGS`) only to these programs,
    /// the others getting [`ConfigSet::Default`] (overridden by
    /// `CODA_CONFIG_PROGRAMS`, names separated by commas).
    pub fn config_programs<S: AsRef<str>>(&mut self, names: impl IntoIterator<Item = S>) -> &mut Self {
        self.config_programs = Some(names.into_iter().map(|n| n.as_ref().to_string()).collect());
        self
    }
    /// Compile `program` for these configs beside its own, in place of
    /// [`Build::configs`] (`CODA_CONFIGS`, when set, overrides both).
    pub fn program_configs(&mut self, program: &str, set: ConfigSet) -> &mut Self {
        self.program_configs.insert(program.to_string(), set);
        self
    }
    /// Whether to print `cargo:` directives (link and rerun rules); on by default.
    pub fn cargo_metadata(&mut self, on: bool) -> &mut Self {
        self.cargo_metadata = on;
        self
    }

    /// Generates, compiles and links; on error prints every diagnostic and
    /// exits the build script with status 1 (a panic would add a backtrace).
    pub fn compile(&self, lib_name: &str) -> Report {
        self.try_compile(lib_name).unwrap_or_else(|msg| {
            eprintln!("\n{msg}\n");
            std::process::exit(1)
        })
    }

    /// As [`Build::compile`], returning the diagnostics instead of exiting.
    pub fn try_compile(&self, lib_name: &str) -> Result<Report, String> {
        let start = Instant::now();
        let manifest_dir = self.manifest_dir.clone().map_or_else(|| env("CARGO_MANIFEST_DIR").map(PathBuf::from), Ok)?;
        let out_dir = self.out_dir.clone().map_or_else(|| env("OUT_DIR").map(PathBuf::from), Ok)?;
        let package = self.package.clone().map_or_else(|| env("CARGO_PKG_NAME"), Ok)?;
        let version = self.version.clone().map_or_else(|| env("CARGO_PKG_VERSION"), Ok)?;
        let cargo = |line: String| {
            if self.cargo_metadata {
                println!("cargo:{line}");
            }
        };
        for var in [
            "CODA_CUDA_HOME",
            "CUDA_HOME",
            "CODA_CUTLASS_HOME",
            "CODA_TOOLCHAIN_DIR",
            "XDG_CACHE_HOME",
            "HOME",
            "CODA_CACHE_DIR",
            "CODA_JOBS",
            "CODA_CONFIGS",
            "CODA_CONFIG_PROGRAMS",
        ]
        .into_iter()
        .chain(cache::COMPILER_ENV)
        {
            cargo(format!("rerun-if-env-changed={var}"));
        }
        // The toolchain's nvcc and the static CUDA runtime are the build
        // machine's: another target would fail late, in the host compile or the link.
        if let (Ok(target), Ok(host)) = (std::env::var("TARGET"), std::env::var("HOST"))
            && target != host
        {
            return Err(format!("coda: cross-compiling to {target} is not supported: the CUDA toolchain and runtime CODA links are {host}'s"));
        }
        let jobs = parallelism()?;
        // Set but empty counts as unset, as CODA_CONFIG_PROGRAMS does.
        let from_env = match std::env::var("CODA_CONFIGS") {
            Ok(v) if !v.trim().is_empty() => Some(ConfigSet::parse(&v).map_err(|e| format!("coda: CODA_CONFIGS: {e}"))?),
            _ => None,
        };
        let only = match std::env::var("CODA_CONFIG_PROGRAMS") {
            Ok(v) if !v.trim().is_empty() => Some(v.split(',').map(|n| n.trim().to_string()).collect::<Vec<_>>()),
            _ => self.config_programs.clone(),
        };
        let extra = |p: &Program| {
            let listed = only.as_ref().is_none_or(|o| o.contains(&p.name));
            let set = match (&from_env, self.program_configs.get(&p.name)) {
                (Some(set), _) if listed => set,
                (None, Some(set)) => set,
                (None, None) if listed => &self.configs,
                _ => &ConfigSet::Default,
            };
            set.configs(p)
        };
        // A file listed twice (`src/p.rs` and `./src/p.rs`) is read once.
        let mut seen = std::collections::HashSet::new();
        let paths: Vec<PathBuf> = self
            .files
            .iter()
            .map(|f| manifest_dir.join(f))
            .filter(|p| seen.insert(std::fs::canonicalize(p).unwrap_or_else(|_| p.clone())))
            .collect();
        for path in &paths {
            cargo(format!("rerun-if-changed={}", path.display()));
        }
        let programs = lower_files(&paths, extra)?;
        // A renamed program must not quietly lose its configs.
        let mut unknown: Vec<&String> =
            self.program_configs.keys().filter(|name| !programs.iter().any(|(v, _)| v.first().is_some_and(|p| &p.name == *name))).collect();
        unknown.sort();
        if let Some(name) = unknown.first() {
            return Err(format!("coda: program_configs names `{name}`, which no listed file defines"));
        }
        // Only the crate's own list: CODA_CONFIG_PROGRAMS reaches every
        // crate's build script, each of which defines some of the names.
        let defined = |name: &String| programs.iter().any(|(v, _)| v.first().is_some_and(|p| &p.name == name));
        if let Some(name) = self.config_programs.iter().flatten().find(|n| !defined(n)) {
            return Err(format!("coda: config_programs names `{name}`, which no listed file defines"));
        }

        let tc = Toolchain::find_with(self.cuda_home.as_deref(), self.cutlass_home.as_deref(), |k| std::env::var_os(k))?;
        let headers = crate::templates::write(&out_dir.join("coda-include"))?;
        let shared = self.cache_dir.clone().map_or_else(|| cache::default_dir(|k| std::env::var_os(k)), Ok)?;
        // A cache folder that cannot be written (a read-only home, a full
        // disk) would fail every nvcc run on its `-o`: compile into OUT_DIR instead.
        let cache = match cache::writable_dir(&shared) {
            Ok(()) => shared,
            Err(e) => {
                cargo(format!("warning=coda: the kernel cache {} cannot be written ({e}); compiling without it", shared.display()));
                let own = out_dir.join("coda-objects");
                std::fs::create_dir_all(&own).map_err(|e| format!("coda: cannot create {}: {e}", own.display()))?;
                own
            }
        };
        for file in [tc.nvcc(), tc.cutlass_version_header()] {
            cargo(format!("rerun-if-changed={}", file.display()));
        }
        let toolchain = tc.version()?;
        // cc tells cargo about the variables it read (CXXFLAGS and the like) when metadata is on.
        let compiler = tc
            .cc_build()
            .flag("-Xptxas=-v")
            .include(&headers)
            .cargo_metadata(self.cargo_metadata)
            .try_get_compiler()
            .map_err(|e| format!("coda: cannot set up nvcc: {e}"))?;
        let trees: Vec<PathBuf> = std::iter::once(headers).chain(tc.include_dirs()).collect();
        let env = cache::compiler_env(|k| std::env::var_os(k));
        let command = command_line(&compiler.to_command());
        let fingerprint = cache::fingerprint(&command, &trees, tc.nvcc_version_text(), &env)?;
        let host = cache::host_compiler_program(&command, |k| std::env::var_os(k));
        let objects = cache::object_fingerprint(&fingerprint, &cache::host_compiler(&host));
        // Cargo reruns this script when the host compiler's file changes (an
        // upgrade in place), not only when a target folder is new.
        if let Some(path) = cache::resolve_program(&host, |k| std::env::var_os(k)) {
            cargo(format!("rerun-if-changed={}", path.display()));
        }

        let gen_dir = out_dir.join("coda-gen");
        std::fs::create_dir_all(&gen_dir).map_err(|e| format!("coda: cannot create {}: {e}", gen_dir.display()))?;
        let mut units = vec![];
        for (pi, (variants, _)) in programs.iter().enumerate() {
            let kernels: Vec<Job> = variants
                .iter()
                .enumerate()
                .map(|(vi, p)| {
                    let src = crate::emit::emit(p, &package, &version);
                    let key = cache::key(&fingerprint, &src);
                    Job { variant: vi, name: format!("{}__{}", p.name, p.config.name()), tag: coda_dsl::symbol_prefix(&package, &version, &p.name, &p.config), src, key }
                })
                .collect();
            // ptxas names each kernel by its type, which carries the config's
            // namespace only through a functor defined there: a program whose
            // nodes are all CUTLASS's (`acc` stored as it is) compiles each
            // config alone, so that each report can be told apart.
            let own_functor = crate::plan::plan(&variants[0]).nodes.iter().any(|n| matches!(n.kind, crate::plan::EvtKind::Compute { .. }));
            if own_functor {
                units.push(Unit::new(pi, kernels, &gen_dir, &cache, &objects));
            } else {
                units.extend(kernels.into_iter().map(|k| Unit::new(pi, vec![k], &gen_dir, &cache, &objects)));
            }
        }
        let total = units.len();
        let progress = Progress::new();
        let finished = AtomicUsize::new(0);
        let built = Mutex::new(vec![]);
        let todo = Mutex::new(units.iter());
        let errors = Mutex::new(vec![]);
        std::thread::scope(|s| {
            for worker in 0..jobs {
                let (todo, built, errors, finished, progress, programs, compiler) = (&todo, &built, &errors, &finished, &progress, &programs, &compiler);
                s.spawn(move || {
                    loop {
                        let Some(_token) = token(worker, || todo.lock().unwrap().as_slice().is_empty()) else { break };
                        let Some(unit) = todo.lock().unwrap().next() else { break };
                        let t0 = Instant::now();
                        let results = unit.build(&compiler);
                        let seconds = t0.elapsed().as_secs_f64();
                        let n = finished.fetch_add(1, Ordering::Relaxed) + 1;
                        let what = if results.iter().any(|(_, r)| r.is_err()) {
                            format!("failed after {seconds:.1} s")
                        } else if results.iter().any(|(_, r)| matches!(r, Ok((true, ..)))) {
                            format!("compiled in {seconds:.1} s")
                        } else {
                            "cached".to_string()
                        };
                        let configs = unit.kernels.iter().map(|k| programs[unit.program].0[k.variant].config.name()).collect::<Vec<_>>();
                        progress.line(&format!("coda: [{n}/{total}] {} {} {what}", programs[unit.program].0[0].name, configs.join(" + ")));
                        for (k, result) in results {
                            match result {
                                Ok((nvcc_ran, ptxas, cu, object)) => {
                                    built.lock().unwrap().push((unit.program, k, nvcc_ran, seconds, ptxas, cu, object))
                                }
                                Err(e) => errors.lock().unwrap().push((unit.program, k, e)),
                            }
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
        for (pi, k, e) in errors.into_inner().unwrap() {
            if k.variant == 0 {
                fatal.push(e);
            } else {
                cargo(format!("warning=coda: {} left out of the tuning set: nvcc failed", k.name));
                failed_extra.push((pi, k, e));
            }
        }
        if !fatal.is_empty() {
            return Err(fatal.join("\n\n"));
        }
        let mut built = built.into_inner().unwrap();
        built.sort_by_key(|(pi, k, ..)| (*pi, k.variant));
        for (pi, (variants, skipped)) in programs.iter().enumerate() {
            let mut compiled = vec![];
            for (_, k, nvcc_ran, seconds, ptxas, cu, object) in built.iter().filter(|(p, ..)| *p == pi) {
                compiled.push(Compiled { program: &variants[k.variant], key: &k.key, ptxas });
                report.kernels.push(Kernel {
                    name: k.name.clone(),
                    cu: cu.clone(),
                    object: object.clone(),
                    nvcc_ran: *nvcc_ran,
                    seconds: *seconds,
                    ptxas: ptxas.clone(),
                });
            }
        let mut dropped = skipped.clone();
            for (_, k, e) in failed_extra.iter().filter(|(p, ..)| *p == pi) {
                let first = e.lines().find(|l| l.contains("error")).unwrap_or("nvcc failed").to_string();
                dropped.push((variants[k.variant].config, first));
            }
            let name = &variants[0].name;
            let table = crate::registry::variants_table(&compiled, &dropped, &package, &version, &toolchain);
            cache::write_atomic(&gen_dir.join(format!("{name}.rs")), table)?;
            report.dropped.extend(dropped.into_iter().map(|(c, why)| (name.clone(), c, why)));
        }
        remove_stale(&gen_dir, &programs.iter().map(|(v, _)| v[0].name.as_str()).collect::<Vec<_>>())?;
        report.kernels.sort_by(|a, b| a.name.cmp(&b.name));
        archive(&out_dir, lib_name, &report, self.cargo_metadata)?;
        cargo(format!("rustc-link-search=native={}", out_dir.display()));
        cargo(format!("rustc-link-lib=static={lib_name}"));
        report.seconds = start.elapsed().as_secs_f64();
        progress.line(&format!(
            "coda: {} kernels in {total} translation units ({} compiled, {} from the cache), {:.1} s",
            report.kernels.len(),
            report.nvcc_runs(),
            report.cache_hits(),
            report.seconds
        ));
        Ok(report)
    }
}

/// Removes what an earlier build generated in `gen_dir` for programs no
/// listed file defines now: a table left there would let the macro find a
/// program whose kernels are no longer linked (an undefined symbol at link
/// time instead of the macro's "no compiled kernel" error).
pub fn remove_stale(gen_dir: &Path, programs: &[&str]) -> Result<(), String> {
    let entries = std::fs::read_dir(gen_dir).map_err(|e| format!("coda: cannot read {}: {e}", gen_dir.display()))?;
    for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else { continue };
        // `<program>.rs`, `<program>.cu`, or `<program>__<config>.cu` (no program name has `__`).
        let program = stem.split_once("__").map_or(stem, |(p, _)| p);
        let generated = matches!(path.extension().and_then(|e| e.to_str()), Some("rs" | "cu"));
        if generated && !programs.contains(&program) {
            std::fs::remove_file(&path).map_err(|e| format!("coda: cannot remove {}: {e}", path.display()))?;
        }
    }
    Ok(())
}

/// Lowers the `#[epilogue]` programs of `paths`, with every error of every
/// file rendered (in source order per file), including program names used
/// twice: each names launcher symbols and a generated table, whatever
/// module or `#[cfg]` the function is under.
pub fn lower_files(paths: &[PathBuf], extra: impl Fn(&Program) -> Vec<Config> + Sync) -> Result<Vec<coda_dsl::frontend::Variants>, String> {
    // syn parses, and the frontend lowers, nested expressions by recursion:
    // a thread with a large stack turns an absurdly deep expression into an
    // error (the frontend's depth limit) rather than a stack overflow.
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .stack_size(256 << 20)
            .spawn_scoped(s, || lower_files_on_this_thread(paths, &extra))
            .map_err(|e| format!("cannot start the DSL frontend's thread: {e}"))?
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

fn lower_files_on_this_thread(paths: &[PathBuf], extra: &dyn Fn(&Program) -> Vec<Config>) -> Result<Vec<coda_dsl::frontend::Variants>, String> {
    let (mut programs, mut rendered) = (vec![], vec![]);
    let mut first_seen: HashMap<String, String> = HashMap::new();
    for path in paths {
        let src = match std::fs::read_to_string(path) {
            Ok(src) => src,
            Err(e) => {
                rendered.push(format!("error: cannot read {}: {e}\n", path.display()));
                continue;
            }
        };
        let ast = match syn::parse_file(&src) {
            Ok(ast) => ast,
            Err(e) => {
                // proc-macro2's lexer error says only "cannot parse string
                // into token stream", at the end of what it read.
                let e = if e.to_string().contains("cannot parse string into token stream") {
                    syn::Error::new(e.span(), "this file is not Rust tokens: an unbalanced bracket or an unterminated literal before here (rustc's own error says where)")
                } else {
                    e
                };
                rendered.push(render(path, &src, &e));
                continue;
            }
        };
        let mut errors = vec![];
        for f in coda_dsl::frontend::epilogue_fns(&ast) {
            let ident = &f.sig.ident;
            let here = format!("{}:{}", path.display(), ident.span().start().line);
            if let Some(first) = first_seen.get(&ident.to_string()) {
                errors.push(syn::Error::new(
                    ident.span(),
                    format!("epilogue program `{ident}` is defined twice (first at {first}); program names must be unique in one build"),
                ));
            } else {
                first_seen.insert(ident.to_string(), here);
            }
        }
        match coda_dsl::lower_file_variants(&ast, &extra) {
            Ok(v) => programs.extend(v),
            Err(e) => errors.extend(e),
        }
        errors.sort_by_key(|e| (e.span().start().line, e.span().start().column));
        rendered.extend(errors.iter().map(|e| render(path, &src, e)));
    }
    if rendered.is_empty() { Ok(programs) } else { Err(rendered.join("\n")) }
}

fn env(k: &str) -> Result<String, String> {
    std::env::var(k).map_err(|_| format!("coda: {k} is not set; call coda_codegen from a build script"))
}

/// Cargo's jobserver, when this runs in a build script: the nvcc runs of
/// all the build scripts cargo runs at once then add up to its `-j`.
fn jobserver() -> Option<&'static jobserver::Client> {
    static CLIENT: std::sync::OnceLock<Option<jobserver::Client>> = std::sync::OnceLock::new();
    // SAFETY: the descriptors named by CARGO_MAKEFLAGS belong to cargo's
    // jobserver and nothing else in a build script uses them; the OnceLock
    // takes them once per process.
    CLIENT.get_or_init(|| unsafe { jobserver::Client::from_env() }).as_ref()
}

/// Leave to run one unit, `Some` of what holds it: the first worker runs on
/// the token cargo gave this build script, the others on a free token of
/// cargo's jobserver each. While none is free they wait, and stop once
/// `done()` (the first worker takes what is left): a worker blocked on a
/// token with no unit to run would hold the build, and with it cargo's
/// other jobs, forever.
fn token(worker: usize, done: impl Fn() -> bool) -> Option<Option<jobserver::Acquired>> {
    let Some(client) = jobserver().filter(|_| worker > 0) else { return Some(None) };
    loop {
        if done() {
            return None;
        }
        match client.try_acquire() {
            Ok(Some(token)) => return Some(Some(token)),
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(50)),
            // No usable jobserver: run on this build script's token alone.
            Err(_) => return None,
        }
    }
}

/// One Hopper GEMM TU takes ~3.3 GB and ~40 s: at most `CODA_JOBS` (default: cores, max 2) at once.
fn parallelism() -> Result<usize, String> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    jobs(std::env::var("CODA_JOBS").ok().as_deref(), cores)
}

/// `CODA_JOBS` as set, else the cores up to 2; a value that is not a
/// whole number from 1 is an error, not a silent default.
fn jobs(var: Option<&str>, cores: usize) -> Result<usize, String> {
    match var {
        None => Ok(cores.clamp(1, 2)),
        Some(v) => v.trim().parse().ok().filter(|&n| n >= 1).ok_or_else(|| format!("coda: CODA_JOBS: `{v}` is not a whole number of jobs, 1 or more")),
    }
}

/// Build progress. Cargo shows a build script's output only when it fails,
/// so lines also go to the terminal when there is one.
struct Progress {
    tty: Option<Mutex<std::fs::File>>,
}

impl Progress {
    fn new() -> Progress {
        Progress { tty: std::fs::OpenOptions::new().write(true).open("/dev/tty").ok().map(Mutex::new) }
    }
    fn line(&self, line: &str) {
        eprintln!("{line}");
        if let Some(tty) = &self.tty {
            let _ = writeln!(tty.lock().unwrap(), "{line}");
        }
    }
}

/// A command's program and arguments.
fn command_line(cmd: &Command) -> Vec<OsString> {
    std::iter::once(cmd.get_program()).chain(cmd.get_args()).map(OsString::from).collect()
}

/// The object `obj` of `cu` and the ptxas summary of each of its kernels
/// (`tags`: their namespaces), stored beside it as `.ptxas`, a line each;
/// from the cache or by running nvcc; and whether nvcc ran.
fn compile_cached(compiler: &cc::Tool, cu: &Path, obj: &Path, tags: &[&str]) -> Result<(bool, Vec<String>), String> {
    let summary_path = obj.with_extension("ptxas");
    let cached = || -> Option<Vec<String>> {
        let lines: Vec<String> = std::fs::read_to_string(&summary_path).ok()?.lines().map(str::to_string).collect();
        (obj.is_file() && lines.len() == tags.len()).then_some(lines)
    };
    if let Some(lines) = cached() {
        return Ok((false, lines));
    }
    // Another build compiling this object (a second target directory, an
    // IDE's check) holds its lock: wait, then take what it stored, rather
    // than run nvcc for it again. The OS releases a lock whose process died.
    let lock_path = obj.with_extension("lock");
    let lock = std::fs::File::create(&lock_path).map_err(|e| format!("coda: cannot create {}: {e}", lock_path.display()))?;
    lock.lock().map_err(|e| format!("coda: cannot lock {}: {e}", lock_path.display()))?;
    if let Some(lines) = cached() {
        return Ok((false, lines));
    }
    let tmp = cache::temp_path(obj);
    let mut cmd = compiler.to_command();
    cmd.arg("-c").arg(cu).arg("-o").arg(&tmp);
    let shown = command_line(&cmd).iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>().join(" ");
    let out = cmd.output().map_err(|e| format!("coda: cannot run nvcc ({shown}): {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!(
            "coda: nvcc failed on {}\ncommand: {shown}\n--- nvcc output ---\n{}{stderr}",
            cu.display(),
            String::from_utf8_lossy(&out.stdout),
        ));
    }
    let summaries: Vec<String> = match tags {
        [_] => vec![ptxas_summary(&stderr)],
        _ => tags.iter().map(|t| ptxas_summary_of(&stderr, t)).collect(),
    };
    // The summary first: an object in the cache always has one.
    cache::write_atomic(&summary_path, summaries.join("\n"))?;
    std::fs::rename(&tmp, obj).map_err(|e| format!("coda: cannot store {}: {e}", obj.display()))?;
    Ok((true, summaries))
}

/// One line per kernel entry function from `nvcc -Xptxas=-v`'s output:
/// `168 registers, 1456 bytes stack, 828 bytes spill stores, 968 bytes spill loads, 0 bytes smem`
/// (entries joined with `; `).
pub fn ptxas_summary(nvcc_stderr: &str) -> String {
    summary(ptxas_entries(nvcc_stderr).into_iter().map(|(_, e)| e))
}

/// [`ptxas_summary`] of the entry functions in C++ namespace `tag` (in
/// their mangled names as `<length><tag>`), in a unit of several kernels.
fn ptxas_summary_of(nvcc_stderr: &str, tag: &str) -> String {
    let mangled = format!("{}{tag}", tag.len());
    summary(ptxas_entries(nvcc_stderr).into_iter().filter(|(name, _)| name.contains(&mangled)).map(|(_, e)| e))
}

/// (entry function, [registers, stack, spill stores, spill loads, smem]) for each entry ptxas compiled.
/// ptxas lists the properties of the functions an entry calls after the
/// entry's own: only the entry's count (a callee's are not the kernel's).
fn ptxas_entries(nvcc_stderr: &str) -> Vec<(String, [u64; 5])> {
    let number_before = |line: &str, word: &str| -> Option<u64> {
        line[..line.find(word)?].split_whitespace().last()?.parse().ok()
    };
    let mut entries: Vec<(String, [u64; 5])> = vec![];
    let mut own = false; // whether the last "Function properties" named the entry itself
    for line in nvcc_stderr.lines() {
        if let Some(at) = line.find("Compiling entry function") {
            entries.push((line[at..].to_string(), [0; 5]));
        }
        let Some((name, e)) = entries.last_mut() else { continue };
        if let Some(at) = line.find("Function properties for ") {
            let function = line[at + "Function properties for ".len()..].trim();
            own = name.contains(&format!("'{function}'"));
        } else if line.contains("bytes stack frame") {
            if !own {
                continue;
            }
            e[1] = number_before(line, " bytes stack frame").unwrap_or(0);
            e[2] = number_before(line, " bytes spill stores").unwrap_or(0);
            e[3] = number_before(line, " bytes spill loads").unwrap_or(0);
        } else if line.contains(" registers") {
            e[0] = number_before(line, " registers").unwrap_or(0);
            e[4] = number_before(line, " bytes smem").unwrap_or(0);
        }
    }
    entries
}

fn summary(entries: impl Iterator<Item = [u64; 5]>) -> String {
    let entry = |[regs, stack, stores, loads, smem]: [u64; 5]| {
        format!("{regs} registers, {stack} bytes stack, {stores} bytes spill stores, {loads} bytes spill loads, {smem} bytes smem")
    };
    let lines: Vec<String> = entries.map(entry).collect();
    if lines.is_empty() { "ptxas reported no kernel".to_string() } else { lines.join("; ") }
}

fn archive(out_dir: &Path, lib_name: &str, report: &Report, cargo_metadata: bool) -> Result<(), String> {
    let lib = out_dir.join(format!("lib{lib_name}.a"));
    let _ = std::fs::remove_file(&lib);
    let mut cmd = crate::toolchain::host_build().cargo_metadata(cargo_metadata).get_archiver();
    cmd.arg("crs").arg(&lib);
    // The kernels of one unit share an object.
    let objects: std::collections::BTreeSet<&PathBuf> = report.kernels.iter().map(|k| &k.object).collect();
    for object in objects {
        cmd.arg(object);
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
    // Tabs echo as four spaces, as rustc shows them, so that the caret
    // stays under the span.
    let cols = |line: &str, chars: usize| line.chars().take(chars).map(|c| if c == '\t' { 4 } else { 1 }).sum::<usize>();
    let blocks: Vec<String> = e
        .clone()
        .into_iter()
        .map(|err| {
            let start = err.span().start();
            let end = err.span().end();
            let line = src.lines().nth(start.line.saturating_sub(1)).unwrap_or("");
            let from = cols(line, start.column);
            let width = if end.line == start.line { cols(line, end.column).saturating_sub(from).max(1) } else { 1 };
            format!(
                "error: {err}\n  --> {}:{}:{}\n   |\n{:>3}| {}\n   | {}{}\n",
                path.display(),
                start.line,
                start.column + 1,
                start.line,
                line.replace('\t', "    "),
                " ".repeat(from),
                "^".repeat(width)
            )
        })
        .collect();
    blocks.join("\n")
}

#[cfg(test)]
mod tests {
    /// A unit of several configs is named after its program, all of it:
    /// `p_`'s must not be `p`'s file.
    #[test]
    fn a_unit_of_several_configs_takes_its_programs_whole_name() {
        let job = |config: &str| super::Job {
            variant: 0,
            name: format!("p___{config}"),
            tag: String::new(),
            src: String::new(),
            key: String::new(),
        };
        let dir = std::path::Path::new("/gen");
        let unit = super::Unit::new(0, vec![job("coop_128x256_c1x1"), job("pp_128x128_c1x2")], dir, dir, "");
        assert_eq!(unit.cu, dir.join("p_.cu"));
    }

    #[test]
    fn coda_jobs_is_a_whole_number_from_one() {
        assert_eq!(super::jobs(None, 16), Ok(2));
        assert_eq!(super::jobs(None, 1), Ok(1));
        assert_eq!(super::jobs(Some("3"), 2), Ok(3));
        for bad in ["0", "-1", "two", ""] {
            let e = super::jobs(Some(bad), 2).unwrap_err();
            assert!(e.contains(&format!("CODA_JOBS: `{bad}` is not a whole number")), "{e}");
        }
    }
}
