//! The benchmark suite behind `coda bench`: every fused op and the block at
//! the shapes of issue D, each timed against the bare GEMMs of the same
//! shapes through cuBLASLt and through our own plain CUTLASS GEMM, in one
//! process with `coda_runtime::bench::interleaved` (≥ 1 s warm-up, samples
//! interleaved, medians, inputs rotated across sets larger than the L2).

use std::cell::RefCell;
use std::time::Duration;

use coda_llama::blas::Cublas;
use crate::baseline::CublasLt;
use coda_runtime::dsl::Program;
use coda_llama::programs::{linear_residual_rms_partial, linear_rowscale_rope, linear_rowscale_swiglu};
use coda_llama::{HeadBackwardState, HeadGrads, HeadState, HeadWeights, head_forward, head_forward_backward};
use coda_runtime::{Error, Kernel, Stream, Tensor, bench, bf16};
use crate::host::Rng;
use serde::Serialize;

use crate::block;
use crate::harness::Setup;
use crate::programs::{linear, swiglu};

/// One benchmark row: the fused op against the bare GEMMs it contains.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub name: String,
    pub shape: String,
    /// The bare GEMMs the fused time is compared with.
    pub gemms: String,
    pub fused_ms: f64,
    pub cublas_ms: f64,
    /// Our plain CUTLASS GEMM of the same shapes, where it covers all of them.
    pub cutlass_ms: Option<f64>,
    /// What else the row needs said: the configs a single-GEMM row ran, the
    /// LM head's extra device memory.
    pub note: String,
}

impl Row {
    pub fn vs_cublas(&self) -> f64 {
        self.fused_ms / self.cublas_ms
    }
}

/// Sizes and timing effort.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    pub op_sizes: &'static [usize],
    pub blocks: &'static [(usize, usize)],
    pub tokens: usize,
    pub vocab: usize,
    pub samples: usize,
}

impl Plan {
    pub fn full() -> Plan {
        Plan { op_sizes: &[4096, 8192], blocks: &[(2048, 8192), (4096, 11008), (8192, 28672)], tokens: 16384, vocab: 32768, samples: 50 }
    }
    pub fn quick() -> Plan {
        Plan { op_sizes: &[4096], blocks: &[(2048, 8192)], tokens: 16384, vocab: 32768, samples: 10 }
    }
    /// Rows `run` produces, for progress.
    pub fn rows(&self) -> usize {
        6 * self.op_sizes.len() + 2 * self.blocks.len()
    }
}

/// Back-to-back launches per sample: enough work per CUDA-event pair at small sizes.
fn reps(gemm_flops: f64) -> usize {
    ((2e12 / gemm_flops).ceil() as usize).clamp(1, 10)
}

/// A single-GEMM fused op: `program` on two random input sets, against cuBLASLt
/// and our `linear` program on the same operands.
fn single_gemm(
    stream: &Stream,
    blas: &CublasLt,
    (name, kernel, program): (&str, &Kernel, Program),
    (m, n, k): (usize, usize, usize),
    samples: usize,
    tweak: &dyn Fn(&mut Setup, &Program) -> Result<(), Error>,
) -> Result<Row, Error> {
    let mut rng = Rng::new(17);
    let mut sets = vec![];
    for _ in 0..2 {
        let mut s = Setup::new(stream, kernel, &program, None, (m, n, k), &mut rng)?;
        tweak(&mut s, &program)?;
        sets.push(s);
    }
    let sets = RefCell::new(sets);
    let out = RefCell::new(Tensor::<bf16>::zeros(stream, &[m, n])?);
    let mut fused = |i: usize| sets.borrow_mut()[i % 2].launch(stream, kernel, &program);
    let mut cublas = |i: usize| {
        let s = &sets.borrow()[i % 2];
        let (a, b) = s.bf16_operands()?;
        blas.linear(stream, a, b, &mut *out.borrow_mut())
    };
    let mut cutlass = |i: usize| {
        let s = &sets.borrow()[i % 2];
        let (a, b) = s.bf16_operands()?;
        linear::launch(stream, linear::Args { a, b, y: &mut *out.borrow_mut() })
    };
    // Chosen (searched, with CODA_TUNE=search) before timing starts.
    let plain = coda_runtime::tune::choose(&linear::KERNEL, stream, coda_runtime::Problem { m, n, k })?;
    let note = format!("configs: fused {}; linear {}", sets.borrow()[0].choice.describe(), plain.describe());
    let r = reps(2.0 * (m * n * k) as f64);
    let t = bench::interleaved(stream, Duration::from_secs(1), samples, r, &mut [&mut fused, &mut cublas, &mut cutlass])?;
    Ok(Row {
        name: name.into(),
        shape: format!("M={m} N={n} K={k}"),
        gemms: "1".into(),
        fused_ms: t[0],
        cublas_ms: t[1],
        cutlass_ms: Some(t[2]),
        note,
    })
}

