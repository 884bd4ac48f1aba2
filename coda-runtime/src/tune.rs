//! Which compiled config, swizzle and raster order a launch runs.
//!
//! A program may be compiled for several configs (by default two for a
//! program in the default config; `CODA_CONFIGS`, see
//! `coda_codegen::ConfigSet`). Per (program, GEMM shape)
//! the choice comes from, in order: this process's earlier choice for the
//! shape; the on-disk cache of timed searches (keyed by GPU name, program,
//! toolchain and shape; an entry counts where its config is compiled here
//! from the same source, so a search over a wider build serves a narrower
//! one), then the searches libraries ship for their programs ([`ship`]);
//! then the mode (`CODA_TUNE`, or [`set_mode`]):
//! - `own`: the program's own config, CUTLASS's scheduler defaults (no cache);
//! - `heuristic` (default): the compiled config a cost model of the
//!   mainloop and the program's epilogue work ranks fastest
//!   ([`predicted_us`]), in the swizzle and raster of [`scheduler`];
//! - `search`: time every compiled config × swizzle {1, 8} × raster {M, N}
//!   once on random data, keep the fastest, and write it to the cache
//!   (`CODA_TUNE_CACHE`, default `~/.cache/coda-rs/tuning.json`).
//!
//! A choice is stable for the life of the process (per device). A search runs outside the
//! tuner's lock; if two threads search one shape at once, the first result
//! stored wins for both.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::dsl::ir::{BLayout, Config, DType, OperandScale, Schedule};
use crate::dsl::work::Work;
use crate::kernel::{Choice, MAP_K, Problem, Raster};
use crate::{Error, Kernel, Stream, Tensor, TensorArg, bf16};

/// How launches pick a config (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Own,
    Heuristic,
    Search,
}

impl Mode {
    fn from_env() -> Result<Mode, Error> {
        match std::env::var("CODA_TUNE").as_deref() {
            Err(_) | Ok("") | Ok("heuristic") => Ok(Mode::Heuristic),
            Ok("own") => Ok(Mode::Own),
            Ok("search") => Ok(Mode::Search),
            Ok(other) => Err(Error::arg("CODA_TUNE", format!("`{other}` is not `own`, `heuristic` or `search`"))),
        }
    }
}

/// One timed search result, as stored in the cache file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub gpu: String,
    pub program: String,
    pub toolchain: String,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub config: String,
    /// The content hash of the chosen config's source ([`crate::Variant::key`]).
    pub key: String,
    pub swizzle: u32,
    pub raster: Raster,
    /// Median milliseconds per launch of the winner, and of the program's own config (swizzle 1, auto raster).
    pub ms: f64,
    pub own_ms: f64,
}

#[derive(Default)]
struct Tuner {
    mode: Option<Mode>,
    /// Keyed by device ordinal too: the heuristic's choice depends on the GPU.
    chosen: HashMap<(usize, &'static str, usize, usize, usize), Choice>,
    cache: Option<Vec<Entry>>,
    shipped: Vec<Entry>,
    /// The shipped caches already parsed (by address), so [`ship`] is idempotent.
    shipped_from: Vec<usize>,
}

/// The tuner's state. A panic elsewhere while it was held leaves nothing
/// half-written that matters (choices are inserted whole), so recover.
fn tuner() -> MutexGuard<'static, Tuner> {
    static T: OnceLock<Mutex<Tuner>> = OnceLock::new();
    T.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner())
}

/// Overrides `CODA_TUNE` for this process (choices already made stay).
pub fn set_mode(mode: Mode) {
    tuner().mode = Some(mode);
}

/// Adds search results a library ships for its programs (a JSON list of
/// [`Entry`], as the cache file holds), consulted after the user's cache.
/// Entries count only where this build compiled the same source. Calling it
/// again with the same text does nothing.
pub fn ship(entries: &'static str) -> Result<(), Error> {
    let mut t = tuner();
    if t.shipped_from.contains(&(entries.as_ptr() as usize)) {
        return Ok(());
    }
    let parsed: Vec<Entry> =
        serde_json::from_str(entries).map_err(|e| Error::arg("entries", format!("is not a list of tuning entries: {e}")))?;
    t.shipped.extend(parsed);
    t.shipped_from.push(entries.as_ptr() as usize);
    Ok(())
}

/// The cache file: `CODA_TUNE_CACHE`, else `$XDG_CACHE_HOME/coda-rs/tuning.json`,
/// else `$HOME/.cache/coda-rs/tuning.json`.
pub fn cache_path() -> Option<PathBuf> {
    let var = |k| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("CODA_TUNE_CACHE")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("coda-rs/tuning.json")))
        .or_else(|| var("HOME").map(|d| d.join(".cache/coda-rs/tuning.json")))
}

fn load_cache() -> Vec<Entry> {
    let Some(path) = cache_path() else { return vec![] };
    read_cache(&path).unwrap_or_else(|e| {
        tracing::warn!("cannot read the tuning cache {} ({e}); using none", path.display());
        vec![]
    })
}

/// The entries of the cache file at `path` (none if it does not exist); a
/// file that does not parse is moved aside (`<path>.corrupt`) with a warning,
/// never silently replaced.
fn read_cache(path: &Path) -> std::io::Result<Vec<Entry>> {
    let text = match std::fs::read_to_string(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        other => other?,
    };
    Ok(serde_json::from_str(&text).unwrap_or_else(|e| {
        let aside = path.with_extension("json.corrupt");
        let moved = std::fs::rename(path, &aside).map_or_else(|e| format!("could not move it aside: {e}"), |()| format!("moved to {}", aside.display()));
        tracing::warn!("the tuning cache {} does not parse ({e}); {moved}", path.display());
        vec![]
    }))
}

