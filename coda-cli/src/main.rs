//! `coda`: the command-line companion of CODA-rs.
//!
//! - `coda bench`: times every fused op and the Llama block against their
//!   bare GEMMs on the GPU, and the untuned suite of user-style programs in
//!   their default build (tables, JSON, SVG);
//! - `coda emit FILE`: prints the CUTLASS C++ generated for a file's programs;
//! - `coda inspect`: the compiled configs of the programs in this binary,
//!   with what `ptxas -v` reported for each at build time;
//! - `coda tune --shape M,N,K`: an offline timed search that fills the tuning cache;
//! - `coda doctor`: driver, GPU, toolchain and cuBLAS, with the fix for each;
//! - `coda toolchain install`: the pinned nvcc and CUTLASS in the per-user location.

mod chart;
mod doctor;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use coda_runtime::dsl::ir::Config;
use coda_runtime::{Kernel, Problem, Stream, tune};
use coda_tests::suite;

#[derive(Parser)]
#[command(name = "coda", version, about = "CODA-rs: GEMM-epilogue programs for Hopper")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Time the fused ops and blocks, and the untuned suite, against their bare GEMMs (needs an H100/H200).
    Bench {
        /// The small plan: one shape per op.
        #[arg(long)]
        quick: bool,
        /// Which tables: the Llama ops and blocks, the untuned suite, both, or the held-out suite
        /// (a `coda` built with `--features heldout`).
        #[arg(long, value_enum, default_value_t = Part::All)]
        part: Part,
        /// Write the rows as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Write a chart of the ratios as SVG here.
        #[arg(long)]
        svg: Option<PathBuf>,
        /// Only the suite's program of this name, or else those whose name contains it (with `--part untuned` or `heldout`).
        #[arg(long)]
        program: Option<String>,
    },
    /// Print the CUTLASS C++ generated for the epilogue programs of a Rust file.
    Emit {
        /// The Rust file with the `#[coda::epilogue]` programs.
        file: PathBuf,
        /// Only the program of this name, or else those whose name contains it.
        #[arg(long)]
        program: Option<String>,
        /// In this config instead of the program's own (e.g. `pp_128x128_c1x2`).
        #[arg(long)]
        config: Option<String>,
        /// The package name in the launcher symbols (as a build of that crate names them).
        #[arg(long, default_value = "user", value_parser = parse_package)]
        package: String,
        /// The package version in the launcher symbols.
        #[arg(long, default_value = "0.1.0")]
        package_version: String,
    },
    /// List the programs linked into this binary: their compiled configs and
    /// the registers, stack, spills and shared memory ptxas reported.
    Inspect {
        /// Only the program of this name, or else those whose name contains it.
        filter: Option<String>,
    },
    /// Search every compiled config of the programs here at a GEMM shape and
    /// store the fastest in the tuning cache (needs an H100/H200; a map
    /// program's K is always 8).
    Tune {
        /// `M,N,K` (repeatable), each in 1..=2^31 − 1.
        #[arg(long, required = true, value_parser = parse_shape, allow_hyphen_values = true)]
        shape: Vec<Problem>,
        /// Only the program of this name, or else those whose name contains it.
        #[arg(long)]
        program: Option<String>,
    },
    /// Check the driver, the GPU, the CUDA toolchain and cuBLAS, and say how to fix what is missing.
    Doctor,
    /// Manage the pinned CUDA toolchain.
    Toolchain {
        #[command(subcommand)]
        action: ToolchainAction,
    },
}

/// The tables of `coda bench`.
#[derive(Clone, Copy, PartialEq, clap::ValueEnum)]
enum Part {
    Llama,
    Untuned,
    All,
    Heldout,
}

/// The programs of a suite part.
fn suite_programs(part: Part) -> Result<Vec<(&'static str, &'static Kernel, coda_runtime::dsl::Program)>, String> {
    match part {
        Part::Llama => Ok(vec![]),
        Part::Untuned | Part::All => Ok(coda_user_programs::all()),
        #[cfg(feature = "heldout")]
        Part::Heldout => Ok(coda_user_programs::heldout::all()),
        #[cfg(not(feature = "heldout"))]
        Part::Heldout => Err("--part heldout: this coda was built without the held-out suite (cargo build --release -p coda-cli --features heldout)".into()),
    }
}

#[derive(Subcommand)]
enum ToolchainAction {
    /// Install the pinned nvcc and CUTLASS wheels with pip (default: the per-user location builds look in).
    Install {
        /// Where to install (default: the per-user location builds look in).
        #[arg(long)]
        dest: Option<PathBuf>,
    },
}