/// RoPE inputs as in a model: positions of 4096-token sequences and the
/// per-column frequencies of heads of 128 (q, k rotated, v not).
fn realistic_rope(m: usize, n3: usize) -> Result<(Vec<f32>, Vec<f32>), Error> {
    let pos = (0..m).map(|i| (i % 4096) as f32).collect();
    let heads = n3 / 3 / 128;
    let c = coda_llama::BlockConfig { hidden: n3 / 3, ffn: 8, heads, kv_heads: heads, head_dim: 128, eps: 1e-5, rope_theta: 10000.0, qk_norm: false };
    Ok((pos, c.rope_freq()?))
}

/// The LM-head tail (final norm, head GEMM, cross-entropy), forward and
/// forward + backward, at `m` tokens, hidden `d`, vocabulary `v`.
fn lm_head(stream: &Stream, (blas, lt): (&Cublas, &CublasLt), m: usize, d: usize, v: usize, samples: usize) -> Result<[Row; 2], Error> {
    let mut rng = Rng::new(19);
    let s = (3.0 / d as f64).sqrt();
    let h = HeadWeights::new(
        Tensor::from_host(stream, &rng.bf16s(d, 0.5, 1.5), &[d])?,
        Tensor::from_host(stream, &rng.bf16s(v * d, -s, s), &[v, d])?,
        1e-5,
    )?;
    let x = Tensor::from_host(stream, &rng.bf16s(m * d, -1.0, 1.0), &[m, d])?;
    let targets = Tensor::from_host(stream, &(0..m).map(|_| (rng.next_u64() % v as u64) as i32).collect::<Vec<_>>(), &[m])?;
    let fs = RefCell::new(HeadState::new(stream, &h, m)?);
    let bs = RefCell::new(HeadBackwardState::new(stream, &h, m, 4096)?);
    let g = RefCell::new(HeadGrads::new(stream, &h, m)?);
    let logits = RefCell::new(Tensor::<bf16>::zeros(stream, &[m, v])?);
    let dx = RefCell::new(Tensor::<bf16>::zeros(stream, &[m, d])?);
    let mut fused_fwd = |_: usize| head_forward(stream, &h, &x, &targets, &mut fs.borrow_mut());
    let mut cublas_fwd = |_: usize| lt.linear(stream, &fs.borrow().u, &h.w, &mut *logits.borrow_mut());
    let mut cutlass_fwd = |_: usize| linear::launch(stream, linear::Args { a: &fs.borrow().u, b: &h.w, y: &mut *logits.borrow_mut() });
    let r = reps(2.0 * (m * v * d) as f64);
    let t = bench::interleaved(stream, Duration::from_secs(1), samples, r, &mut [&mut fused_fwd, &mut cublas_fwd, &mut cutlass_fwd])?;
    let mut fused_both = |_: usize| head_forward_backward(stream, &h, &x, &targets, &mut fs.borrow_mut(), &mut bs.borrow_mut(), &mut g.borrow_mut());
    let mut cublas_both = |_: usize| {
        let (f, mut l) = (fs.borrow(), logits.borrow_mut());
        lt.linear(stream, &f.u, &h.w, &mut *l)?;
        lt.matmul(stream, &*l, &h.w, &mut *dx.borrow_mut())?;
        blas.weight_grad(stream, &*l, &f.u, &mut g.borrow_mut().dw, false)
    };
    let tb = bench::interleaved(stream, Duration::from_secs(1), samples, r.div_ceil(3), &mut [&mut fused_both, &mut cublas_both])?;
    let shape = format!("M={m} d={d} V={v}");
    Ok([
        Row { name: "lm_head_ce fwd".into(), shape: shape.clone(), gemms: "1 (logits)".into(), fused_ms: t[0], cublas_ms: t[1], cutlass_ms: Some(t[2]), note: String::new() },
        Row {
            name: "lm_head_ce fwd+bwd".into(),
            shape,
            gemms: "3 (logits, dx, dW)".into(),
            fused_ms: tb[0],
            cublas_ms: tb[1],
            cutlass_ms: None,
            note: format!(
                "extra device memory {:.0} MiB, chunks of 4096 rows (one M × V f32 buffer: {:.0} MiB)",
                bs.borrow().chunk_bytes() as f64 / (1 << 20) as f64,
                (m * v * 4) as f64 / (1 << 20) as f64
            ),
        },
    ])
}