/// Adds `entry` to the cache file at `path`, replacing an entry for the same
/// problem: under an advisory lock (`<path>.lock`), re-reading the file so
/// that what other processes stored meanwhile is kept, written to a unique
/// temporary file and renamed over it.
fn store_entry(path: &Path, entry: &Entry) -> Result<Vec<Entry>, Error> {
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    let io = |source: std::io::Error| Error::TuningCache { path: path.to_path_buf(), source };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let lock = std::fs::File::create(path.with_extension("json.lock")).map_err(io)?;
    lock.lock().map_err(io)?;
    let mut entries = read_cache(path).map_err(io)?;
    entries.retain(|e| (&e.gpu, &e.program, &e.toolchain, e.m, e.n, e.k) != (&entry.gpu, &entry.program, &entry.toolchain, entry.m, entry.n, entry.k));
    entries.push(entry.clone());
    let tmp = path.with_extension(format!("json.tmp{}-{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed)));
    let text = serde_json::to_string_pretty(&entries).map_err(|e| io(e.into()))?;
    std::fs::write(&tmp, text).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)?;
    Ok(entries)
}

/// The choice for `kernel` at `prob` (see the module docs).
pub fn choose(kernel: &Kernel, stream: &Stream, prob: Problem) -> Result<Choice, Error> {
    let key = (stream.ordinal(), kernel.name(), prob.m, prob.n, prob.k);
    let gpu = stream.device_name();
    let mode = {
        let mut t = tuner();
        if let Some(c) = t.chosen.get(&key) {
            return Ok(*c);
        }
        let mode = match t.mode {
            Some(m) => m,
            None => Mode::from_env()?,
        };
        let found = match mode {
            Mode::Own => Some(Choice::own(kernel)),
            _ => cached(t.cache.get_or_insert_with(load_cache), gpu, kernel, prob).or_else(|| cached(&t.shipped, gpu, kernel, prob)),
        };
        let found = found.or_else(|| (mode == Mode::Heuristic).then(|| heuristic(kernel, gpu, stream.sm_count() as usize, prob)));
        if let Some(c) = found {
            return Ok(*t.chosen.entry(key).or_insert(c));
        }
        mode
    };
    debug_assert_eq!(mode, Mode::Search);
    search_store(kernel, stream, prob, false)
}

/// Times every compiled config × swizzle × raster of `kernel` at `prob`
/// (`K = 8` for a map program), stores the fastest in the cache file and
/// makes it this process's choice: `coda tune`.
pub fn search_and_store(kernel: &Kernel, stream: &Stream, prob: Problem) -> Result<Choice, Error> {
    let prob = if kernel.is_map() { Problem { k: MAP_K, ..prob } } else { prob };
    search_store(kernel, stream, prob, true)
}

/// The search of [`search_and_store`]; unless `replace`, a choice another
/// thread made meanwhile wins and nothing is stored.
fn search_store(kernel: &Kernel, stream: &Stream, prob: Problem, replace: bool) -> Result<Choice, Error> {
    let key = (stream.ordinal(), kernel.name(), prob.m, prob.n, prob.k);
    let timed = search(kernel, stream, prob)?;
    let (best, ms) = timed[0];
    let ms_of = |c: Choice| timed.iter().find(|(t, _)| *t == c).map_or(f64::NAN, |t| t.1);
    let own_ms = ms_of(Choice::own(kernel));
    let guess = heuristic(kernel, stream.device_name(), stream.sm_count() as usize, prob);
    tracing::info!(
        "coda tune: {} M={} N={} K={}: {} {ms:.4} ms (own config {own_ms:.4} ms, heuristic's {} {:.4} ms, {} choices)",
        kernel.name(),
        prob.m,
        prob.n,
        prob.k,
        best.describe(),
        guess.config.name(),
        ms_of(guess),
        timed.len()
    );
    // Every timing, for choosing defaults across programs (`CODA_LOG=debug`).
    for (c, t) in &timed {
        tracing::debug!("coda tune: {} M={} N={} K={}: {} {t:.4} ms", kernel.name(), prob.m, prob.n, prob.k, c.describe());
    }
    let entry = Entry {
        gpu: stream.device_name().to_string(),
        program: kernel.name().to_string(),
        toolchain: kernel.toolchain().to_string(),
        m: prob.m,
        n: prob.n,
        k: prob.k,
        config: best.config.name(),
        key: kernel.variants()[best.variant].key().to_string(),
        swizzle: best.swizzle,
        raster: best.raster,
        ms,
        own_ms,
    };
    let mut t = tuner();
    if let (false, Some(c)) = (replace, t.chosen.get(&key)) {
        return Ok(*c);
    }
    // Under the tuner's lock, so this process's view and the file agree.
    let stored = cache_path().map(|p| store_entry(&p, &entry)).transpose()?;
    t.cache = Some(stored.unwrap_or_else(|| vec![entry]));
    t.chosen.insert(key, best);
    Ok(best)
}

/// The newest cache entry for this problem whose config is compiled here from the same source.
fn cached(cache: &[Entry], gpu: &str, kernel: &Kernel, prob: Problem) -> Option<Choice> {
    cache.iter().rev().filter(|e| same_problem(e, gpu, kernel, prob)).find_map(|e| {
        let v = kernel.variants().iter().position(|v| v.config().name() == e.config && v.key() == e.key)?;
        Some(Choice { variant: v, config: kernel.variants()[v].config(), swizzle: e.swizzle, raster: e.raster })
    })
}

fn same_problem(e: &Entry, gpu: &str, kernel: &Kernel, prob: Problem) -> bool {
    (e.gpu.as_str(), e.program.as_str(), e.toolchain.as_str(), e.m, e.n, e.k)
        == (gpu, kernel.name(), kernel.toolchain(), prob.m, prob.n, prob.k)
}

/// One GPU's constants of [`predicted_us`], fitted (least squares on log
/// time, `bench/fit_cost_model.py --gpu`) to its searches' timings of each
/// shape's two default configs in [`scheduler`]'s options.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CostModel {
    /// The GPU (as the driver names it) whose timings these are.
    pub gpu: &'static str,
    /// Sustained bf16 FLOPs per µs and SM, cooperative and ping-pong.
    pub coop_flops: f64,
    pub pp_flops: f64,
    /// Each tile's fixed start (µs), cooperative and ping-pong.
    pub coop_start: f64,
    pub pp_start: f64,
    /// µs per element a thread holds: the base, per byte loaded by TMA, per
    /// SFU and ALU operation; ping-pong's warpgroup pays `pp_epilogue` times more.
    pub base: f64,
    pub tma_byte: f64,
    pub sfu: f64,
    pub alu: f64,
    pub pp_epilogue: f64,
    /// Ping-pong's time grows by up to this fraction in a launch longer than
    /// `power_after_us` (`t · (1 + drop · (1 − after / t))`): under the
    /// power cap its rate falls where the cooperative schedule's holds.
    pub pp_power_drop: f64,
    pub power_after_us: f64,
    /// Bytes per µs the memory sustains (not fitted: ~83% of the HBM's peak).
    pub bandwidth: f64,
}

