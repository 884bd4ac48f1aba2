//! The Llama block forward on the GPU: checked against the standard block on
//! the host (f64, with the unfused bf16 block as yardstick), and timed
//! against the sum of its bare cuBLAS GEMMs.

use std::cell::RefCell;
use std::time::Duration;

use coda_runtime::baseline::Cublas;
use coda_runtime::llama::reference::{Path, forward_rows};
use coda_runtime::llama::{BlockConfig, BlockState, BlockWeights, HostWeights, block_forward, layout};
use coda_runtime::{Error, Stream, Tensor, bench, bf16};
use llama_norm::host::{Check, Rng, sample_rows, to_f64};

use crate::harness::Report;

/// Llama-style shapes: `heads = d / 128`, GQA with `heads / 4` kv heads.
pub fn config(d: usize, ffn: usize) -> BlockConfig {
    let heads = d / 128;
    BlockConfig { hidden: d, ffn, heads, kv_heads: (heads / 4).max(1), head_dim: 128, eps: 1e-5, rope_theta: 10000.0 }
}

/// Random weights in the kernels' layout, built from checkpoint-layout tensors.
pub fn random_weights(c: &BlockConfig, rng: &mut Rng) -> HostWeights {
    let (d, f, hd) = (c.hidden, c.ffn, c.head_dim);
    let u = |rng: &mut Rng, n: usize, k: usize| rng.bf16s(n * k, -(3.0 / k as f64).sqrt(), (3.0 / k as f64).sqrt());
    let gate = u(rng, f, d);
    let up = u(rng, f, d);
    let (wq, wk, wv) = (u(rng, c.heads * hd, d), u(rng, c.kv_heads * hd, d), u(rng, c.kv_heads * hd, d));
    HostWeights {
        wo: u(rng, d, c.attn_width()),
        gamma1: rng.bf16s(d, 0.5, 1.5),
        w_gate_up: layout::interleave_gate_up(&gate, &up, f, d),
        w_down: u(rng, d, f),
        gamma2: rng.bf16s(d, 0.5, 1.5),
        w_qkv: layout::qkv_from_checkpoint(&wq, &wk, &wv, c.heads, c.kv_heads, hd, d),
    }
}

struct Inputs {
    attn: Vec<bf16>,
    x0: Vec<bf16>,
    pos: Vec<f32>,
}

fn random_inputs(c: &BlockConfig, m: usize, rng: &mut Rng) -> Inputs {
    Inputs {
        attn: rng.bf16s(m * c.attn_width(), -1.0, 1.0),
        x0: rng.bf16s(m * c.hidden, -1.0, 1.0),
        // Sequences of 4096 tokens.
        pos: (0..m).map(|i| (i % 4096) as f32).collect(),
    }
}

/// The forward at `m` tokens on fresh random data; `sample` rows are checked.
pub fn forward_case(stream: &Stream, c: &BlockConfig, m: usize, sample: usize, seed: u64) -> Result<Report, Error> {
    let mut rng = Rng::new(seed);
    let hw = random_weights(c, &mut rng);
    let w = BlockWeights::upload(stream, *c, &hw)?;
    let inp = random_inputs(c, m, &mut rng);
    let attn = Tensor::from_host(stream, &inp.attn, &[m, c.attn_width()])?;
    let x0 = Tensor::from_host(stream, &inp.x0, &[m, c.hidden])?;
    let pos = Tensor::from_host(stream, &inp.pos, &[m])?;
    let mut s = BlockState::new(stream, c, m)?;
    let run = |s: &mut BlockState| -> Result<[Vec<bf16>; 5], Error> {
        s.poison(stream)?;
        block_forward(stream, &w, &attn, &x0, &pos, s)?;
        Ok([s.x1.to_host(stream)?, s.z1.to_host(stream)?, s.y1.to_host(stream)?, s.x2.to_host(stream)?, s.qkv.to_host(stream)?])
    };
    let got = run(&mut s)?;
    let again = run(&mut s)?;
    let repeat_bitwise = got.iter().zip(&again).all(|(a, b)| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()));

    let rows = sample_rows(m, sample, &mut rng);
    let reference = forward_rows(c, &hw, &inp.attn, &inp.x0, &inp.pos, &rows, Path::F64);
    let bf16_path = forward_rows(c, &hw, &inp.attn, &inp.x0, &inp.pos, &rows, Path::Bf16Unfused);
    let pick = |v: &[bf16], width: usize| -> Vec<f64> {
        rows.iter().flat_map(|&r| to_f64(&v[r * width..(r + 1) * width])).collect()
    };
    let (d, f, q) = (c.hidden, c.ffn, c.qkv_width());
    let checks = vec![
        Check::new("x1 (residual after o_proj)", &pick(&got[0], d), &bf16_path.x1, &reference.x1),
        Check::new("z1 (gate_up pre-activation)", &pick(&got[1], 2 * f), &bf16_path.z1, &reference.z1),
        Check::new("y1 (SwiGLU)", &pick(&got[2], f), &bf16_path.y1, &reference.y1),
        Check::new("x2 (residual out)", &pick(&got[3], d), &bf16_path.x2, &reference.x2),
        Check::new("qkv (RoPE)", &pick(&got[4], q), &bf16_path.qkv, &reference.qkv),
    ];
    Ok(Report { rows_checked: rows.len(), checks, repeat_bitwise })
}

/// Median ms of the fused forward and of its four bare cuBLAS GEMMs (summed).
pub fn time_forward(stream: &Stream, c: &BlockConfig, m: usize, samples: usize, reps: usize) -> Result<(f64, f64), Error> {
    let mut rng = Rng::new(3);
    let w = BlockWeights::upload(stream, *c, &random_weights(c, &mut rng))?;
    let inp = random_inputs(c, m, &mut rng);
    let attn = Tensor::from_host(stream, &inp.attn, &[m, c.attn_width()])?;
    let x0 = Tensor::from_host(stream, &inp.x0, &[m, c.hidden])?;
    let pos = Tensor::from_host(stream, &inp.pos, &[m])?;
    let state = RefCell::new(BlockState::new(stream, c, m)?);
    let blas = Cublas::new(stream)?;
    // Bare GEMM outputs of the same shapes as the fused ones.
    let out = RefCell::new([
        Tensor::<bf16>::zeros(stream, &[m, c.hidden])?,
        Tensor::<bf16>::zeros(stream, &[m, 2 * c.ffn])?,
        Tensor::<bf16>::zeros(stream, &[m, c.hidden])?,
        Tensor::<bf16>::zeros(stream, &[m, c.qkv_width()])?,
    ]);
    let mut fused = |_: usize| block_forward(stream, &w, &attn, &x0, &pos, &mut state.borrow_mut());
    let mut gemms = |_: usize| {
        let s = state.borrow();
        let mut o = out.borrow_mut();
        blas.linear(&attn, &w.wo, &mut o[0])?;
        blas.linear(&s.u1, &w.w_gate_up, &mut o[1])?;
        blas.linear(&s.y1, &w.w_down, &mut o[2])?;
        blas.linear(&s.u2, &w.w_qkv, &mut o[3])
    };
    let t = bench::interleaved(stream, Duration::from_secs(1), samples, reps, &mut [&mut fused, &mut gemms])?;
    Ok((t[0], t[1]))
}
