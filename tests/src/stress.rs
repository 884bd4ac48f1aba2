//! Concurrency stress on the GPU: threads launching on one shared `Stream`
//! and threads with a stream each, at once, for a given time. Each thread
//! first verifies its program against the interpreter (`harness::verify`),
//! then relaunches it on fresh poisoned outputs and compares every output
//! element bitwise with its first run.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use coda_runtime::dsl::Program;
use coda_runtime::{Error, Kernel, Stream};

use crate::harness::{self, Setup};
use crate::host::Rng;
use crate::programs::{gated_mix, lse_rows, norm_weight_grad, rowscale_rope, two_partials};

/// The programs the threads cycle through: partials of each kind, a map
/// program, several configs.
fn programs() -> [(&'static Kernel, Program); 5] {
    [
        (&gated_mix::KERNEL, gated_mix::program()),
        (&two_partials::KERNEL, two_partials::program()),
        (&norm_weight_grad::KERNEL, norm_weight_grad::program()),
        (&rowscale_rope::KERNEL, rowscale_rope::program()),
        (&lse_rows::KERNEL, lse_rows::program()),
    ]
}

/// What the stress run saw.
pub struct Outcome {
    pub threads: usize,
    pub launches: usize,
    pub mismatched_launches: usize,
    pub failures: Vec<String>,
    pub seconds: f64,
}

impl Outcome {
    pub fn pass(&self) -> bool {
        self.mismatched_launches == 0 && self.failures.is_empty() && self.launches > 0
    }
}

/// `shared_threads` threads on `stream` and `own_threads` threads with a
/// stream each, for `seconds`.
pub fn run(stream: &Stream, shared_threads: usize, own_threads: usize, seconds: f64) -> Outcome {
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let launches = AtomicUsize::new(0);
    let mismatched = AtomicUsize::new(0);
    let start = Instant::now();
    let failures: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..shared_threads + own_threads)
            .map(|t| {
                let (launches, mismatched) = (&launches, &mismatched);
                s.spawn(move || -> Result<(), String> {
                    let own;
                    let stream = if t < shared_threads {
                        stream
                    } else {
                        own = Stream::new(stream.ordinal()).map_err(|e| e.to_string())?;
                        &own
                    };
                    worker(stream, t, deadline, launches, mismatched).map_err(|e| format!("thread {t}: {e}"))
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().unwrap_or_else(|_| Err("a thread panicked".into())).err()).collect()
    });
    Outcome {
        threads: shared_threads + own_threads,
        launches: launches.into_inner(),
        mismatched_launches: mismatched.into_inner(),
        failures,
        seconds: start.elapsed().as_secs_f64(),
    }
}

fn worker(stream: &Stream, t: usize, deadline: Instant, launches: &AtomicUsize, mismatched: &AtomicUsize) -> Result<(), String> {
    let err = |e: Error| e.to_string();
    let programs = programs();
    // Ragged shapes, a different one per thread.
    let shapes = [(1000, 528, 264), (777, 784, 136), (1500, 272, 520)];
    let mut round = 0usize;
    while Instant::now() < deadline {
        let (kernel, program) = &programs[(t + round) % programs.len()];
        let shape = shapes[(t + round) % shapes.len()];
        round += 1;
        let seed = 100 * t as u64 + round as u64;
        let report = harness::verify(stream, kernel, program, None, shape, seed).map_err(err)?;
        launches.fetch_add(2, Ordering::Relaxed);
        if !report.pass() {
            let worst: Vec<String> = report.checks.iter().filter(|c| !c.pass()).map(|c| format!("{} err {:.2e}", c.output, c.err)).collect();
            return Err(format!("{} at {shape:?} failed its check (repeat bitwise {}): {}", program.name, report.repeat_bitwise, worst.join(", ")));
        }
        // Then relaunches of one set-up, each against the first.
        let mut rng = Rng::new(seed);
        let mut setup = Setup::new(stream, kernel, program, None, shape, &mut rng).map_err(err)?;
        let program = &Program { config: setup.choice.config, ..program.clone() };
        let first = setup.run(stream, kernel, program).map_err(err)?;
        for _ in 0..20 {
            let again = setup.run(stream, kernel, program).map_err(err)?;
            launches.fetch_add(1, Ordering::Relaxed);
            let same = first.iter().zip(&again).all(|(x, y)| x.iter().zip(y).all(|(a, b)| a.to_bits() == b.to_bits()));
            if !same {
                mismatched.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    Ok(())
}