/// The fitted models; a GPU with none of its own gets the first. The lookup
/// is by the exact name the driver gives, since each model is one card's
/// fit: an H100 PCIe or NVL, an H800 or a GH200 gets the H200's.
///
/// The H200's: 202 timings, session 8's searches of the Llama programs and
/// session 7's untuned suite (bench/NOTES.md, session 17); session 25
/// staged `DoubleTile` inputs by TMA and dropped the fit's two terms for
/// per-thread pair loads; refitted with the pair programs searched again on
/// those kernels, it chooses as before at every shape (the two other pair
/// programs' 12 shapes held out). Stores come into it only through the
/// bandwidth floor: the fit gave them no weight.
///
/// The H100's (session 41): 133 timings, session 40's searches of the
/// shipped Llama shapes and three untuned-suite programs at long K. There
/// ping-pong 128×128 is faster in most launches of ~0.2 to 2 ms and up to
/// 1.7× slower than the cooperative 128×256 in most of those of 2.4 ms and more
/// (likely the power cap, not measured; the H200's constants, with no
/// power term, ran ping-pong everywhere); only the
/// power term separates the two. On 16 searches of four other suite
/// programs, held out: 1.0013× each shape's faster config on geomean,
/// worst 1.011× (the H200's constants: 1.053×, worst 1.26×). The H200's
/// searches chose as well without the term: its drop is 0.
pub const COST_MODELS: [CostModel; 2] = [
    CostModel {
        gpu: "NVIDIA H200",
        coop_flops: 5.433e6,
        pp_flops: 5.475e6,
        coop_start: 2.47,
        pp_start: 2.77,
        base: 0.0413,
        tma_byte: 1.67e-3,
        sfu: 7.07e-3,
        alu: 2.02e-3,
        pp_epilogue: 1.57,
        pp_power_drop: 0.0,
        power_after_us: 1000.0,
        bandwidth: 4.0e6,
    },
    CostModel {
        gpu: "NVIDIA H100 80GB HBM3",
        coop_flops: 5.861e6,
        pp_flops: 5.95e6,
        coop_start: 0.324,
        pp_start: 3.10,
        base: 0.0747,
        tma_byte: 3.06e-4,
        sfu: 0.0266,
        alu: 1.19e-3,
        pp_epilogue: 1.10,
        pp_power_drop: 0.346,
        power_after_us: 1249.0,
        bandwidth: 2.8e6,
    },
];

/// The cost model fitted on `gpu`, or the first of [`COST_MODELS`].
pub fn cost_model(gpu: &str) -> &'static CostModel {
    COST_MODELS.iter().find(|c| c.gpu == gpu).unwrap_or(&COST_MODELS[0])
}

/// The heuristic's cost model of one launch, in microseconds, with `cm`'s
/// constants. Per SM, tiles run one after another (`ceil(tiles / SMs)` of
/// them, the tile count padded to the cluster). A tile's mainloop is its
/// FLOPs at the schedule's sustained rate plus a fixed start; its epilogue
/// costs, per element each thread holds, a base plus the program's
/// [`Work`]: TMA-staged bytes, and the larger of its ALU and SFU time
/// (separate pipes). A cooperative CTA runs a tile's mainloop, then its
/// epilogue; a ping-pong CTA overlaps one warpgroup's epilogue with the
/// other's mainloop (epilogues in turn), so it is bound by the larger of the
/// two. No launch is faster than its bytes at the memory's bandwidth. A
/// long ping-pong launch pays [`CostModel::pp_power_drop`].
pub fn predicted_us(cm: &CostModel, work: &Work, c: &Config, sms: usize, prob: Problem) -> f64 {
    let pp = c.schedule == Schedule::Pingpong;
    let (flops, start) = if pp { (cm.pp_flops, cm.pp_start) } else { (cm.coop_flops, cm.coop_start) };
    // 8-bit operands: twice the tensor-core rate (Hopper's dense FP8 peak is
    // twice its bf16 peak), at the same sustained fraction (not yet fitted).
    let flops = if c.operands.is_fp8() { 2.0 * flops } else { flops };
    let pp_epilogue = if pp { cm.pp_epilogue } else { 1.0 };

    let (m, n, k) = (prob.m as f64, prob.n as f64, prob.k as f64);
    let tiles_m = prob.m.div_ceil(c.tile_m).div_ceil(c.cluster_m) * c.cluster_m;
    let tiles_n = prob.n.div_ceil(c.tile_n).div_ceil(c.cluster_n) * c.cluster_n;
    let per_sm = (tiles_m * tiles_n).div_ceil(sms.max(1)) as f64;
    let tile = (c.tile_m * c.tile_n) as f64;
    let mainloop = 2.0 * tile * k / flops + start;
    let per_thread = tile / if pp { 128.0 } else { 256.0 };
    let w = work;
    let element = cm.base + cm.tma_byte * w.tile_load_bytes as f64 + (cm.alu * w.alu as f64).max(cm.sfu * w.sfu as f64);
    let epilogue = per_thread * pp_epilogue * element;
    let t = if pp { per_sm * mainloop.max(epilogue) + mainloop.min(epilogue) } else { per_sm * (mainloop + epilogue) };
    let bytes = c.operands.a.bytes() as f64 * (m + n) * k + m * n * (w.tile_load_bytes + w.store_bytes) as f64;
    let t = t.max(bytes / cm.bandwidth);
    if pp { t * (1.0 + cm.pp_power_drop * (1.0 - cm.power_after_us / t).max(0.0)) } else { t }
}

