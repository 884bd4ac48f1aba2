//! Every program of this crate on the GPU at two ragged shapes, in each
//! config its default build compiles (its own and the default set's), against the f64 interpreter with the project's criterion,
//! each output bitwise repeatable. Without a GPU it prints why and passes.
//! `gpu_user [--sanitize]`.

use coda_runtime::{Choice, Stream};
use coda_tests::harness;

/// `(M, N, K)`: multiples of no tile; N a multiple of 16 (half-width rows stay 16-byte aligned).
const SHAPES: [(usize, usize, usize); 2] = [(1000, 528, 264), (2100, 784, 520)];

fn main() {
    // `--sanitize`: one small ragged shape, for compute-sanitizer (scripts/sanitize.sh).
    let sanitize = std::env::args().any(|a| a == "--sanitize");
    let shapes: &[(usize, usize, usize)] = if sanitize { &[(200, 144, 72)] } else { &SHAPES };
    #[allow(unused_mut)]
    let mut programs = coda_user_programs::all();
    #[cfg(feature = "heldout")]
    programs.extend(coda_user_programs::heldout::all());
    let stream = match Stream::new(0) {
        Ok(s) => s,
        Err(e) => {
            println!("gpu_user: SKIPPED, {e}. {} programs compiled; their results come from runs on an H200.", programs.len());
            return;
        }
    };
    let (mut failed, mut total) = (vec![], 0);
    for (i, (name, kernel, program)) in programs.iter().enumerate() {
        for (variant, v) in kernel.variants().iter().enumerate() {
            let (choice, config) = (Choice { variant, config: v.config(), ..Choice::own(kernel) }, v.config().name());
            for (j, &shape) in shapes.iter().enumerate() {
                total += 1;
                let outcome = harness::verify(&stream, kernel, program, Some(choice), shape, 3000 + 10 * i as u64 + j as u64);
                let (pass, detail) = match outcome {
                    Ok(r) => {
                        let worst = r.checks.iter().map(|c| format!("{} {:.2e}/{:.2e}", c.output, c.err, c.yardstick));
                        (r.pass(), format!("repeat bitwise {}; err/bf16 err: {}", r.repeat_bitwise, worst.collect::<Vec<_>>().join(", ")))
                    }
                    Err(e) => (false, format!("error: {e}")),
                };
                let (m, n, k) = shape;
                println!("{} {name} [{config}] M={m} N={n} K={k}: {detail}", if pass { "PASS" } else { "FAIL" });
                if !pass {
                    failed.push(format!("{name} [{config}] at {m}×{n}×{k}"));
                }
            }
        }
    }
    println!("{} passed, {} failed", total - failed.len(), failed.len());
    if !failed.is_empty() {
        println!("FAILED: {}", failed.join(", "));
        std::process::exit(1);
    }
}
