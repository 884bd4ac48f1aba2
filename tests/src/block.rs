//! The Llama block forward on the GPU: checked against the standard block on
//! the host (f64, with the unfused bf16 block as yardstick); and the block,
//! forward and backward, timed against the sum of its bare cuBLAS GEMMs.

use std::cell::RefCell;
use std::time::Duration;

use coda_llama::blas::Cublas;
use coda_llama::layout::HeadRows;
use crate::baseline::CublasLt;
use crate::reference::{Path, forward_rows};
use coda_llama::{
    BackwardInputs, BackwardState, BlockConfig, BlockGrads, BlockState, BlockWeights, ForwardInputs, HostWeights, QkNorm, block_backward, block_forward, layout,
};
use coda_runtime::{Error, Stream, Tensor, bench, bf16};
use crate::host::{Check, Rng, sample_rows, to_f64};

use crate::harness::Report;

/// Llama-style shapes: `heads = d / 128`, GQA with `heads / 4` kv heads.
pub fn config(d: usize, ffn: usize) -> BlockConfig {
    let heads = d / 128;
    BlockConfig { hidden: d, ffn, heads, kv_heads: (heads / 4).max(1), head_dim: 128, eps: 1e-5, rope_theta: 10000.0, qk_norm: false }
}

/// As [`config`], with QK-norm (Qwen3-style).
pub fn config_qk_norm(d: usize, ffn: usize) -> BlockConfig {
    BlockConfig { qk_norm: true, ..config(d, ffn) }
}

/// Random weights in the kernels' layout, built from checkpoint-layout tensors.
pub fn random_weights(c: &BlockConfig, rng: &mut Rng) -> Result<HostWeights, Error> {
    let (d, f, hd) = (c.hidden, c.ffn, c.head_dim);
    let u = |rng: &mut Rng, n: usize, k: usize| rng.bf16s(n * k, -(3.0 / k as f64).sqrt(), (3.0 / k as f64).sqrt());
    let gate = u(rng, f, d);
    let up = u(rng, f, d);
    let (wq, wk, wv) = (u(rng, c.heads * hd, d), u(rng, c.kv_heads * hd, d), u(rng, c.kv_heads * hd, d));
    // QK-norm's weights as a checkpoint holds them (rotate_half order), converted like Wq's rows.
    let norm = |rng: &mut Rng| layout::rope_pairs_adjacent(&rng.bf16s(hd, 0.5, 1.5), HeadRows { heads: 1, head_dim: hd, cols: 1 });
    let qk_norm = if c.qk_norm { Some(QkNorm { q: norm(rng)?, k: norm(rng)? }) } else { None };
    Ok(HostWeights {
        wo: u(rng, d, c.attn_width()),
        gamma1: rng.bf16s(d, 0.5, 1.5),
        w_gate_up: layout::interleave_gate_up(&gate, &up, c)?,
        w_down: u(rng, d, f),
        gamma2: rng.bf16s(d, 0.5, 1.5),
        w_qkv: layout::qkv_from_checkpoint(&wq, &wk, &wv, c)?,
        qk_norm,
    })
}

pub struct Inputs {
    pub attn: Vec<bf16>,
    pub x0: Vec<bf16>,
    pub pos: Vec<f32>,
}