/// The compiled config [`predicted_us`] ranks fastest (the first, the own
/// config, on a tie), in the scheduler options of [`scheduler`].
fn heuristic(kernel: &Kernel, gpu: &str, sms: usize, prob: Problem) -> Choice {
    let (work, cm) = (kernel.work(), cost_model(gpu));
    let t = |c: Config| predicted_us(cm, &work, &c, sms, prob);
    let (variant, v) = kernel
        .variants()
        .iter()
        .enumerate()
        .min_by(|(_, a), (_, b)| t(a.config()).total_cmp(&t(b.config())))
        .expect("a kernel has its own config");
    let (swizzle, raster) = scheduler(&v.config(), prob);
    Choice { variant, config: v.config(), swizzle, raster }
}

/// The heuristic's swizzle and raster order: on a grid of at least 32 × 32
/// tiles, swizzle 8 along M (neighbouring CTAs share operand tiles that a
/// plain walk of such a grid evicts from the L2 before their reuse); else
/// swizzle 1, walking along M unless the grid has more rows of tiles than
/// columns (CUTLASS's own choice walks along N on a square grid, up to 1.25×
/// slower there). Against CUTLASS's defaults, on the H200 searches of
/// sessions 7, 8 and 10 (91, 91 and 152 program × shape × config timings
/// that include CUTLASS's defaults; bench/NOTES.md, session 10): 1.028 →
/// 1.010, 1.030 → 1.012 and 1.016 → 1.002 of each search's best on geomean,
/// worst 1.41–1.43× → 1.02–1.10×.
///
/// Except with a 1 × n cluster (n ≥ 2), K ≥ 24576 and ≥ 64 rows of tiles:
/// there swizzle 1 along M, measured, not explained. At the d = 8192
/// block's long-K shapes (16384 × 8192 × 28672 and × 57344) swizzle 8 ran
/// those configs up to 1.46× their best on an H100 and 1.30× on the H200,
/// swizzle 1 within 1.7% of it; on the H200, on 2 × 2 clusters, at shorter
/// K (≤ 22016) or 32 rows of tiles swizzle 8 stayed ahead (by up to 6%),
/// while the H100 took swizzle 1 from K = 11008 (by 7.5–25%). Searches of
/// sessions 7, 8, 31 (H200) and 40 (H100); bench/NOTES.md, session 40.
///
/// And, for a config without a cluster along N, on a grid of ≥ 128 rows of
/// tiles but fewer than 32 columns (8 or more) at K ≥ 11008 (a down_proj:
/// 16384 × 4096 × 11008 and longer), swizzle 8 along M too. There the H100
/// ran the cooperative 128 × 256 in swizzle 1 along N 1.08–1.26× its best
/// order (4 searches), in swizzle 8 along M within 1.9%; on the H200 the
/// two are within 2% (14 searches). Held out on an H100 (session 42), 10
/// searches at five other shapes: 1.00–1.27× → ≤ 1.013×. Ping-pong 128 ×
/// 128 1 × 2 there would gain nothing (swizzle 8 along M 1.000–1.025× its
/// best, 9 searches), so keeps its order. `bench/scheduler_rule.py` ranks
/// the rule on those logs; bench/NOTES.md, session 42.
fn scheduler(c: &Config, prob: Problem) -> (u32, Raster) {
    let (rows, cols) = (prob.m.div_ceil(c.tile_m), prob.n.div_ceil(c.tile_n));
    if rows.min(cols) >= 32 {
        let long_k = c.cluster_m == 1 && c.cluster_n >= 2 && prob.k >= 24576 && rows >= 64;
        (if long_k { 1 } else { 8 }, Raster::AlongM)
    } else if c.cluster_n == 1 && rows >= 128 && cols >= 8 && prob.k >= 11008 {
        (8, Raster::AlongM)
    } else if cols >= rows {
        (1, Raster::AlongM)
    } else {
        (1, Raster::AlongN)
    }
}

struct Rng(u64);

impl Rng {
    fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        lo + (hi - lo) * ((self.0 >> 40) as f32 / (1u64 << 24) as f32)
    }
}

enum Buf {
    Bf16(Tensor<bf16>),
    F32(Tensor<f32>),
    I32(Tensor<i32>),
    E4m3(Tensor<crate::e4m3>),
    E5m2(Tensor<crate::e5m2>),
}

impl Buf {
    fn any(&self) -> &dyn crate::AnyTensor {
        match self {
            Buf::Bf16(t) => t,
            Buf::F32(t) => t,
            Buf::I32(t) => t,
            Buf::E4m3(t) => t,
            Buf::E5m2(t) => t,
        }
    }
    fn arg(&mut self, output: bool) -> TensorArg<'_> {
        match (self, output) {
            (Buf::Bf16(t), true) => TensorArg::output(t),
            (Buf::F32(t), true) => TensorArg::output(t),
            (Buf::I32(t), true) => TensorArg::output(t),
            (Buf::E4m3(t), true) => TensorArg::output(t),
            (Buf::E5m2(t), true) => TensorArg::output(t),
            (b, false) => TensorArg::In(b.any()),
        }
    }
}

