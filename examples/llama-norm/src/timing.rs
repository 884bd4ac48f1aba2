//! Kernel timing with CUDA events: ≥ 1 s warm-up, interleaved samples of the
//! compared kernels, each sample `reps` back-to-back launches, medians,
//! inputs rotated across sets larger than the 60 MB L2.

use coda_runtime::cudarc::driver::sys::CUevent_flags;
use coda_runtime::baseline::Cublas;
use coda_runtime::{Error, Stream, Tensor, aux};

use crate::host::Rng;
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
/// the rowscale kernel (`[m, n]·[n, n]ᵀ`), the aux reduction and a cuBLAS GEMM
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
    let blas = Cublas::new(stream)?;
    let mut cub_out = Tensor::zeros(stream, &[m, n])?;

    let mut oproj = |s: &mut Set| {
        residual_rms_partial::launch(
            stream,
            residual_rms_partial::Args { a: &s.x, b: &wo, z: &s.z, gamma: &gamma, h: &mut s.out.h, u: &mut s.out.u, sq: &mut s.out.sq },
        )
    };
    let mut rows = |s: &mut Set| rowscale::launch(stream, rowscale::Args { a: &s.out.u, b: &w1, r: &s.out.r, y: &mut s.out.y });
    let mut auxr = |s: &mut Set| aux::rms_from_partials(stream, &s.out.sq, n, 1e-5, &mut s.out.r);
    let mut cub = |s: &mut Set| blas.linear(&s.x, &wo, &mut cub_out);

    let ctx = stream.cuda().context().clone();
    let ev = || ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT));
    let (e0, e1) = (ev()?, ev()?);
    let time = |f: &mut dyn FnMut(&mut Set) -> Result<(), Error>, sets: &mut Vec<Set>, reps: usize| -> Result<f64, Error> {
        e0.record(stream.cuda())?;
        for i in 0..reps {
            let len = sets.len();
            f(&mut sets[i % len])?;
        }
        e1.record(stream.cuda())?;
        e1.synchronize()?;
        Ok(e0.elapsed_ms(&e1)? as f64 / reps as f64)
    };
    // Warm-up: at least one second of GEMMs so clocks settle.
    let start = std::time::Instant::now();
    while start.elapsed().as_secs_f64() < 1.0 {
        time(&mut oproj, &mut sets, reps)?;
        time(&mut cub, &mut sets, reps)?;
    }
    let mut t = [vec![], vec![], vec![], vec![]];
    for _ in 0..samples {
        t[0].push(time(&mut oproj, &mut sets, reps)?);
        t[1].push(time(&mut rows, &mut sets, reps)?);
        t[2].push(time(&mut auxr, &mut sets, reps)?);
        t[3].push(time(&mut cub, &mut sets, reps)?);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    Ok(Timing {
        m,
        n,
        k,
        oproj_epilogue: median(&mut t[0]),
        rowscale_epilogue: median(&mut t[1]),
        rms_aux: median(&mut t[2]),
        cublas_gemm: median(&mut t[3]),
    })
}