pub fn random_inputs(c: &BlockConfig, m: usize, rng: &mut Rng) -> Inputs {
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
    let hw = random_weights(c, &mut rng)?;
    let w = BlockWeights::upload(stream, *c, &hw)?;
    let inp = random_inputs(c, m, &mut rng);
    let attn = Tensor::from_host(stream, &inp.attn, &[m, c.attn_width()])?;
    let x0 = Tensor::from_host(stream, &inp.x0, &[m, c.hidden])?;
    let pos = Tensor::from_host(stream, &inp.pos, &[m])?;
    let mut s = BlockState::new(stream, c, m)?;
    let run = |s: &mut BlockState| -> Result<Vec<Vec<bf16>>, Error> {
        s.poison()?;
        block_forward(stream, &w, ForwardInputs { attn: &attn, x0: &x0, pos: &pos }, s)?;
        let mut out = vec![s.x1.to_host()?, s.z1.to_host()?, s.y1.to_host()?, s.x2.to_host()?, s.qkv.to_host()?];
        if let Some(n) = &s.qk_norm {
            out.push(n.z2.to_host()?);
        }
        Ok(out)
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
    let qkv_name = if c.qk_norm { "qkv (QK-norm, RoPE)" } else { "qkv (RoPE)" };
    let mut checks = vec![
        Check::new("x1 (residual after o_proj)", &pick(&got[0], d), &bf16_path.x1, &reference.x1),
        Check::new("z1 (gate_up pre-activation)", &pick(&got[1], 2 * f), &bf16_path.z1, &reference.z1),
        Check::new("y1 (SwiGLU)", &pick(&got[2], f), &bf16_path.y1, &reference.y1),
        Check::new("x2 (residual out)", &pick(&got[3], d), &bf16_path.x2, &reference.x2),
        Check::new(qkv_name, &pick(&got[4], q), &bf16_path.qkv, &reference.qkv),
    ];
    if c.qk_norm {
        checks.push(Check::new("z2 (qkv before QK-norm, saved)", &pick(&got[5], q), &bf16_path.z2, &reference.z2));
    }
    Ok(Report { rows_checked: rows.len(), checks, repeat_bitwise, asserts: vec![] })
}

/// Median ms of the block and of the sum of its bare cuBLAS GEMMs, forward
/// and forward + backward, timed in the same process.
#[derive(Clone, Copy, Debug)]
pub struct BlockTimes {
    pub forward: f64,
    pub forward_gemms: f64,
    pub forward_backward: f64,
    pub forward_backward_gemms: f64,
}

/// Times the block at `m` tokens: the fused forward (4 fused GEMMs + 2 aux)
/// against its 4 bare GEMMs, and forward + backward (+ 5 fused launches,
/// 4 aux and 4 weight-gradient GEMMs) against the same 4 + the 4 bare input-
/// gradient GEMMs + the same 4 weight-gradient GEMMs.
pub fn time_block(stream: &Stream, c: &BlockConfig, m: usize, samples: usize, reps: usize) -> Result<BlockTimes, Error> {
    let mut rng = Rng::new(3);
    let w = BlockWeights::upload(stream, *c, &random_weights(c, &mut rng)?)?;
    let inp = random_inputs(c, m, &mut rng);
    let (d, f, ka, q) = (c.hidden, c.ffn, c.attn_width(), c.qkv_width());
    let attn = Tensor::from_host(stream, &inp.attn, &[m, ka])?;
    let x0 = Tensor::from_host(stream, &inp.x0, &[m, d])?;
    let pos = Tensor::from_host(stream, &inp.pos, &[m])?;
    let dx2 = Tensor::from_host(stream, &rng.bf16s(m * d, -1.0, 1.0), &[m, d])?;
    let dqkv = Tensor::from_host(stream, &rng.bf16s(m * q, -1.0, 1.0), &[m, q])?;
    let fwd = RefCell::new(BlockState::new(stream, c, m)?);
    let bwd = RefCell::new(BackwardState::new(stream, c, m)?);
    let grads = RefCell::new(BlockGrads::new(stream, c, m)?);
    // Bare GEMMs through cuBLASLt; the weight gradients through cuBLAS, as in the fused backward.
    let (blas, lt) = (Cublas::new(stream)?, CublasLt::new(stream)?);
    // Bare GEMM outputs of the same shapes as the fused ones.
    let z = |shape: &[usize]| Tensor::<bf16>::zeros(stream, shape);
    let out = RefCell::new([z(&[m, d])?, z(&[m, 2 * f])?, z(&[m, d])?, z(&[m, q])?, z(&[m, d])?, z(&[m, f])?, z(&[m, d])?, z(&[m, ka])?]);
    let forward_gemms = |s: &BlockState, o: &mut [Tensor<bf16>; 8]| -> Result<(), Error> {
        lt.linear(stream, &attn, &w.wo, &mut o[0])?;
        lt.linear(stream, &s.u1, &w.w_gate_up, &mut o[1])?;
        lt.linear(stream, &s.y1, &w.w_down, &mut o[2])?;
        lt.linear(stream, &s.u2, &w.w_qkv, &mut o[3])
    };
    // The weight gradients in f32, as `BlockGrads::new`'s.
    let zf = |shape: &[usize]| Tensor::<f32>::zeros(stream, shape);
    let dw = RefCell::new([zf(&[q, d])?, zf(&[d, f])?, zf(&[2 * f, d])?, zf(&[d, ka])?]);
    let backward_gemms = |s: &BlockState, b: &BackwardState, g: &BlockGrads, o: &mut [Tensor<bf16>; 8]| -> Result<(), Error> {
        let dw = &mut *dw.borrow_mut();
        lt.matmul(stream, &b.dz2, &w.w_qkv, &mut o[4])?;
        blas.weight_grad(stream, &b.dz2, &b.xg2, &mut dw[0], false)?;
        lt.matmul(stream, &b.dh2, &w.w_down, &mut o[5])?;
        blas.weight_grad(stream, &b.dh2, &s.y1, &mut dw[1], false)?;
        lt.matmul(stream, &b.dz1, &w.w_gate_up, &mut o[6])?;
        blas.weight_grad(stream, &b.dz1, &b.xg1, &mut dw[2], false)?;
        lt.matmul(stream, &g.dx0, &w.wo, &mut o[7])?;
        blas.weight_grad(stream, &g.dx0, &attn, &mut dw[3], false)
    };
    let mut fused_fwd = |_: usize| block_forward(stream, &w, ForwardInputs { attn: &attn, x0: &x0, pos: &pos }, &mut fwd.borrow_mut());
    let mut bare_fwd = |_: usize| forward_gemms(&fwd.borrow(), &mut out.borrow_mut());
    let t = bench::interleaved(stream, Duration::from_secs(1), samples, reps, &mut [&mut fused_fwd, &mut bare_fwd])?;
    let mut fused_both = |_: usize| {
        let mut s = fwd.borrow_mut();
        block_forward(stream, &w, ForwardInputs { attn: &attn, x0: &x0, pos: &pos }, &mut s)?;
        block_backward(stream, &w, &s, BackwardInputs { attn: &attn, pos: &pos, dx2: &dx2, dqkv: &dqkv }, &mut bwd.borrow_mut(), &mut grads.borrow_mut())
    };
    let mut bare_both = |_: usize| {
        let (s, mut o) = (fwd.borrow(), out.borrow_mut());
        forward_gemms(&s, &mut o)?;
        backward_gemms(&s, &bwd.borrow(), &grads.borrow(), &mut o)
    };
    let tb = bench::interleaved(stream, Duration::from_secs(1), samples, reps, &mut [&mut fused_both, &mut bare_both])?;
    Ok(BlockTimes { forward: t[0], forward_gemms: t[1], forward_backward: tb[0], forward_backward_gemms: tb[1] })
}