/// `M,N,K`, each a whole number the GEMM and the tuner's buffers take
/// (`tune::check_problem`), checked before a GPU is looked for.
fn parse_shape(s: &str) -> Result<Problem, String> {
    let bad = || format!("`{s}` is not M,N,K: three comma-separated whole numbers, e.g. 4096,4096,4096");
    let v: Vec<usize> = s.split(',').map(|x| x.trim().parse::<usize>()).collect::<Result<_, _>>().map_err(|_| bad())?;
    let [m, n, k] = v[..] else { return Err(bad()) };
    let p = Problem { m, n, k };
    tune::check_problem(p).map_err(|e| match e {
        coda_runtime::Error::Arg { rule, .. } => rule,
        other => other.to_string(),
    })?;
    Ok(p)
}

/// A package name as cargo takes it (ASCII letters, digits, `-` and `_`):
/// the launcher symbols carry it.
fn parse_package(s: &str) -> Result<String, String> {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        Ok(s.to_string())
    } else {
        Err(format!("`{s}` is not a package name: ASCII letters, digits, `-` and `_`"))
    }
}

/// Writes `text` to standard output; a reader that closed the pipe (`| head`)
/// ends the output quietly, as for other command-line tools.
pub(crate) fn out(text: &str) -> Result<(), String> {
    use std::io::Write;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        other => other.map_err(|e| format!("writing the output: {e}")),
    }
}

/// The programs linked into this binary.
fn kernels() -> Vec<&'static Kernel> {
    let mut k = coda_llama::programs::kernels().to_vec();
    k.extend(coda_tests::programs::kernels());
    k.extend(coda_user_programs::all().into_iter().map(|(_, kernel, _)| kernel));
    // The held-out suite where this binary has it (`--features heldout`).
    k.extend(suite_programs(Part::Heldout).unwrap_or_default().into_iter().map(|(_, kernel, _)| kernel));
    k
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("CODA_LOG").unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    match run(Cli::parse().command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Messages of the libraries already say where they come from.
            eprintln!("coda: {}", e.strip_prefix("coda: ").unwrap_or(&e));
            ExitCode::FAILURE
        }
    }
}

fn gpu() -> Result<Stream, String> {
    Stream::new(0).map_err(|e| format!("needs an H100/H200: {e} (run `coda doctor`)"))
}

fn run(command: Command) -> Result<(), String> {
    match command {
        Command::Bench { quick, part, json, svg, program } => bench(quick, part, json, svg, program.as_deref()),
        Command::Emit { file, program, config, package, package_version } => {
            emit(&file, program.as_deref(), config.as_deref(), &package, &package_version)
        }
        Command::Inspect { filter } => {
            let mut text = String::new();
            for k in picked(kernels(), |k| k.name(), filter.as_deref(), "FILTER")? {
                let ops = k.operands();
                let operands = if ops.is_default() {
                    String::new()
                } else {
                    let scaled = if ops.scale == coda_runtime::dsl::ir::OperandScale::Blockwise { ", blockwise-scaled" } else { "" };
                    let fast = if ops.accum == coda_runtime::dsl::ir::Accumulation::Fast { ", fast accumulation" } else { "" };
                    format!(" of {} × {} operands{scaled}{fast}", ops.a.rust_name(), ops.b.rust_name())
                };
                let kind = if k.is_map() { "map program" } else { "GEMM epilogue" };
                text += &format!("{} ({kind}{operands}, {})\n", k.name(), k.toolchain());
                let w = k.work();
                text += &format!(
                    "    per element: tile loads {} B, stores {} B, {} SFU and {} ALU operations\n",
                    w.tile_load_bytes, w.store_bytes, w.sfu, w.alu
                );
                for (i, v) in k.variants().iter().enumerate() {
                    let own = if i == 0 { " (own)" } else { "" };
                    text += &format!("    {:<20}{own:<6} key {}  {}\n", v.config().name(), v.key(), v.ptxas());
                }
            }
            out(&text)
        }
        Command::Tune { shape, program } => {
            let programs = picked(kernels(), |k| k.name(), program.as_deref(), "--program")?;
            let stream = gpu()?;
            for k in programs {
                for &p in &shape {
                    let c = tune::search_and_store(k, &stream, p).map_err(|e| format!("{}: {e}", k.name()))?;
                    let k_run = if k.is_map() { coda_runtime::MAP_K } else { p.k };
                    out(&format!("{} M={} N={} K={k_run}: {}\n", k.name(), p.m, p.n, c.describe()))?;
                }
            }
            out(&format!("cache: {}\n", tune::cache_path().map_or("none (no HOME)".into(), |p| p.display().to_string())))
        }
        Command::Doctor => doctor::run(),
        Command::Toolchain { action: ToolchainAction::Install { dest } } => {
            let at = coda_codegen::toolchain::install(dest.as_deref())?;
            out(&format!("toolchain installed in {}\n", at.display()))
        }
    }
}

