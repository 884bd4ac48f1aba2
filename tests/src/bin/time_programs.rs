//! Times every test program next to a plain cuBLASLt GEMM of the same shape,
//! in one process (`coda_runtime::bench::interleaved`: warm-up, interleaved
//! samples, medians, inputs rotated across sets larger than the L2).
//! Needs an H100/H200; prints a table.
//! `time_programs [--quick] [--programs-only] [--only TEXT]` (`--only`: the
//! rows whose name and shape, as printed, contain TEXT; e.g. for Nsight Compute).

use std::cell::RefCell;
use std::time::Duration;

use coda_tests::baseline::{CublasLt, CublasLtFp8, Fp8Scaling};
use coda_runtime::dsl::Program;
use coda_runtime::dsl::ir::BLayout;
use coda_runtime::{Choice, Kernel, Stream, Tensor, bench, bf16};
use coda_llama::programs::{
    linear_cross_entropy, linear_dswiglu, linear_residual_rms_partial, linear_rowscale_qk_norm_rope, linear_rowscale_rope, linear_rowscale_swiglu,
    rmsnorm_backward,
};
use coda_tests::block;
use coda_tests::harness::Setup;
use coda_tests::programs::*;
use coda_tests::host::Rng;

/// `--programs-only`: skip the block timings (`coda bench` has them).
fn args_skip_blocks() -> bool {
    std::env::args().any(|a| a == "--programs-only")
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let stream = match Stream::new(0) {
        Ok(s) => s,
        Err(e) => {
            println!("time_programs: skipped ({e})");
            return;
        }
    };
    let blas = CublasLt::new(&stream).expect("cuBLASLt loads");
    let progs: Vec<(&str, &Kernel, Program, (usize, usize, usize))> = vec![
        ("gated_mix", &gated_mix::KERNEL, gated_mix::program(), (4096, 4096, 4096)),
        ("two_partials", &two_partials::KERNEL, two_partials::program(), (4096, 4096, 4096)),
        ("llama::linear_rowscale_swiglu", &linear_rowscale_swiglu::KERNEL, linear_rowscale_swiglu::program(), (4096, 4096, 4096)),
        ("rowscale_rope", &rowscale_rope::KERNEL, rowscale_rope::program(), (4096, 4096, 4096)),
        ("dswiglu", &dswiglu::KERNEL, dswiglu::program(), (4096, 4096, 4096)),
        ("llama::linear_cross_entropy", &linear_cross_entropy::KERNEL, linear_cross_entropy::program(), (4096, 4096, 4096)),
        ("llama::linear_cross_entropy", &linear_cross_entropy::KERNEL, linear_cross_entropy::program(), (4096, 32768, 4096)),
        ("norm_weight_grad", &norm_weight_grad::KERNEL, norm_weight_grad::program(), (4096, 4096, 4096)),
        ("rank_one_stores", &rank_one_stores::KERNEL, rank_one_stores::program(), (4096, 4096, 4096)),
        ("llama rmsnorm_backward", &rmsnorm_backward::KERNEL, rmsnorm_backward::program(), (4096, 4096, 4096)),
    ];
    // The Llama forward ops at the sizes, in every config the build compiled for them.
    let mut progs: Vec<_> = progs.into_iter().map(|(name, kernel, program, shape)| (name.to_string(), kernel, program, None, shape)).collect();
    for n in [4096, 8192] {
        for (name, kernel, program, shape) in [
            ("llama residual_rms_partial", &linear_residual_rms_partial::KERNEL, linear_residual_rms_partial::program(), (n, n, n)),
            ("llama rowscale_swiglu", &linear_rowscale_swiglu::KERNEL, linear_rowscale_swiglu::program(), (n, 2 * n, n)),
            ("llama rowscale_rope", &linear_rowscale_rope::KERNEL, linear_rowscale_rope::program(), (n, 3 * n, n)),
            ("llama qk_norm_rope", &linear_rowscale_qk_norm_rope::KERNEL, linear_rowscale_qk_norm_rope::program(), (n, 3 * n, n)),
            ("llama cross_entropy", &linear_cross_entropy::KERNEL, linear_cross_entropy::program(), (n, 32768, n)),
            ("qk_norm_rope", &qk_norm_rope::KERNEL, qk_norm_rope::program(), (n, 3 * n, n)),
            ("block_amax", &block_amax::KERNEL, block_amax::program(), (n, n, n)),
        ] {
            for (i, v) in kernel.variants().iter().enumerate() {
                let choice = Choice { variant: i, config: v.config(), ..Choice::own(kernel) };
                progs.push((format!("{name} {}", v.config().name()), kernel, program.clone(), Some(choice), shape));
            }
        }
    }
    // QK-norm + RoPE beside RoPE alone at the training run's qkv GEMM (M = 8192, d = 2048, 16 + 2·4 heads of 128).
    for (name, kernel, program) in [
        ("qk_norm_rope", &qk_norm_rope::KERNEL, qk_norm_rope::program()),
        ("llama rowscale_rope", &linear_rowscale_rope::KERNEL, linear_rowscale_rope::program()),
        ("llama qk_norm_rope", &linear_rowscale_qk_norm_rope::KERNEL, linear_rowscale_qk_norm_rope::program()),
    ] {
        for (i, v) in kernel.variants().iter().enumerate() {
            let choice = Choice { variant: i, config: v.config(), ..Choice::own(kernel) };
            progs.push((format!("{name} {}", v.config().name()), kernel, program.clone(), Some(choice), (8192, 3072, 2048)));
        }
    }
    // SwiGLU's backward at the down-projection gradient of the training run (M = 8192 tokens) and of the
    // shipped searches (M = 16384), f = 8192, d = 2048.
    for m in [8192, 16384] {
        for (i, v) in linear_dswiglu::KERNEL.variants().iter().enumerate() {
            let choice = Choice { variant: i, config: v.config(), ..Choice::own(&linear_dswiglu::KERNEL) };
            progs.push((format!("llama dswiglu {}", v.config().name()), &linear_dswiglu::KERNEL, linear_dswiglu::program(), Some(choice), (m, 8192, 2048)));
        }
    }
    let (samples, reps) = if quick { (10, 5) } else { (30, 10) };
    println!("{:<44} {:>18} {:>10} {:>12} {:>7}", "program", "M,N,K", "fused ms", "cuBLASLt ms", "ratio");
    let only = std::env::args().skip_while(|a| a != "--only").nth(1);
    let progs = progs.into_iter().filter(|(name, .., (m, n, k))| {
        only.as_ref().is_none_or(|o| format!("{name} {m},{n},{k}").contains(o.as_str()))
    });
    for (name, kernel, program, choice, (m, n, k)) in progs {
        let mut rng = Rng::new(5);
        // Two input sets: each holds A and every tile input, > 60 MB together.
        let sets = RefCell::new(
            (0..2).map(|_| Setup::new(&stream, kernel, &program, choice, (m, n, k), &mut rng).expect("setup")).collect::<Vec<_>>(),
        );
        let out = RefCell::new(Tensor::<bf16>::zeros(&stream, &[m, n]).expect("alloc"));
        let mut fused = |i: usize| sets.borrow_mut()[i % 2].launch(&stream, kernel, &program);
        let mut gemm = |i: usize| {
            let s = &sets.borrow()[i % 2];
            let (a, b) = s.bf16_operands()?;
            // The same GEMM as the program's: B as [N, K] (a Linear) or [K, N] (an input gradient).
            match kernel.b_layout() {
                BLayout::Nk => blas.linear(&stream, a, b, &mut *out.borrow_mut()),
                BLayout::Kn => blas.matmul(&stream, a, b, &mut *out.borrow_mut()),
            }
        };
        let t = bench::interleaved(&stream, Duration::from_secs(1), samples, reps, &mut [&mut fused, &mut gemm])
            .expect("timing runs");
        println!("{name:<44} {:>18} {:>10.4} {:>12.4} {:>7.3}", format!("{m},{n},{k}"), t[0], t[1], t[0] / t[1]);
    }
    time_fp8(&stream, samples, reps, only.as_deref());
    if args_skip_blocks() {
        return;
    }
    println!("\nblock, 16384 tokens: fused vs the sum of its bare cuBLASLt GEMMs (forward: 4; forward+backward: 4 + 4 input-gradient + 4 weight-gradient)");
    println!(
        "{:>6} {:>7} {:>8} {:>10} {:>10} {:>7} {:>12} {:>12} {:>7}",
        "d", "ffn", "QK-norm", "fwd ms", "GEMMs ms", "ratio", "fwd+bwd ms", "GEMMs ms", "ratio"
    );
    let sizes: &[(usize, usize)] = if quick { &[(2048, 8192)] } else { &[(2048, 8192), (4096, 11008), (8192, 28672)] };
    for (&(d, ffn), qk_norm) in sizes.iter().flat_map(|s| [(s, false), (s, true)]) {
        let c = if qk_norm { block::config_qk_norm(d, ffn) } else { block::config(d, ffn) };
        let t = block::time_block(&stream, &c, 16384, samples, reps.min(5)).expect("block timing");
        println!(
            "{d:>6} {ffn:>7} {:>8} {:>10.4} {:>10.4} {:>7.3} {:>12.4} {:>12.4} {:>7.3}",
            if qk_norm { "yes" } else { "no" },
            t.forward,
            t.forward_gemms,
            t.forward / t.forward_gemms,
            t.forward_backward,
            t.forward_backward_gemms,
            t.forward_backward / t.forward_backward_gemms
        );
    }
}