/// A searchable shape: M, N, K in 1..=2^31 − 1 (what a launch takes) and
/// operand and output sizes that fit in memory arithmetic.
pub fn check_problem(Problem { m, n, k }: Problem) -> Result<(), Error> {
    if ![m, n, k].iter().all(|x| (1..=i32::MAX as usize).contains(x)) {
        return Err(Error::arg("prob", format!("M = {m}, N = {n}, K = {k} must each be in 1..=2^31 − 1")));
    }
    for (what, a, b) in [("M·K", m, k), ("N·K", n, k), ("M·N", m, n)] {
        if a.checked_mul(b).and_then(|x| x.checked_mul(8)).is_none() {
            return Err(Error::arg("prob", format!("{what} = {a}·{b} elements overflow the address arithmetic")));
        }
    }
    Ok(())
}

/// Values in [0.5, 1.5): scales, norms' statistics.
fn uniform_f32(stream: &Stream, dims: &[usize], rng: &mut Rng) -> Result<Tensor<f32>, Error> {
    Tensor::from_host(stream, &(0..dims.iter().product::<usize>()).map(|_| rng.uniform(0.5, 1.5)).collect::<Vec<_>>(), dims)
}

fn uniform_bf16(stream: &Stream, dims: &[usize], rng: &mut Rng) -> Result<Tensor<bf16>, Error> {
    let len = dims.iter().product::<usize>();
    Tensor::from_host(stream, &(0..len).map(|_| bf16::from_f32(rng.uniform(-1.0, 1.0))).collect::<Vec<_>>(), dims)
}

fn random(stream: &Stream, dtype: DType, dims: &[usize], rng: &mut Rng, n: usize) -> Result<Buf, Error> {
    let len = dims.iter().product::<usize>();
    Ok(match dtype {
        DType::Bf16 => Buf::Bf16(uniform_bf16(stream, dims, rng)?),
        DType::F32 => Buf::F32(uniform_f32(stream, dims, rng)?),
        DType::E4m3 => Buf::E4m3(Tensor::from_host(stream, &(0..len).map(|_| crate::e4m3::from_f32(rng.uniform(-1.0, 1.0))).collect::<Vec<_>>(), dims)?),
        DType::E5m2 => Buf::E5m2(Tensor::from_host(stream, &(0..len).map(|_| crate::e5m2::from_f32(rng.uniform(-1.0, 1.0))).collect::<Vec<_>>(), dims)?),
        // Index vectors (targets) in [0, N).
        DType::I32 => Buf::I32(Tensor::from_host(
            stream,
            &(0..len).map(|_| (rng.uniform(0.0, 1.0) * n as f32) as i32 % n.max(1) as i32).collect::<Vec<_>>(),
            dims,
        )?),
    })
}