/// The items a name filter picks: those whose name is `filter`, with or
/// without the crate's prefix (so that `rmsnorm_backward` does not also
/// pick `rmsnorm_backward_head`), or else every one whose name contains it;
/// all without a filter. An error names `arg` when nothing matches.
fn picked<T>(items: Vec<T>, name: impl Fn(&T) -> &str, filter: Option<&str>, arg: &str) -> Result<Vec<T>, String> {
    let Some(f) = filter else { return Ok(items) };
    if f.is_empty() {
        return Err(format!("{arg} is empty: give a program's name or a part of it"));
    }
    let is = |n: &str| n == f || n.rsplit_once("::").is_some_and(|(_, own)| own == f);
    let exact = items.iter().any(|i| is(name(i)));
    let kept: Vec<T> = items.into_iter().filter(|i| if exact { is(name(i)) } else { name(i).contains(f) }).collect();
    if kept.is_empty() {
        return Err(format!("{arg} `{f}`: no program's name is or contains it"));
    }
    Ok(kept)
}

fn bench(quick: bool, part: Part, json: Option<PathBuf>, svg: Option<PathBuf>, program: Option<&str>) -> Result<(), String> {
    let plan = if quick { suite::Plan::quick() } else { suite::Plan::full() };
    if program.is_some() && !matches!(part, Part::Untuned | Part::Heldout) {
        return Err("--program picks programs of a suite: use it with --part untuned or --part heldout".into());
    }
    let programs = picked(suite_programs(part)?, |p| p.1.name(), program, "--program")?;
    let llama = matches!(part, Part::Llama | Part::All);
    let untuned = part != Part::Llama;
    let total = if llama { plan.rows() } else { 0 } + if untuned { programs.len() * plan.op_sizes.len() } else { 0 };
    // The output files are opened first: a path that cannot be written fails
    // now, not after the benchmark's minutes of GPU time.
    // Opened without truncating: a run that fails keeps an earlier file.
    let create = |p: &PathBuf| std::fs::OpenOptions::new().write(true).create(true).truncate(false).open(p).map_err(|e| format!("{}: {e}", p.display()));
    let (json_file, svg_file) = (json.as_ref().map(create).transpose()?, svg.as_ref().map(create).transpose()?);
    let stream = gpu()?;
    let gpu = stream.device_name().to_string();
    let bar = indicatif::ProgressBar::new(total as u64).with_style(
        indicatif::ProgressStyle::with_template("{elapsed:>4} [{bar:30}] {pos}/{len} {msg}").map_err(|e| e.to_string())?,
    );
    let progress = |r: &suite::Row| {
        bar.inc(1);
        bar.println(format!("{} {}: {:.3}× cuBLASLt", r.name, r.shape, r.vs_cublas()));
    };
    let rows = if llama { suite::run(&stream, &plan, &mut |_, r| progress(r)).map_err(|e| e.to_string())? } else { vec![] };
    let untuned_rows =
        if untuned { suite::run_untuned(&stream, &plan, &programs, &mut |_, r| progress(r)).map_err(|e| e.to_string())? } else { vec![] };
    bar.finish_and_clear();
    if llama {
        out(&suite::table(&rows))?;
    }
    if untuned {
        let which = if part == Part::Heldout { "Held-out suite (coda-user-programs::heldout" } else { "Untuned suite (coda-user-programs" };
        out(&format!("\n{which}: default build, the default config pair, CODA_TUNE as set):\n"))?;
        out(&format!("{}{}", suite::table(&untuned_rows), suite::summary(&untuned_rows)))?;
    }
    let write = |file: Option<std::fs::File>, path: &Option<PathBuf>, text: String| -> Result<(), String> {
        use std::io::Write;
        match (file, path) {
            (Some(mut f), Some(p)) => f.set_len(0).and_then(|()| f.write_all(text.as_bytes())).map_err(|e| format!("{}: {e}", p.display())),
            _ => Ok(()),
        }
    };
    if json.is_some() {
        let value = serde_json::json!({
            "gpu": gpu,
            // Which programs "untuned" holds: the untuned suite's or the held-out suite's.
            "suite": if part == Part::Heldout { "heldout" } else { "untuned" },
            "samples": plan.samples,
            "rows": rows,
            "untuned": untuned_rows,
            "untuned_summary": suite::summary(&untuned_rows),
        });
        write(json_file, &json, serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?)?;
    }
    if svg.is_some() {
        let all: Vec<suite::Row> = rows.iter().chain(&untuned_rows).cloned().collect();
        write(svg_file, &svg, chart::draw(&all, &format!("CODA fused ops / bare cuBLASLt GEMMs, {gpu}"))?)?;
    }
    Ok(())
}

