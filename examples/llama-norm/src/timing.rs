//! Times the two kernels, the aux reduction and cuBLASLt with
//! `coda_runtime::bench::interleaved` (≥ 1 s warm-up, interleaved samples,
//! medians), inputs rotated across sets larger than the 60 MB L2.

use std::time::Duration;

use coda_runtime::{Error, Stream, Tensor, aux, bench};
use coda_tests::baseline::CublasLt;
use coda_tests::host::Rng;
use crate::{NormLinear, residual_rms_partial, rowscale};

#[derive(Debug, Clone)]
pub struct Timing {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// Median milliseconds per launch.
    pub oproj_epilogue: f64,
    pub rowscale_epilogue: f64,
    pub rms_aux: f64,
    pub cublas_gemm: f64,
}

struct Set {
    x: Tensor<coda_runtime::bf16>,
    z: Tensor<coda_runtime::bf16>,
    out: NormLinear,
}

/// Times the o_proj epilogue kernel (`[m, k]·[n, k]ᵀ` with residual, γ and Σh²),
/// the rowscale kernel (`[m, n]·[n, n]ᵀ`), the aux reduction and a cuBLASLt GEMM
/// `[m, k]·[n, k]ᵀ`, interleaved in one process.
pub fn time_case(stream: &Stream, m: usize, n: usize, k: usize, samples: usize, reps: usize) -> Result<Timing, Error> {
    let mut rng = Rng::new(7);
    let per_set = (m * k + 3 * m * n) * 2;
    let sets_n = (256usize << 20).div_ceil(per_set).clamp(2, 8);
    let wo = Tensor::from_host(stream, &rng.bf16s(n * k, -0.02, 0.02), &[n, k])?;
    let w1 = Tensor::from_host(stream, &rng.bf16s(n * n, -0.02, 0.02), &[n, n])?;
    let gamma = Tensor::from_host(stream, &rng.bf16s(n, 0.5, 1.5), &[n])?;
    let mut sets = vec![];
    for _ in 0..sets_n {
        let x = Tensor::from_host(stream, &rng.bf16s(m * k, -1.0, 1.0), &[m, k])?;
        let z = Tensor::from_host(stream, &rng.bf16s(m * n, -1.0, 1.0), &[m, n])?;
        let mut out = NormLinear::new(stream, m, n, n)?;
        out.r = Tensor::from_host(stream, &vec![1.0f32; m], &[m])?;
        sets.push(Set { x, z, out });
    }
    let blas = CublasLt::new(stream)?;
    let cub_out = std::cell::RefCell::new(Tensor::zeros(stream, &[m, n])?);

    let sets = std::cell::RefCell::new(sets);
    let set = |i: usize| i % sets_n;
    let mut oproj = |i: usize| {
        let s = &mut sets.borrow_mut()[set(i)];
        residual_rms_partial::launch(
            stream,
            residual_rms_partial::Args { a: &s.x, b: &wo, z: &s.z, gamma: &gamma, h: &mut s.out.h, u: &mut s.out.u, sq: &mut s.out.sq },
        )
    };
    let mut rows = |i: usize| {
        let s = &mut sets.borrow_mut()[set(i)];
        rowscale::launch(stream, rowscale::Args { a: &s.out.u, b: &w1, r: &s.out.r, y: &mut s.out.y })
    };
    let mut auxr = |i: usize| {
        let s = &mut sets.borrow_mut()[set(i)];
        aux::rms_from_partials(stream, &s.out.sq, n, 1e-5, &mut s.out.r)
    };
    // Every set's partials exist before the aux reduction is timed on them.
    for i in 0..sets_n {
        oproj(i)?;
    }
    let mut cub = |i: usize| blas.linear(stream, &sets.borrow()[set(i)].x, &wo, &mut *cub_out.borrow_mut());
    let t = bench::interleaved(stream, Duration::from_secs(1), samples, reps, &mut [&mut oproj, &mut rows, &mut auxr, &mut cub])?;
    Ok(Timing { m, n, k, oproj_epilogue: t[0], rowscale_epilogue: t[1], rms_aux: t[2], cublas_gemm: t[3] })
}