/// Runs the suite, reporting each row to `progress` as it completes.
pub fn run(stream: &Stream, plan: &Plan, progress: &mut dyn FnMut(usize, &Row)) -> Result<Vec<Row>, Error> {
    let (blas, lt) = (Cublas::new(stream)?, CublasLt::new(stream)?);
    let mut rows: Vec<Row> = vec![];
    let mut push = |r: Row, rows: &mut Vec<Row>| {
        rows.push(r);
        progress(rows.len(), rows.last().expect("just pushed"));
    };
    let none = |_: &mut Setup, _: &Program| Ok(());
    for &n in plan.op_sizes {
        push(single_gemm(stream, &lt, ("gemm_swiglu", &swiglu::KERNEL, swiglu::program()), (n, 2 * n, n), plan.samples, &none)?, &mut rows);
        push(
            single_gemm(
                stream,
                &lt,
                ("gemm_residual_rms_partial", &linear_residual_rms_partial::KERNEL, linear_residual_rms_partial::program()),
                (n, n, n),
                plan.samples,
                &none,
            )?,
            &mut rows,
        );
        push(
            single_gemm(
                stream,
                &lt,
                ("gemm_rowscale_swiglu", &linear_rowscale_swiglu::KERNEL, linear_rowscale_swiglu::program()),
                (n, 2 * n, n),
                plan.samples,
                &none,
            )?,
            &mut rows,
        );
        let rope = |s: &mut Setup, p: &Program| {
            let (pos, freq) = realistic_rope(n, 3 * n)?;
            s.set_f32_input(stream, p, "pos", &pos)?;
            s.set_f32_input(stream, p, "freq", &freq)
        };
        push(
            single_gemm(
                stream,
                &lt,
                ("gemm_rowscale_rope", &linear_rowscale_rope::KERNEL, linear_rowscale_rope::program()),
                (n, 3 * n, n),
                plan.samples,
                &rope,
            )?,
            &mut rows,
        );
        for r in lm_head(stream, (&blas, &lt), n, n, plan.vocab, plan.samples)? {
            push(r, &mut rows);
        }
    }
    for &(d, ffn) in plan.blocks {
        let t = block::time_block(stream, &block::config(d, ffn), plan.tokens, plan.samples, 2)?;
        let shape = format!("M={} d={d} ffn={ffn}", plan.tokens);
        push(
            Row { name: "block fwd".into(), shape: shape.clone(), gemms: "4".into(), fused_ms: t.forward, cublas_ms: t.forward_gemms, cutlass_ms: None, note: String::new() },
            &mut rows,
        );
        push(
            Row {
                name: "block fwd+bwd".into(),
                shape,
                gemms: "12 (4 fwd, 4 dgrad, 4 wgrad)".into(),
                fused_ms: t.forward_backward,
                cublas_ms: t.forward_backward_gemms,
                cutlass_ms: None,
                note: String::new(),
            },
            &mut rows,
        );
    }
    Ok(rows)
}

