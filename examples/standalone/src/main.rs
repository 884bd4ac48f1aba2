//! One program, launched as the README shows: `h = x·Woᵀ + z`, `u = h ⊙ γ`,
//! then RMSNorm's `r` from the Σh² partials; checked on sampled rows against
//! the host in f64. Without an H100/H200 it says so and exits cleanly.

mod programs;

use coda_runtime as coda;
use coda::{RowPartials, Stream, Tensor, aux, bf16};
use programs::residual_rms_partial;

fn main() -> Result<(), coda::Error> {
    let stream = match Stream::new(0) {
        Ok(s) => s,
        Err(e) => {
            println!("built; not run: {e}");
            return Ok(());
        }
    };
    let (m, d, k) = (1000, 512, 264);
    let mut seed = 1u64;
    let mut rand = |n: usize| -> Vec<bf16> {
        (0..n)
            .map(|_| {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                bf16::from_f32(((seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0)
            })
            .collect()
    };
    let (xh, wh, zh, gh) = (rand(m * k), rand(d * k), rand(m * d), rand(d));
    let x = Tensor::from_host(&stream, &xh, &[m, k])?;
    let w_o = Tensor::from_host(&stream, &wh, &[d, k])?;
    let x0 = Tensor::from_host(&stream, &zh, &[m, d])?;
    let g1 = Tensor::from_host(&stream, &gh, &[d])?;
    let (mut h, mut u) = (Tensor::zeros(&stream, &[m, d])?, Tensor::zeros(&stream, &[m, d])?);
    let mut sq = RowPartials::new();
    let mut r = Tensor::<f32>::zeros(&stream, &[m])?;
    residual_rms_partial::launch(&stream, residual_rms_partial::Args {
        a: &x, b: &w_o, z: &x0, gamma: &g1, h: &mut h, u: &mut u, sq: &mut sq,
    })?;
    aux::rms_from_partials(&stream, &sq, d, 1e-5, &mut r)?;
    let r = r.to_host()?;
    let f = |v: bf16| f64::from(v.to_f32());
    let mut worst = 0f64;
    for row in [0, 1, 499, 998, 999] {
        let hrow: Vec<f64> = (0..d)
            .map(|j| (0..k).map(|i| f(xh[row * k + i]) * f(wh[j * k + i])).sum::<f64>() + f(zh[row * d + j]))
            .collect();
        let want = 1.0 / (hrow.iter().map(|v| v * v).sum::<f64>() / d as f64 + 1e-5).sqrt();
        worst = worst.max((r[row] as f64 - want).abs() / want);
    }
    println!("r on 5 rows: max relative error {worst:.2e}");
    if worst > 1e-2 {
        return Err(coda::Error::arg("r", format!("relative error {worst:.2e} is too large")));
    }
    Ok(())
}
