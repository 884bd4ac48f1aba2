//! Every program of the generated batch on the GPU at a ragged shape, in
//! its own config, against the f64 interpreter with the project's criterion,
//! each output bitwise repeatable. Without a GPU it prints why and passes.
//! `gpu_random [--sanitize]`.

use coda_random_programs::{SHAPES, all};
use coda_runtime::dsl::ir::OperandScale;
use coda_runtime::{Choice, Stream};
use coda_tests::harness;

fn main() {
    // `--sanitize`: one small ragged shape, for compute-sanitizer (scripts/sanitize.sh).
    let sanitize = std::env::args().any(|a| a == "--sanitize");
    let shapes: &[(usize, usize, usize)] = if sanitize { &[(200, 144, 72)] } else { &SHAPES };
    let programs = all();
    let stream = match Stream::new(0) {
        Ok(s) => s,
        Err(e) => {
            println!("gpu_random: SKIPPED, {e}. {} programs compiled; their results come from runs on an H200.", programs.len());
            return;
        }
    };
    let mut failed = vec![];
    for (i, g) in programs.iter().enumerate() {
        let (m, n, k) = shapes[i % shapes.len()];
        // 8-bit operands need K in whole 16-byte rows, and blockwise scales M a multiple of 4.
        let ops = g.kernel.operands();
        let m = if ops.scale == OperandScale::Blockwise { m.next_multiple_of(4) } else { m };
        let shape = if ops.is_fp8() { (m, n, k.next_multiple_of(16)) } else { (m, n, k) };
        let choice = Choice::own(g.kernel);
        let t = std::time::Instant::now();
        let outcome = harness::verify(&stream, g.kernel, &g.program, Some(choice), shape, 1000 + i as u64);
        let (pass, detail) = match outcome {
            Ok(r) => {
                let worst = r.checks.iter().map(|c| format!("{} {:.2e}/{:.2e}{}", c.output, c.err, c.yardstick, c.undetermined_note()));
                let mut detail = format!("repeat bitwise {}; err/bf16 err: {}", r.repeat_bitwise, worst.collect::<Vec<_>>().join(", "));
                // Where each failing output is furthest off (the element index of the compared rows).
                for c in r.checks.iter().filter(|c| !c.pass()) {
                    if let Some((i, ours, reference, bf16)) = c.worst {
                        detail += &format!("\n    {} worst at element {i}: ours {ours:e}, f64 {reference:e}, bf16 path {bf16:e}", c.output);
                    }
                }
                (r.pass(), detail)
            }
            Err(e) => (false, format!("error: {e}")),
        };
        let (m, n, k) = shape;
        println!(
            "{} {} [{}] M={m} N={n} K={k} ({:.1} s): {detail}",
            if pass { "PASS" } else { "FAIL" },
            g.name,
            g.program.config.name(),
            t.elapsed().as_secs_f64()
        );
        if !pass {
            println!("{}", g.source);
            failed.push(g.name);
        }
    }
    println!("{} passed, {} failed", programs.len() - failed.len(), failed.len());
    if !failed.is_empty() {
        println!("FAILED: {}", failed.join(", "));
        std::process::exit(1);
    }
}
