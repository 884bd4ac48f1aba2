//! GPU tests: need an sm_90a device (H100/H200). Where there is none (CI),
//! they print why and pass without running. Run them on the GPU machine with
//! the built test binary: `gpu [--quick] [--only NAME-PART]`.

use coda_llama::programs::{linear_cross_entropy, linear_rowscale_swiglu, rmsnorm_backward};
use coda_runtime::{Choice, Error, Raster, RowPartials, Stream, Tensor, bf16};
use coda_tests::host::Rng;
use coda_tests::programs::{
    dswiglu, gated_mix, linear, norm_weight_grad, rank_one_stores, rowscale_rope, swiglu, two_partials,
};
use coda_tests::{backward, block, harness};

struct Outcome {
    name: String,
    pass: bool,
}

/// Runs the cases (those whose name contains `--only`'s text, if given),
/// printing each result as it completes: an error is a failed case, not an abort.
struct Runner {
    only: Option<String>,
    outcomes: Vec<Outcome>,
}

impl Runner {
    fn outcome(&mut self, name: String, f: impl FnOnce() -> Result<(bool, String), Error>) {
        if self.only.as_ref().is_some_and(|o| !name.contains(o.as_str())) {
            return;
        }
        let t = std::time::Instant::now();
        let (pass, detail) = f().unwrap_or_else(|e| (false, format!("    error: {e}\n")));
        println!("{} {name} ({:.1} s)\n{detail}", if pass { "PASS" } else { "FAIL" }, t.elapsed().as_secs_f64());
        self.outcomes.push(Outcome { name, pass });
    }

    fn case(&mut self, name: String, f: impl FnOnce() -> Result<harness::Report, Error>) {
        self.outcome(name, || {
            let r = f()?;
            let mut detail = format!("rows checked {}, repeat bitwise {}\n", r.rows_checked, r.repeat_bitwise);
            for c in &r.checks {
                let verdict = if c.pass() { "ok" } else { "FAIL" };
                detail += &format!("    {:<36} err {:.3e}  bf16 err {:.3e}  {verdict}\n", c.output, c.err, c.yardstick);
            }
            Ok((r.pass(), detail))
        });
    }
}

/// A bad argument is refused before anything is launched: the output stays poisoned.
fn bad_input_launches_nothing(stream: &Stream) -> Result<(bool, String), Error> {
    let (m, n, k) = (256, 256, 260); // K % 8 != 0
    let x = Tensor::<bf16>::zeros(stream, &[m, k])?;
    let w = Tensor::<bf16>::zeros(stream, &[n, k])?;
    let mut y = Tensor::<bf16>::zeros(stream, &[m, n])?;
    y.poison()?;
    let err = linear::launch(stream, linear::Args { a: &x, b: &w, y: &mut y }).expect_err("K = 260 must be refused");
    let untouched = y.to_host()?.iter().all(|v| v.to_bits() == 0xFFFF);
    let pass = matches!(&err, Error::Arg { name, .. } if name == "a") && untouched;
    Ok((pass, format!("    error: {err}; output untouched: {untouched}\n")))
}

/// Work on another stream that reads a launch's output is ordered after the
/// launch: cudarc's guards record the write after the kernel is enqueued.
/// (Before, the 8192 × 8192 output read at once through a second stream came
/// back with 1,048,576 unwritten elements.)
fn other_streams_wait_for_launches(stream: &Stream) -> Result<(bool, String), Error> {
    let (m, n, k) = (8192, 8192, 1024);
    let mut rng = Rng::new(31);
    let x = Tensor::from_host(stream, &rng.bf16s(m * k, -1.0, 1.0), &[m, k])?;
    let w = Tensor::from_host(stream, &rng.bf16s(n * k, -0.1, 0.1), &[n, k])?;
    let mut y = Tensor::<bf16>::zeros(stream, &[m, n])?;
    let other = Stream::new(stream.ordinal())?;
    let mut unwritten = 0;
    for _ in 0..3 {
        y.poison()?;
        linear::launch(stream, linear::Args { a: &x, b: &w, y: &mut y })?;
        let seen = other.cuda().clone_dtoh(y.slice())?;
        unwritten += seen.iter().filter(|v| v.to_bits() == 0xFFFF).count();
    }
    Ok((unwritten == 0, format!("    unwritten elements seen by the second stream in 3 tries: {unwritten}\n")))
}