/// Times every compiled config × swizzle {1, 8} × raster {M, N} (and the
/// own config with CUTLASS's defaults) at `prob` on random data, samples
/// interleaved after a short warm-up (medians of 7); fastest first, in
/// milliseconds per launch.
/// [`Error::Arg`] naming `prob` for a shape the search cannot time.
pub fn search(kernel: &Kernel, stream: &Stream, prob: Problem) -> Result<Vec<(Choice, f64)>, Error> {
    check_problem(prob)?;
    // The heuristic's choices are among these (its swizzle and raster are).
    let mut choices = vec![Choice::own(kernel)];
    for (i, v) in kernel.variants().iter().enumerate() {
        for swizzle in [1, 8] {
            for raster in [Raster::AlongM, Raster::AlongN] {
                choices.push(Choice { variant: i, config: v.config(), swizzle, raster });
            }
        }
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let Problem { m, n, k } = prob;
    // A map program's launches make their own empty GEMM.
    let operands = if kernel.is_map() {
        None
    } else {
        let b_dims = match kernel.b_layout() {
            BLayout::Nk => [n, k],
            BLayout::Kn => [k, n],
        };
        let ops = kernel.operands();
        let scales = match ops.scale {
            OperandScale::Blockwise => {
                let [sa, sb] = crate::scale_dims(prob);
                Some((uniform_f32(stream, &sa, &mut rng)?, uniform_f32(stream, &sb, &mut rng)?))
            }
            OperandScale::None => None,
        };
        Some((random(stream, ops.a, &[m, k], &mut rng, n)?, random(stream, ops.b, &b_dims, &mut rng, n)?, scales))
    };
    // One set of tensors shared by every choice (configs run one at a time
    // on the stream), except partials, whose layout depends on the config's
    // tile: those (a few bytes per row or column) per compiled config.
    let own = Choice::own(kernel);
    let mut shared = vec![];
    for p in kernel.params() {
        shared.push(if p.shape.is_partial() { None } else { Some(random(stream, p.dtype, &own.dims(p.shape, m, n)?, &mut rng, n)?) });
    }
    let mut partials = vec![];
    for v in kernel.variants() {
        let c = Choice { config: v.config(), ..own };
        let mut bufs = vec![];
        for p in kernel.params().iter().filter(|p| p.shape.is_partial()) {
            bufs.push(random(stream, p.dtype, &c.dims(p.shape, m, n)?, &mut rng, n)?);
        }
        partials.push(RefCell::new(bufs));
    }
    let shared = RefCell::new(shared);
    let scalars = vec![1.0f32; kernel.scalars().len()];
    let launch = |c: Choice| -> Result<(), Error> {
        let mut shared = shared.borrow_mut();
        let mut own_partials = partials[c.variant].borrow_mut();
        let mut own_partials = own_partials.iter_mut();
        let bufs = shared.iter_mut().map(|b| match b {
            Some(b) => b,
            None => own_partials.next().expect("one buffer per partial parameter"),
        });
        let mut args: Vec<TensorArg> = bufs.zip(kernel.params()).map(|(b, p)| b.arg(p.output)).collect();
        match &operands {
            Some((a, b, None)) => kernel.launch(stream, &c, a.any(), b.any(), &mut args, &scalars),
            Some((a, b, Some((sa, sb)))) => kernel.launch_scaled(stream, &c, a.any(), b.any(), sa, sb, &mut args, &scalars),
            None => kernel.launch_map(stream, &c, &mut args, &scalars),
        }
    };
    let launch = &launch;
    let mut closures: Vec<_> = choices.iter().map(|&c| move |_: usize| launch(c)).collect();
    let mut refs: Vec<crate::bench::Launch<'_>> = closures.iter_mut().map(|f| f as crate::bench::Launch<'_>).collect();
    // Enough back-to-back launches per sample for ≥ 1 ms of work, 7 samples each.
    let probe = crate::bench::interleaved(stream, Duration::ZERO, 1, 1, &mut refs[..1])?[0];
    let reps = ((1.0 / probe).ceil() as usize).clamp(1, 10);
    let ms = crate::bench::interleaved(stream, Duration::from_millis(200), 7, reps, &mut refs)?;
    let mut timed: Vec<(Choice, f64)> = choices.into_iter().zip(ms).collect();
    timed.sort_by(|x, y| x.1.total_cmp(&y.1));
    Ok(timed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::Variant;
    use crate::kernel::tests::{never_run, never_size};
    fn variant(name: &str) -> Variant {
        // SAFETY: never launched.
        unsafe { Variant::new(Config::from_name(name).unwrap(), "k", "", never_run, never_size) }
    }
    fn kernel(name: &'static str, variants: &'static [Variant], toolchain: &'static str, work: Work) -> Kernel {
        // SAFETY: never launched.
        unsafe { Kernel::new(name, BLayout::Nk, false, &[], &[], variants, toolchain, work) }
    }

    fn test_entry() -> Entry {
        Entry {
            gpu: "H200".into(),
            program: "p".into(),
            toolchain: "tc".into(),
            m: 0,
            n: 8,
            k: 8,
            config: "coop_128x256_c1x1".into(),
            key: "k".into(),
            swizzle: 1,
            raster: Raster::AlongM,
            ms: 1.0,
            own_ms: 1.0,
        }
    }

    /// A cache entry serves a build that compiled its config from the same
    /// source (whatever else the build has), for the same GPU, program,
    /// toolchain and shape; the newest matching entry wins.
    #[test]
    fn cache_entries_match_by_config_source() {
        let variants: &'static [Variant] = Box::leak(Box::new([variant("coop_128x256_c1x1"), variant("pp_128x128_c1x2")]));
        let kernel = kernel("p", variants, "tc", Work::ZERO);
        let prob = Problem { m: 4096, n: 4096, k: 4096 };
        let entry = |config: &str, key: &str, swizzle| Entry {
            gpu: "H200".into(),
            program: "p".into(),
            toolchain: "tc".into(),
            m: 4096,
            n: 4096,
            k: 4096,
            config: config.into(),
            key: key.into(),
            swizzle,
            raster: Raster::AlongN,
            ms: 1.0,
            own_ms: 1.1,
        };
        let json = serde_json::to_string(&vec![entry("pp_128x128_c1x2", "k", 8)]).unwrap();
        let cache: Vec<Entry> = serde_json::from_str(&json).unwrap();
        let c = cached(&cache, "H200", &kernel, prob).unwrap();
        assert_eq!((c.variant, c.swizzle, c.raster), (1, 8, Raster::AlongN));
        assert_eq!(cached(&cache, "H100", &kernel, prob), None, "another GPU");
        assert_eq!(cached(&cache, "H200", &kernel, Problem { k: 8192, ..prob }), None, "another shape");
        let stale = [entry("pp_128x128_c1x2", "old source", 8)];
        assert_eq!(cached(&stale, "H200", &kernel, prob), None, "the config's source changed");
        let absent = [entry("coop_256x128_c1x2", "k", 8)];
        assert_eq!(cached(&absent, "H200", &kernel, prob), None, "not compiled in this build");
        let newer = [entry("pp_128x128_c1x2", "k", 8), entry("coop_128x256_c1x1", "k", 2)];
        assert_eq!(cached(&newer, "H200", &kernel, prob).map(|c| (c.variant, c.swizzle)), Some((0, 2)));
    }

    /// Two processes (here: threads with their own file handles) storing
    /// searches at once keep both entries; a cache that does not parse is
    /// moved aside, not overwritten.
    #[test]
    fn concurrent_stores_merge_and_corrupt_files_are_kept() {
        let dir = std::env::temp_dir().join(format!("coda-tune-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("tuning.json");
        let entry = |m: usize| Entry { m, ..test_entry() };
        std::thread::scope(|s| {
            for t in 0..8 {
                let path = &path;
                s.spawn(move || {
                    for i in 0..10 {
                        store_entry(path, &entry(100 * t + i)).unwrap();
                    }
                });
            }
        });
        let mut ms: Vec<usize> = read_cache(&path).unwrap().iter().map(|e| e.m).collect();
        ms.sort();
        assert_eq!(ms, (0..8).flat_map(|t| (0..10).map(move |i| 100 * t + i)).collect::<Vec<_>>());
        store_entry(&path, &Entry { ms: 0.5, ..entry(0) }).unwrap();
        assert_eq!(read_cache(&path).unwrap().iter().filter(|e| e.m == 0).map(|e| e.ms).collect::<Vec<_>>(), [0.5], "replaced, not duplicated");
        std::fs::write(&path, "{ not json").unwrap();
        assert!(read_cache(&path).unwrap().is_empty());
        assert_eq!(std::fs::read_to_string(dir.join("tuning.json.corrupt")).unwrap(), "{ not json");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The search refuses shapes it cannot allocate or launch, before any GPU work.
    #[test]
    fn search_shapes_are_checked() {
        let p = |m, n, k| check_problem(Problem { m, n, k });
        assert!(p(4096, 4096, 4096).is_ok());
        for bad in [p(0, 8, 8), p(8, 1 << 31, 8), p(8, 8, usize::MAX)] {
            assert!(matches!(bad, Err(Error::Arg { ref name, .. }) if name == "prob"), "{bad:?}");
        }
        assert!(p(1 << 20, 1 << 20, 1 << 20).is_ok());
        assert!(p(i32::MAX as usize, i32::MAX as usize, 8).is_err(), "2^62 elements of 8 bytes overflow");
    }

    /// Run only as a child of `two_processes_storing_at_once_keep_both`:
    /// stores 20 entries into the cache its environment names.
    #[test]
    #[ignore = "a child process of two_processes_storing_at_once_keep_both"]
    fn cache_writer_process() {
        let path = PathBuf::from(std::env::var("CODA_TUNE_TEST_CACHE").expect("set by the parent test"));
        let id: usize = std::env::var("CODA_TUNE_TEST_WRITER").expect("set by the parent test").parse().unwrap();
        for i in 0..20 {
            store_entry(&path, &Entry { m: 100 * id + i, ..test_entry() }).unwrap();
        }
    }

    /// Two processes storing into one cache file at once keep every entry
    /// of both (the advisory lock spans processes, not only threads).
    #[test]
    fn two_processes_storing_at_once_keep_both() {
        let dir = std::env::temp_dir().join(format!("coda-tune-procs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tuning.json");
        let exe = std::env::current_exe().unwrap();
        let children: Vec<_> = (1..=2)
            .map(|id| {
                std::process::Command::new(&exe)
                    .args(["--exact", "tune::tests::cache_writer_process", "--ignored", "--quiet"])
                    .env("CODA_TUNE_TEST_CACHE", &path)
                    .env("CODA_TUNE_TEST_WRITER", id.to_string())
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut c in children {
            assert!(c.wait().unwrap().success());
        }
        let mut ms: Vec<usize> = read_cache(&path).unwrap().iter().map(|e| e.m).collect();
        ms.sort();
        assert_eq!(ms, (1..=2).flat_map(|id| (0..20).map(move |i| 100 * id + i)).collect::<Vec<_>>());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A panic while the tuner's lock was held does not turn every later
    /// choice into a panic.
    #[test]
    fn a_poisoned_tuner_recovers() {
        let _ = std::thread::spawn(|| {
            let _held = tuner();
            panic!("a panic while tuning");
        })
        .join();
        let before = tuner().mode;
        set_mode(Mode::Own);
        assert_eq!(tuner().mode, Some(Mode::Own));
        tuner().mode = before;
    }

    /// The heuristic runs the compiled config the GPU's model ranks fastest:
    /// the own one on a tie; on the H200 ping-pong 128×128 for a large plain
    /// GEMM and for a large pair epilogue, the cooperative 128×256 for a
    /// grid smaller than one wave (as the H200's searches of `dswiglu`
    /// found: ping-pong at 16384×8192×2048, coop at 1000×4096×1024).
    #[test]
    fn heuristic_takes_the_fastest_predicted_config() {
        let variants: &'static [Variant] = Box::leak(Box::new([variant("coop_128x256_c1x1"), variant("pp_128x128_c1x2")]));
        let store = Work { store_bytes: 2.0, ..Work::ZERO };
        let pairs = Work { tile_load_bytes: 4.0, store_bytes: 4.0, sfu: 2.0, alu: 13.0, ..Work::ZERO };
        let pick = |work, m, n, k| heuristic(&kernel("t", variants, "", work), "NVIDIA H200", 132, Problem { m, n, k }).config.name();
        assert_eq!(pick(store, 16384, 4096, 4096), "pp_128x128_c1x2");
        assert_eq!(pick(store, 1000, 256, 256), "coop_128x256_c1x1");
        assert_eq!(pick(pairs, 16384, 8192, 2048), "pp_128x128_c1x2");
        assert_eq!(pick(pairs, 16384, 28672, 8192), "pp_128x128_c1x2");
        assert_eq!(pick(pairs, 1000, 4096, 1024), "coop_128x256_c1x1");
        // On the H100 the cooperative tile in a long launch (its searches: ping-pong 1.2–1.7× slower);
        // a GPU with no model of its own gets the H200's.
        let on = |gpu, m, n, k| heuristic(&kernel("t", variants, "", store), gpu, 132, Problem { m, n, k }).config.name();
        assert_eq!(on("NVIDIA H100 80GB HBM3", 16384, 4096, 22016), "coop_128x256_c1x1");
        assert_eq!(on("NVIDIA H100 80GB HBM3", 4096, 4096, 4096), "pp_128x128_c1x2", "a launch of ~0.2 ms");
        assert_eq!(on("NVIDIA H200", 16384, 4096, 22016), "pp_128x128_c1x2");
        assert_eq!(on("NVIDIA GH200 480GB", 16384, 4096, 22016), "pp_128x128_c1x2");
        assert_eq!(cost_model("NVIDIA GH200 480GB"), &COST_MODELS[0]);
        let alone: &'static [Variant] = Box::leak(Box::new([variant("pp_128x192_c2x1")]));
        assert_eq!(heuristic(&kernel("t", alone, "", store), "NVIDIA H200", 132, Problem { m: 8, n: 8, k: 8 }).config.name(), "pp_128x192_c2x1");
    }

    /// Swizzle 8 along M from a 32 × 32 grid of tiles (swizzle 1 at long K
    /// on a 1 × n cluster) and on tall grids at long K without one; else
    /// swizzle 1 along M unless the grid is taller than wide.
    #[test]
    fn scheduler_options_follow_the_grid() {
        let pp = Config::from_name("pp_128x128_c1x2").unwrap();
        let at = |m, n| scheduler(&pp, Problem { m, n, k: 64 });
        assert_eq!(at(4096, 4096), (8, Raster::AlongM), "32 × 32 tiles");
        assert_eq!(at(4097, 4095), (8, Raster::AlongM), "33 × 32 tiles, ragged");
        assert_eq!(at(4096, 3968), (1, Raster::AlongN), "32 × 31 tiles");
        assert_eq!(at(3968, 4096), (1, Raster::AlongM), "31 × 32 tiles");
        assert_eq!(at(16384, 2048), (1, Raster::AlongN), "128 × 16 tiles");
        assert_eq!(at(1000, 1000), (1, Raster::AlongM), "8 × 8 tiles");
        // Long K on a 1 × 2 cluster: swizzle 1 from K = 24576 and 64 rows of tiles.
        let long = |c: &str, m, n, k| scheduler(&Config::from_name(c).unwrap(), Problem { m, n, k });
        assert_eq!(long("pp_128x128_c1x2", 16384, 8192, 28672), (1, Raster::AlongM));
        assert_eq!(long("pp_128x128_c1x2", 16384, 8192, 22016), (8, Raster::AlongM), "K below 24576");
        assert_eq!(long("pp_128x128_c1x2", 4096, 8192, 32768), (8, Raster::AlongM), "32 rows of tiles");
        assert_eq!(long("coop_128x256_c1x1", 16384, 8192, 28672), (8, Raster::AlongM), "no cluster along N");
        assert_eq!(long("pp_128x128_c2x2", 16384, 8192, 28672), (8, Raster::AlongM), "a 2 × 2 cluster");
        // Tall and narrow at long K: swizzle 8 from 128 rows, 8 columns and K = 11008.
        assert_eq!(long("coop_128x256_c1x1", 16384, 4096, 11008), (8, Raster::AlongM), "128 × 16 tiles");
        assert_eq!(long("coop_128x256_c1x1", 16384, 4096, 8192), (1, Raster::AlongN), "K below 11008");
        assert_eq!(long("coop_128x256_c1x1", 16256, 4096, 22016), (1, Raster::AlongN), "127 rows of tiles");
        assert_eq!(long("coop_128x256_c1x1", 16384, 1792, 22016), (1, Raster::AlongN), "7 columns of tiles");
        assert_eq!(long("coop_128x256_c2x1", 16384, 4096, 11008), (8, Raster::AlongM), "a cluster along M");
        assert_eq!(long("pp_128x128_c1x2", 16384, 2048, 14336), (1, Raster::AlongN), "a cluster along N");
    }

    /// Ping-pong's power term: nothing in a launch shorter than
    /// `power_after_us`, `t · (1 + drop · (1 − after / t))` past it, after
    /// the bandwidth floor; the cooperative schedule never pays it.
    #[test]
    fn long_ping_pong_launches_pay_the_power_term() {
        let store = Work { store_bytes: 2.0, ..Work::ZERO };
        let (h100, h200) = (cost_model("NVIDIA H100 80GB HBM3"), cost_model("NVIDIA H200"));
        let without = CostModel { pp_power_drop: 0.0, ..*h100 };
        let (pp, coop) = (Config::from_name("pp_128x128_c1x2").unwrap(), Config::from_name("coop_128x256_c1x1").unwrap());
        let t = |cm: &CostModel, c: &Config, m, n, k| predicted_us(cm, &store, c, 132, Problem { m, n, k });
        let short = (4096, 4096, 4096);
        assert!(t(&without, &pp, short.0, short.1, short.2) < h100.power_after_us);
        assert_eq!(t(h100, &pp, short.0, short.1, short.2), t(&without, &pp, short.0, short.1, short.2));
        // A compute-bound launch and one at the bandwidth floor (3.1 ms of bytes).
        for (m, n, k, at_floor) in [(16384, 8192, 28672, false), (64, 262144, 16384, true)] {
            let plain = t(&without, &pp, m, n, k);
            assert!(plain > h100.power_after_us, "{plain}");
            let floor = 2.0 * ((m + n) * k + m * n) as f64 / h100.bandwidth;
            assert_eq!(plain == floor, at_floor, "{m}×{n}×{k}: {plain} µs, floor {floor}");
            let want = plain * (1.0 + h100.pp_power_drop * (1.0 - h100.power_after_us / plain));
            assert!((t(h100, &pp, m, n, k) - want).abs() <= 1e-9 * want, "{m}×{n}×{k}");
            assert_eq!(t(h100, &coop, m, n, k), t(&without, &coop, m, n, k));
        }
        assert_eq!(h200.pp_power_drop, 0.0);
    }

    /// A launch whose bytes outweigh its tiles' work is predicted at its
    /// bytes over the bandwidth: 64 rows against a 65536 × 8192 weight.
    #[test]
    fn predictions_respect_the_bandwidth() {
        let store = Work { store_bytes: 2.0, ..Work::ZERO };
        let c = Config::from_name("coop_128x256_c1x1").unwrap();
        let (m, n, k) = (64, 65536, 8192);
        let bytes = 2.0 * (m + n) as f64 * k as f64 + 2.0 * (m * n) as f64;
        for cm in &COST_MODELS {
            assert_eq!(predicted_us(cm, &store, &c, 132, Problem { m, n, k }), bytes / cm.bandwidth);
        }
    }
}