/// The untuned suite: each program (as a user's crate builds it: the
/// default config pair, no tuning cache consulted unless the caller set one) at
/// `n × n × n` for each of the plan's sizes, against the bare GEMMs of its
/// shape. Random inputs from the generic harness; scalars and targets as it
/// draws them (timing does not depend on the values: no map branches).
pub fn run_untuned(
    stream: &Stream,
    plan: &Plan,
    programs: &[(&str, &Kernel, Program)],
    progress: &mut dyn FnMut(usize, &Row),
) -> Result<Vec<Row>, Error> {
    let lt = CublasLt::new(stream)?;
    let none = |_: &mut Setup, _: &Program| Ok(());
    let mut rows = vec![];
    for &n in plan.op_sizes {
        for (name, kernel, program) in programs {
            rows.push(single_gemm(stream, &lt, (name, kernel, program.clone()), (n, n, n), plan.samples, &none)?);
            progress(rows.len(), rows.last().expect("just pushed"));
        }
    }
    Ok(rows)
}

/// Per shape: the median and the worst ratio to cuBLASLt over the rows of that shape.
pub fn summary(rows: &[Row]) -> String {
    let mut shapes: Vec<&str> = rows.iter().map(|r| r.shape.as_str()).collect();
    shapes.dedup();
    let mut s = String::new();
    for shape in shapes {
        let mut of: Vec<&Row> = rows.iter().filter(|r| r.shape == shape).collect();
        of.sort_by(|a, b| a.vs_cublas().total_cmp(&b.vs_cublas()));
        let (median, worst) = (of[of.len() / 2], of[of.len() - 1]);
        s += &format!(
            "{shape}: {} programs, median {:.3}× cuBLASLt ({}), worst {:.3}× ({})\n",
            of.len(),
            median.vs_cublas(),
            median.name,
            worst.vs_cublas(),
            worst.name
        );
    }
    s
}

/// The rows as a table: ms, and the fused time over each bare GEMM time.
pub fn table(rows: &[Row]) -> String {
    let mut s = format!(
        "{:<26} {:<22} {:>10} {:>11} {:>7} {:>10} {:>7}  {}\n",
        "op", "shape", "fused ms", "cuBLASLt ms", "ratio", "CUTLASS ms", "ratio", "bare GEMMs"
    );
    for r in rows {
        let (c, cr) = match r.cutlass_ms {
            Some(c) => (format!("{c:.4}"), format!("{:.3}", r.fused_ms / c)),
            None => ("-".into(), "-".into()),
        };
        s += &format!(
            "{:<26} {:<22} {:>10.4} {:>11.4} {:>7.3} {:>10} {:>7}  {}\n",
            r.name,
            r.shape,
            r.fused_ms,
            r.cublas_ms,
            r.vs_cublas(),
            c,
            cr,
            r.gemms
        );
    }
    for r in rows.iter().filter(|r| !r.note.is_empty()) {
        s += &format!("{} {}: {}\n", r.name, r.shape, r.note);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows() -> Vec<Row> {
        vec![
            Row { name: "gemm_swiglu".into(), shape: "M=4096 N=8192 K=4096".into(), gemms: "1".into(), fused_ms: 0.40, cublas_ms: 0.38, cutlass_ms: Some(0.41), note: String::new() },
            Row { name: "block fwd".into(), shape: "M=16384 d=2048 ffn=8192".into(), gemms: "4".into(), fused_ms: 2.7, cublas_ms: 3.0, cutlass_ms: None, note: String::new() },
        ]
    }

    /// The median of an odd count is the middle row; the worst is the largest ratio, per shape.
    #[test]
    fn summary_takes_median_and_worst_per_shape() {
        let row = |name: &str, shape: &str, fused_ms: f64| Row {
            name: name.into(),
            shape: shape.into(),
            gemms: "1".into(),
            fused_ms,
            cublas_ms: 1.0,
            cutlass_ms: None,
            note: String::new(),
        };
        let rows = [row("a", "S", 1.2), row("b", "S", 0.9), row("c", "S", 1.0), row("a", "T", 2.0)];
        let s = summary(&rows);
        assert!(s.contains("S: 3 programs, median 1.000× cuBLASLt (c), worst 1.200× (a)"), "{s}");
        assert!(s.contains("T: 1 programs, median 2.000× cuBLASLt (a), worst 2.000× (a)"), "{s}");
    }

    #[test]
    fn table_reports_both_ratios() {
        let t = table(&rows());
        assert!(t.contains("gemm_swiglu") && t.contains("1.053") && t.contains("0.976"), "{t}");
        assert!(t.lines().nth(2).is_some_and(|l| l.contains("0.900") && l.contains(" - ")), "{t}");
    }
}
