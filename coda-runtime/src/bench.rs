//! Fair kernel timing on one stream: CUDA events around `reps` back-to-back
//! launches per sample, at least `warmup` of warm-up first (clocks settle
//! under load), samples of the compared kernels interleaved, each round in
//! the next order of a Williams design (a balanced Latin square: over its
//! rounds every kernel follows every other equally often, so no kernel's
//! samples always follow the same kernel), medians reported. Callers rotate
//! inputs larger than the L2 through the launch index each closure receives.

use std::time::{Duration, Instant};

use cudarc::driver::sys::CUevent_flags;

use crate::{Error, Stream};

/// One kernel under test: called with the launch index, it enqueues one launch.
pub type Launch<'a> = &'a mut dyn FnMut(usize) -> Result<(), Error>;

/// A median needs a sample, and a time per launch a launch.
fn check_counts(samples: usize, reps: usize) -> Result<(), Error> {
    if samples == 0 {
        return Err(Error::arg("samples", "must be ≥ 1 (the median of none is undefined)"));
    }
    if reps == 0 {
        return Err(Error::arg("reps", "must be ≥ 1 (a sample times reps launches)"));
    }
    Ok(())
}

/// Median milliseconds per launch of each kernel, in the order given.
/// `samples` or `reps` of 0 is [`Error::Arg`], before anything is launched.
pub fn interleaved(
    stream: &Stream,
    warmup: Duration,
    samples: usize,
    reps: usize,
    kernels: &mut [Launch<'_>],
) -> Result<Vec<f64>, Error> {
    check_counts(samples, reps)?;
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
    for round in 0..samples {
        for i in round_order(round, kernels.len()) {
            times[i].push(sample(&mut kernels[i])?);
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

/// The kernels' order in sample round `round`: row `round` of a Williams
/// design for `n` kernels (n rows for even n, 2n for odd, then again). Row
/// 0 is 0, 1, n−1, 2, n−2, …; row r adds r (mod n); for odd n the rows
/// from n on are the first n reversed. In a fixed order two listings of one
/// kernel in one search (different predecessors) differed by 12% at a
/// power-capped shape (bench/NOTES.md, session 31).
fn round_order(round: usize, n: usize) -> impl Iterator<Item = usize> {
    let rows = if n % 2 == 0 { n } else { 2 * n };
    let row = round % rows.max(1);
    let (shift, reversed) = (row % n.max(1), row >= n);
    let first = move |j: usize| if j % 2 == 1 { j.div_ceil(2) } else { (n - j / 2) % n };
    (0..n).map(move |j| (first(if reversed { n - 1 - j } else { j }) + shift) % n)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every round visits each kernel once, and over a design's rounds
    /// each kernel follows each other equally often (once for even n, twice
    /// for odd n over 2n rounds).
    #[test]
    fn rounds_balance_predecessors() {
        assert_eq!(round_order(0, 4).collect::<Vec<_>>(), [0, 1, 3, 2]);
        assert_eq!(round_order(1, 4).collect::<Vec<_>>(), [1, 2, 0, 3]);
        assert_eq!(round_order(0, 1).collect::<Vec<_>>(), [0]);
        for n in 1..=13 {
            let rows = if n % 2 == 0 { n } else { 2 * n };
            let mut follows = vec![vec![0; n]; n];
            for r in 0..rows {
                let order: Vec<usize> = round_order(r, n).collect();
                let mut sorted = order.clone();
                sorted.sort();
                assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "n = {n}, round {r}");
                for w in order.windows(2) {
                    follows[w[1]][w[0]] += 1;
                }
            }
            let want = if n % 2 == 0 { 1 } else { 2 };
            for (b, row) in follows.iter().enumerate() {
                for (a, &count) in row.iter().enumerate() {
                    assert_eq!(count, if a == b { 0 } else { want }, "n = {n}: {b} after {a}");
                }
            }
        }
    }

    /// No samples (the median would index an empty list) or no launches per
    /// sample (a time of 0 / 0) are refused.
    #[test]
    fn samples_and_reps_are_positive() {
        assert!(check_counts(7, 1).is_ok());
        for (samples, reps, name) in [(0, 1, "samples"), (7, 0, "reps"), (0, 0, "samples")] {
            match check_counts(samples, reps) {
                Err(Error::Arg { name: n, rule }) => assert!(n == name && rule.contains("must be ≥ 1"), "{rule}"),
                other => panic!("samples {samples}, reps {reps}: expected `{name}` refused, got {other:?}"),
            }
        }
    }
}
