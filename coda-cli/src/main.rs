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
        file: PathBuf,
        /// Only this program.
        #[arg(long)]
        program: Option<String>,
        /// In this config instead of the program's own (e.g. `pp_128x128_c1x2`).
        #[arg(long)]
        config: Option<String>,
        /// The package name in the launcher symbols.
        #[arg(long, default_value = "user")]
        package: String,
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
        /// `M,N,K` (repeatable).
        #[arg(long, required = true, value_parser = parse_shape)]
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
        #[arg(long)]
        dest: Option<PathBuf>,
    },
}

fn parse_shape(s: &str) -> Result<Problem, String> {
    let v: Vec<usize> = s.split(',').map(|x| x.trim().parse::<usize>()).collect::<Result<_, _>>().map_err(|e| e.to_string())?;
    match v[..] {
        [m, n, k] => Ok(Problem { m, n, k }),
        _ => Err(format!("`{s}` is not M,N,K")),
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
            eprintln!("coda: {e}");
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
        Command::Emit { file, program, config, package } => emit(&file, program.as_deref(), config.as_deref(), &package),
        Command::Inspect { filter } => {
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
                println!("{} ({kind}{operands}, {})", k.name(), k.toolchain());
                let w = k.work();
                println!(
                    "    per element: tile loads {} B, stores {} B, {} SFU and {} ALU operations",
                    w.tile_load_bytes, w.store_bytes, w.sfu, w.alu
                );
                for (i, v) in k.variants().iter().enumerate() {
                    let own = if i == 0 { " (own)" } else { "" };
                    println!("    {:<20}{own:<6} key {}  {}", v.config().name(), v.key(), v.ptxas());
                }
            }
            Ok(())
        }
        Command::Tune { shape, program } => {
            let stream = gpu()?;
            for k in picked(kernels(), |k| k.name(), program.as_deref(), "--program")? {
                for &p in &shape {
                    let c = tune::search_and_store(k, &stream, p).map_err(|e| format!("{}: {e}", k.name()))?;
                    let k_run = if k.is_map() { coda_runtime::MAP_K } else { p.k };
                    println!("{} M={} N={} K={k_run}: {}", k.name(), p.m, p.n, c.describe());
                }
            }
            println!("cache: {}", tune::cache_path().map_or("none (no HOME)".into(), |p| p.display().to_string()));
            Ok(())
        }
        Command::Doctor => doctor::run(),
        Command::Toolchain { action: ToolchainAction::Install { dest } } => {
            let at = coda_codegen::toolchain::install(dest.as_deref())?;
            println!("toolchain installed in {}", at.display());
            Ok(())
        }
    }
}

/// The items a name filter picks: those whose name is `filter`, with or
/// without the crate's prefix (so that `rmsnorm_backward` does not also
/// pick `rmsnorm_backward_head`), or else every one whose name contains it;
/// all without a filter. An error names `arg` when nothing matches.
fn picked<T>(items: Vec<T>, name: impl Fn(&T) -> &str, filter: Option<&str>, arg: &str) -> Result<Vec<T>, String> {
    let Some(f) = filter else { return Ok(items) };
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
        print!("{}", suite::table(&rows));
    }
    if untuned {
        let which = if part == Part::Heldout { "Held-out suite (coda-user-programs::heldout" } else { "Untuned suite (coda-user-programs" };
        println!("\n{which}: default build, the default config pair, CODA_TUNE as set):");
        print!("{}{}", suite::table(&untuned_rows), suite::summary(&untuned_rows));
    }
    if let Some(path) = json {
        let json = serde_json::json!({
            "gpu": gpu,
            // Which programs "untuned" holds: the untuned suite's or the held-out suite's.
            "suite": if part == Part::Heldout { "heldout" } else { "untuned" },
            "samples": plan.samples,
            "rows": rows,
            "untuned": untuned_rows,
            "untuned_summary": suite::summary(&untuned_rows),
        });
        let text = serde_json::to_string_pretty(&json).map_err(|e| e.to_string())?;
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if let Some(path) = svg {
        let all: Vec<suite::Row> = rows.iter().chain(&untuned_rows).cloned().collect();
        let svg = chart::draw(&all, &format!("CODA fused ops / bare cuBLASLt GEMMs, {gpu}"))?;
        std::fs::write(&path, svg).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

fn emit(file: &PathBuf, program: Option<&str>, config: Option<&str>, package: &str) -> Result<(), String> {
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
    for (_, variants, dropped) in picked {
        let own = &variants[0];
        if let Some((c, why)) = dropped.first() {
            return Err(format!("{} cannot take {}: {why}", own.name, c.name()));
        }
        let p = if config.is_some() { variants.last().expect("the own config") } else { own };
        print!("{}", coda_codegen::emit(p, package, env!("CARGO_PKG_VERSION")));
    }
    Ok(())
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
