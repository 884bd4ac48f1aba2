//! The main job: shows the reparameterised RMSNorm→GEMM agreeing with the
//! standard one on the CPU (always), then, where an H100/H200 is present,
//! runs both kernels, checks every output and times them against cuBLASLt.
//!
//! `cargo run --release -p llama-norm [-- --quick]`

use std::collections::HashMap;

use coda_runtime::Stream;
use coda_runtime::dsl::interp::{self, Inputs, Precision};
use coda_tests::host::{Rng, linear_rows};
use llama_norm::{residual_rms_partial, rowscale, timing, verify};

/// Interpreter path (epilogue → aux → epilogue) vs RMSNorm-then-GEMM, in f64.
fn cpu_reparam_check() -> f64 {
    let (m, k, d, f, eps) = (96, 256, 512, 384, 1e-5);
    let mut rng = Rng::new(1);
    let mut v = |n: usize, s: f64| (0..n).map(|_| rng.uniform(-s, s)).collect::<Vec<f64>>();
    let (x, wo, z, w1) = (v(m * k, 1.0), v(d * k, 0.1), v(m * d, 1.0), v(f * d, 0.05));
    let gamma: Vec<f64> = v(d, 0.5).iter().map(|g| 1.0 + g).collect();
    let rows: Vec<usize> = (0..m).collect();

    let p1 = residual_rms_partial::program();
    let acc = linear_rows(&x, &wo, k, &rows);
    let tensors = HashMap::from([("z".to_string(), z.clone()), ("gamma".to_string(), gamma.clone())]);
    let o1 = interp::evaluate(&p1, m, d, &Inputs { acc: acc.clone(), tensors, scalars: HashMap::new() }, Precision::F64)
        .expect("program 1 runs");
    let r = interp::rms_from_partials(&o1["sq"], p1.n_tiles(d), d, eps);
    let p2 = rowscale::program();
    let acc2 = linear_rows(&o1["u"], &w1, d, &rows);
    let tensors = HashMap::from([("r".to_string(), r)]);
    let y = interp::evaluate(&p2, m, f, &Inputs { acc: acc2, tensors, scalars: HashMap::new() }, Precision::F64)
        .expect("program 2 runs")["y"]
        .clone();

    let mut normed = vec![0.0; m * d];
    for i in 0..m {
        let h: Vec<f64> = (0..d).map(|j| acc[i * d + j] + z[i * d + j]).collect();
        let rr = 1.0 / (h.iter().map(|v| v * v).sum::<f64>() / d as f64 + eps).sqrt();
        for j in 0..d {
            normed[i * d + j] = h[j] * rr * gamma[j];
        }
    }
    let y_std = linear_rows(&normed, &w1, d, &rows);
    let scale = y_std.iter().fold(0f64, |a, v| a.max(v.abs()));
    y.iter().zip(&y_std).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max) / scale
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let rel = cpu_reparam_check();
    println!("CPU (interpreter, f64): reparameterised vs standard RMSNorm(x·Woᵀ+z)·W1ᵀ, max rel diff = {rel:.2e}");
    assert!(rel < 1e-12, "the reparameterised path must equal the standard one");

    let stream = match Stream::new(0) {
        Ok(s) => s,
        Err(e) => {
            println!("GPU: skipped ({e}); the kernels were built by `cargo build`.");
            return;
        }
    };
    let cases: &[(usize, usize, usize, usize)] = if quick {
        &[(4000, 3000, 4000, 3000)]
    } else {
        &[(4096, 4096, 4096, 4096), (8192, 8192, 8192, 8192), (4000, 3000, 4000, 3000)]
    };
    let mut failed = false;
    println!("\ncorrectness (every output vs the f64 interpreter; pass: err <= 2*bf16_err + 1e-6)");
    println!("{:>24} {:>28} {:>11} {:>11} {:>5}", "M,d,K,f (rows checked)", "output", "err", "bf16 err", "ok");
    for (i, &(m, d, k, f)) in cases.iter().enumerate() {
        let rep = verify::run_case(&stream, m, d, k, f, 100 + i as u64, 320).expect("case runs");
        for c in &rep.checks {
            let shape = format!("{m},{d},{k},{f} ({})", rep.rows_checked);
            println!("{shape:>24} {:>28} {:>11.3e} {:>11.3e} {:>5}", c.output, c.err, c.yardstick, c.pass());
        }
        println!("{:>24} {:>28} {:>35}", "", "repeat run bitwise equal", rep.repeat_bitwise);
        failed |= !rep.pass();
    }
    println!("\ntiming (median ms per launch, CUDA events, interleaved, rotating inputs)");
    println!("{:>16} {:>12} {:>12} {:>10} {:>12} {:>14}", "M=N=K", "o_proj epi", "cuBLASLt GEMM", "ratio", "rowscale epi", "rms aux");
    for &(m, n, k) in if quick { &[(4096, 4096, 4096)][..] } else { &[(4096, 4096, 4096), (8192, 8192, 8192)][..] } {
        match timing::time_case(&stream, m, n, k, 30, 10) {
            Ok(t) => println!(
                "{:>16} {:>12.4} {:>12.4} {:>10.3} {:>12.4} {:>14.4}",
                format!("{m},{n},{k}"),
                t.oproj_epilogue,
                t.cublas_gemm,
                t.oproj_epilogue / t.cublas_gemm,
                t.rowscale_epilogue,
                t.rms_aux
            ),
            Err(e) => println!("{:>16} timing skipped: {e}", format!("{m},{n},{k}")),
        }
    }
    if failed {
        eprintln!("FAILED: an output missed the correctness criterion");
        std::process::exit(1);
    }
}
