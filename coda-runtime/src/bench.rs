//! Fair kernel timing on one stream: CUDA events around `reps` back-to-back
//! launches per sample, at least `warmup` of warm-up first (clocks settle
//! under load), samples of the compared kernels interleaved (A, B, A, B, …),
//! medians reported. Callers rotate inputs larger than the L2 through the
//! launch index each closure receives.

use std::time::{Duration, Instant};

use cudarc::driver::sys::CUevent_flags;

use crate::{Error, Stream};

/// One kernel under test: called with the launch index, it enqueues one launch.
pub type Launch<'a> = &'a mut dyn FnMut(usize) -> Result<(), Error>;

/// Median milliseconds per launch of each kernel, in the order given.
pub fn interleaved(
    stream: &Stream,
    warmup: Duration,
    samples: usize,
    reps: usize,
    kernels: &mut [Launch<'_>],
) -> Result<Vec<f64>, Error> {
    let ctx = stream.cuda().context().clone();
    let start = ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
    let stop = ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
    let mut launch_index = 0usize;
    let mut sample = |k: &mut Launch<'_>| -> Result<f64, Error> {
        start.record(stream.cuda())?;
        for _ in 0..reps {
            k(launch_index)?;
            launch_index += 1;
        }
        stop.record(stream.cuda())?;
        stop.synchronize()?;
        Ok(start.elapsed_ms(&stop)? as f64 / reps as f64)
    };
    let t0 = Instant::now();
    while t0.elapsed() < warmup {
        for k in kernels.iter_mut() {
            sample(k)?;
        }
    }
    let mut times = vec![Vec::with_capacity(samples); kernels.len()];
    for _ in 0..samples {
        for (k, t) in kernels.iter_mut().zip(&mut times) {
            t.push(sample(k)?);
        }
    }
    Ok(times
        .into_iter()
        .map(|mut t| {
            t.sort_by(f64::total_cmp);
            t[t.len() / 2]
        })
        .collect())
}