/// Partials belong to the program that first wrote them: a second program
/// writing the same object is refused, naming the argument and both programs.
fn partials_have_one_producer(stream: &Stream) -> Result<(bool, String), Error> {
    let (m, n, k) = (256, 256, 256);
    let mut rng = Rng::new(32);
    let t = |rng: &mut Rng, r, c| Tensor::from_host(stream, &rng.bf16s(r * c, -1.0, 1.0), &[r, c]);
    let (x, w, z1, res, other) = (t(&mut rng, m, k)?, t(&mut rng, n, k)?, t(&mut rng, m, 2 * n)?, t(&mut rng, m, n)?, t(&mut rng, m, n)?);
    let (mut y1, mut dz1, mut g) = (Tensor::zeros(stream, &[m, n])?, Tensor::zeros(stream, &[m, 2 * n])?, Tensor::zeros(stream, &[m, n])?);
    let (mut s1, mut spare) = (RowPartials::new(), RowPartials::new());
    dswiglu::launch(stream, dswiglu::Args { a: &x, b: &w, z1: &z1, y1: &mut y1, dz1: &mut dz1, s1: &mut s1 })?;
    let err = two_partials::launch(
        stream,
        two_partials::Args { a: &x, b: &w, res: &res, other: &other, g: &mut g, sum_g: &mut s1, sum_log: &mut spare, eps: 1e-3 },
    )
    .expect_err("another program's partials must be refused");
    let pass = matches!(&err, Error::Arg { name, rule } if name == "sum_g" && rule.contains("coda-tests::dswiglu"));
    Ok((pass, format!("    error: {err}\n")))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let only = args.iter().position(|a| a == "--only").and_then(|i| args.get(i + 1)).cloned();
    // The ragged shape: M and N not multiples of any tile, K not of 64 (N/2 is a multiple of 8).
    let shapes: &[(usize, usize, usize)] = if quick { &[(1000, 528, 264)] } else { &[(4096, 4096, 4096), (1000, 528, 264)] };
    let ce: &[(usize, usize, usize)] = if quick { &[(1000, 30000, 264)] } else { &[(4096, 32768, 4096), (1000, 30000, 264)] };
    // 16K tokens, and a ragged count (not a multiple of any tile).
    let blocks: &[usize] = if quick { &[1999] } else { &[16384, 15999] };
    // The backward at the same shapes (sampled rows and whole M-tiles), and
    // complete (every row, every weight gradient) at a small ragged shape.
    let small = block::config(256, 512);
    // The LM-head tail: (d, V, M, chunk rows, complete?, fused forward+backward?).
    let heads: &[(usize, usize, usize, usize, bool, bool)] = if quick {
        &[(256, 4096, 1000, 256, true, false), (256, 4096, 1000, 256, true, true)]
    } else {
        &[
            (256, 4096, 1000, 256, true, false),
            (256, 4096, 1000, 256, true, true),
            (2048, 32768, 16384, 4096, false, false),
            (2048, 32768, 16384, 4096, false, true),
        ]
    };
    let programs: [(&str, &coda_runtime::Kernel, coda_runtime::dsl::Program); 11] = [
        ("gated_mix", &gated_mix::KERNEL, gated_mix::program()),
        ("two_partials", &two_partials::KERNEL, two_partials::program()),
        ("llama::linear_rowscale_swiglu", &linear_rowscale_swiglu::KERNEL, linear_rowscale_swiglu::program()),
        ("rowscale_rope", &rowscale_rope::KERNEL, rowscale_rope::program()),
        ("dswiglu", &dswiglu::KERNEL, dswiglu::program()),
        ("llama::linear_cross_entropy", &linear_cross_entropy::KERNEL, linear_cross_entropy::program()),
        ("norm_weight_grad", &norm_weight_grad::KERNEL, norm_weight_grad::program()),
        ("rank_one_stores", &rank_one_stores::KERNEL, rank_one_stores::program()),
        ("llama::rmsnorm_backward (B [K, N])", &rmsnorm_backward::KERNEL, rmsnorm_backward::program()),
        ("linear (coda bench's plain GEMM)", &linear::KERNEL, linear::program()),
        ("swiglu (coda bench's GEMM + SwiGLU)", &swiglu::KERNEL, swiglu::program()),
    ];
    // Each compiled config of each program at every shape (the program's own
    // with CUTLASS's scheduler defaults, the others with swizzle 8 along N),
    // and the own config with swizzle 8 along M at the ragged shape: both
    // pad the grid with tiles past (M, N).
    let ragged = *shapes.last().expect("a ragged shape");
    let mut generic = vec![];
    for (name, kernel, program) in &programs {
        for (i, v) in kernel.variants().iter().enumerate() {
            let choice = if i == 0 {
                Choice::own(kernel)
            } else {
                Choice { variant: i, config: v.config(), swizzle: 8, raster: Raster::AlongN }
            };
            generic.extend(shapes.iter().map(|&shape| (*name, *kernel, program, choice, shape)));
        }
        let swizzled = Choice { swizzle: 8, raster: Raster::AlongM, ..Choice::own(kernel) };
        generic.push((*name, *kernel, program, swizzled, ragged));
    }
    let stream = match Stream::new(0) {
        Ok(s) => s,
        Err(e) => {
            println!("gpu tests: SKIPPED, {e}. Their results come from runs on an H200 (see README).");
            let cases = generic.len() + ce.len() + 2 * blocks.len() + 1 + heads.len() + 1 + 3;
            println!("0 passed, 0 failed, {cases} skipped");
            return;
        }
    };
    let mut run = Runner { only: only.clone(), outcomes: vec![] };
    for (name, kernel, program, choice, (m, n, k)) in generic {
        run.case(format!("{name} [{}] M={m} N={n} K={k}", choice.describe()), || {
            harness::verify(&stream, kernel, program, Some(choice), (m, n, k), 7)
        });
    }
    for &(m, v, k) in ce {
        run.case(format!("cross-entropy loss M={m} V={v} K={k}"), || harness::cross_entropy_case(&stream, m, v, k, 11));
    }
    let big = block::config(2048, 8192);
    for &m in blocks {
        run.case(format!("block forward d=2048 ffn=8192 heads 16x128 kv 4, M={m}"), || block::forward_case(&stream, &big, m, 128, 21));
    }
    for &m in blocks {
        run.case(format!("block backward d=2048 ffn=8192 heads 16x128 kv 4, M={m}"), || {
            backward::backward_case(&stream, &big, m, 32, 22, false)
        });
    }
    run.case("block backward d=256 ffn=512 heads 2x128 kv 1, M=1000, every row and weight".into(), || {
        backward::backward_case(&stream, &small, 1000, 0, 23, true)
    });
    for &(d, v, m, chunk, full, fused) in heads {
        let what = if full { "every row and weight" } else { "sampled rows" };
        let how = if fused { "head_forward_backward" } else { "head_forward + head_backward" };
        run.case(format!("LM head {how} d={d} V={v} M={m} chunks of {chunk}, {what}"), || {
            backward::head_case(&stream, d, v, m, chunk, 96, 24, full, fused)
        });
    }
    run.outcome("launches per op (fused GEMM, aux, cuBLAS)".into(), || {
        let counts = backward::launch_counts(&stream)?;
        let detail: String = counts.iter().map(|(op, got, want)| format!("    {op:<26} {got:?} (expected {want:?})\n")).collect();
        let pass = counts.iter().all(|(_, got, want)| got == want);
        Ok((pass, detail))
    });
    run.outcome("bad K refused, nothing launched".into(), || bad_input_launches_nothing(&stream));
    run.outcome("a second stream reading an output waits for the launch".into(), || other_streams_wait_for_launches(&stream));
    run.outcome("partials written by one program are refused to another".into(), || partials_have_one_producer(&stream));

    let outcomes = run.outcomes;
    let failed = outcomes.iter().filter(|o| !o.pass).count();
    println!("{} passed, {failed} failed", outcomes.len() - failed);
    for o in outcomes.iter().filter(|o| !o.pass) {
        println!("FAILED: {}", o.name);
    }
    if failed > 0 {
        std::process::exit(1);
    }
}