/// The FP8 programs beside cuBLASLt's FP8 GEMM of the same scaling (ones as
/// scales; row and column scales are the program's own inputs) and the bf16
/// program of the same epilogue, all three interleaved.
fn time_fp8(stream: &Stream, samples: usize, reps: usize, only: Option<&str>) {
    println!(
        "\n{:<26} {:>16} {:>10} {:>13} {:>7} {:>12} {:>9}  FP8 config",
        "FP8 program", "M,N,K", "fused ms", "cuBLASLt ms", "ratio", "bf16 ms", "bf16/fp8"
    );
    for n in [4096, 8192] {
        for (name, kernel, program, scaling, bf16_kernel, bf16_program) in [
            ("fp8_swiglu", &fp8_swiglu::KERNEL, fp8_swiglu::program(), Fp8Scaling::PerTensor, &swiglu::KERNEL, swiglu::program()),
            ("fp8_fast_swiglu", &fp8_fast_swiglu::KERNEL, fp8_fast_swiglu::program(), Fp8Scaling::PerTensor, &swiglu::KERNEL, swiglu::program()),
            (
                "fp8_blockwise_swiglu",
                &fp8_blockwise_swiglu::KERNEL,
                fp8_blockwise_swiglu::program(),
                Fp8Scaling::Blockwise,
                &swiglu::KERNEL,
                swiglu::program(),
            ),
            (
                "fp8_residual_rms",
                &fp8_residual_rms::KERNEL,
                fp8_residual_rms::program(),
                Fp8Scaling::PerTensor,
                &linear_residual_rms_partial::KERNEL,
                linear_residual_rms_partial::program(),
            ),
            (
                "fp8_fast_residual_rms",
                &fp8_fast_residual_rms::KERNEL,
                fp8_fast_residual_rms::program(),
                Fp8Scaling::PerTensor,
                &linear_residual_rms_partial::KERNEL,
                linear_residual_rms_partial::program(),
            ),
        ] {
            let (m, k) = (n, n);
            if only.is_some_and(|o| !format!("{name} {m},{n},{k}").contains(o)) {
                continue;
            }
            let mut rng = Rng::new(11);
            let setups = |kernel: &Kernel, program: &Program, rng: &mut Rng| {
                (0..2).map(|_| Setup::new(stream, kernel, program, None, (m, n, k), rng).expect("setup")).collect::<Vec<_>>()
            };
            let fp8 = RefCell::new(setups(kernel, &program, &mut rng));
            let bf = RefCell::new(setups(bf16_kernel, &bf16_program, &mut rng));
            let out = RefCell::new(Tensor::<bf16>::zeros(stream, &[m, n]).expect("alloc"));
            let mut blas = match CublasLtFp8::new(stream, (m, n, k), scaling, kernel.operands().accum) {
                Ok(b) => Some(b),
                Err(e) => {
                    println!("{name}: cuBLASLt FP8 {scaling:?} unavailable ({e}); timed without it");
                    None
                }
            };
            let mut fused = |i: usize| fp8.borrow_mut()[i % 2].launch(stream, kernel, &program);
            let mut bf16_fused = |i: usize| bf.borrow_mut()[i % 2].launch(stream, bf16_kernel, &bf16_program);
            let mut gemm = |i: usize| {
                let sets = fp8.borrow();
                let (a, b, _) = sets[i % 2].e4m3_operands()?;
                match blas.as_mut() {
                    Some(blas) => blas.linear(stream, a, b, &mut out.borrow_mut()),
                    None => Ok(()),
                }
            };
            let t = bench::interleaved(stream, Duration::from_secs(1), samples, reps, &mut [&mut fused, &mut gemm, &mut bf16_fused])
                .expect("timing runs");
            let (baseline, ratio) = if blas.is_some() { (format!("{:.4}", t[1]), format!("{:.3}", t[0] / t[1])) } else { ("-".into(), "-".into()) };
            println!(
                "{name:<26} {:>16} {:>10.4} {baseline:>13} {ratio:>7} {:>12.4} {:>9.3}  {}",
                format!("{m},{n},{k}"),
                t[0],
                t[2],
                t[2] / t[0],
                fp8.borrow()[0].choice.describe()
            );
        }
    }
}