fn emit(file: &PathBuf, program: Option<&str>, config: Option<&str>, package: &str, version: &str) -> Result<(), String> {
    let config = config.map(Config::from_name).transpose()?;
    // As a build lowers them: every error of the file, names used twice too.
    let programs = coda_codegen::build::lower_files(std::slice::from_ref(file), |_| config.into_iter().collect())?;
    // Named as a linked program is (`package::name`), so that `--program`
    // picks as `inspect` and `tune` do.
    let named = programs.into_iter().map(|(variants, dropped)| (format!("{package}::{}", variants[0].name), variants, dropped)).collect();
    let picked = picked(named, |p: &(String, _, _)| p.0.as_str(), program, "--program")?;
    if picked.is_empty() {
        return Err(format!("no `#[coda::epilogue]` program in {}", file.display()));
    }
    // Every program checked before any is printed: no partial output.
    if let Some((variants, (c, why))) = picked.iter().find_map(|(_, v, dropped)| dropped.first().map(|d| (v, d))) {
        return Err(format!("{} cannot take {}: {why}", variants[0].name, c.name()));
    }
    let mut text = String::new();
    for (_, variants, _) in picked {
        let p = if config.is_some() { variants.last().expect("the own config") } else { &variants[0] };
        text += &coda_codegen::emit(p, package, version);
    }
    out(&text)
}

#[cfg(test)]
mod tests {
    use super::picked;

    /// An exact name picks that program alone; otherwise a part of names
    /// picks every program containing it; nothing matching is an error
    /// naming the argument.
    #[test]
    fn a_name_filter_prefers_the_exact_name() {
        let names = vec!["coda-llama::rmsnorm_backward", "coda-llama::rmsnorm_backward_head", "linear"];
        let pick = |f| picked(names.clone(), |n| n, f, "--program");
        assert_eq!(pick(Some("rmsnorm_backward")), Ok(vec!["coda-llama::rmsnorm_backward"]));
        assert_eq!(pick(Some("coda-llama::rmsnorm_backward")), Ok(vec!["coda-llama::rmsnorm_backward"]));
        assert_eq!(pick(Some("rmsnorm")), Ok(vec!["coda-llama::rmsnorm_backward", "coda-llama::rmsnorm_backward_head"]));
        assert_eq!(pick(Some("llama::rmsnorm_backward")), Ok(vec!["coda-llama::rmsnorm_backward", "coda-llama::rmsnorm_backward_head"]));
        assert_eq!(pick(Some("linear")), Ok(vec!["linear"]));
        assert_eq!(pick(None), Ok(names.clone()));
        assert_eq!(pick(Some("swiglu")), Err("--program `swiglu`: no program's name is or contains it".to_string()));
    }

    /// Shapes and package names are checked when parsed, before a GPU or a
    /// file is looked at; an empty name filter is refused.
    #[test]
    fn arguments_are_checked_when_parsed() {
        use super::{parse_package, parse_shape};
        assert_eq!(parse_shape(" 4096, 8192,16 ").map(|p| (p.m, p.n, p.k)), Ok((4096, 8192, 16)));
        for bad in ["4096x4096x4096", "a,b,c", "1,2", "1,2,3,4", "-1,2,3", ""] {
            assert!(parse_shape(bad).unwrap_err().contains("three comma-separated whole numbers"), "{bad}");
        }
        assert!(parse_shape("0,4096,4096").unwrap_err().contains("must each be in 1..=2^31 − 1"));
        assert!(parse_shape("2147483648,1,1").unwrap_err().contains("must each be in 1..=2^31 − 1"));
        assert_eq!(parse_package("my-crate_2"), Ok("my-crate_2".to_string()));
        for bad in ["", "a::b", "ünï", "a b"] {
            assert!(parse_package(bad).unwrap_err().contains("is not a package name"), "{bad}");
        }
        assert_eq!(picked(vec!["x"], |n| n, Some(""), "FILTER"), Err("FILTER is empty: give a program's name or a part of it".to_string()));
    }

    /// Every compiled config of every linked program has ptxas's report of
    /// its own kernel (a unit of several configs splits the report by the
    /// configs' namespaces; `coda inspect` and the cost model read it).
    #[test]
    fn every_linked_variant_has_its_ptxas_report() {
        for k in super::kernels() {
            for v in k.variants() {
                let report = v.ptxas();
                assert!(
                    report.contains(" registers, ") && !report.contains("; "),
                    "{} {}: {report}",
                    k.name(),
                    v.config().name()
                );
            }
        }
    }
}
