//! The block backward and the LM-head tail on the GPU, checked against the
//! standard block on the host (f64, the unfused bf16 block as yardstick).
//!
//! Rows are independent, so per-row tensors are checked on sampled rows,
//! which include whole M-tiles so that the norm weights' column partials of
//! those tiles are checked too. Weight gradients sum over every row: `full`
//! cases (small shapes) compare them with the reference end to end; every
//! case also compares sampled entries with f64 sums over all rows of the
//! GEMM operands the device saved (themselves checked on the sampled rows).

use coda_runtime::dsl::interp::round_bf16;
use crate::reference::{BackwardRows, Path, WeightGrads, backward_rows, head_rows};
use coda_llama::{
    BackwardInputs, BackwardState, BlockConfig, BlockGrads, BlockState, BlockWeights, ForwardInputs,
    HeadBackwardState, HeadGrads, HeadLoss, HeadState, HeadWeights, block_backward, block_forward, head_backward, head_backward_launches,
    head_forward, head_forward_backward, head_forward_backward_launches, head_forward_launches, WeightGrad,
};
use coda_runtime::{ColPartials, Error, Launches, Stream, Tensor, bf16};
use crate::host::{Check, Rng, to_f64};

use crate::block::{Inputs, random_inputs, random_weights};
use crate::harness::Report;

fn f32s(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

/// Rows of a `[M, width]` host tensor.
fn pick(v: &[f64], width: usize, rows: &[usize]) -> Vec<f64> {
    rows.iter().flat_map(|&r| v[r * width..(r + 1) * width].iter().copied()).collect()
}

/// The first and last M-tiles (whole) and `extra` random rows between them.
fn tile_rows(m: usize, tile_m: usize, extra: usize, rng: &mut Rng) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
    let first: Vec<usize> = (0..tile_m.min(m)).collect();
    let last_start = (m - 1) / tile_m * tile_m;
    let last: Vec<usize> = if last_start == 0 { vec![] } else { (last_start..m).collect() };
    let between = last_start.saturating_sub(tile_m);
    let mut mid: Vec<usize> = if between == 0 { vec![] } else { (0..extra).map(|_| tile_m + rng.next_u64() as usize % between).collect() };
    mid.sort_unstable();
    mid.dedup();
    (first, mid, last)
}

/// Sampled entries of `dw[n, k] = dyᵀ · x` over all `m` rows, in f64, and as
/// an unfused bf16 GEMM would return them (f32 accumulation, bf16 result).
fn weight_grad_entries(dy: &[f64], x: &[f64], m: usize, n: usize, k: usize, entries: &[(usize, usize)]) -> (Vec<f64>, Vec<f64>) {
    let exact: Vec<f64> = entries.iter().map(|&(i, j)| (0..m).map(|r| dy[r * n + i] * x[r * k + j]).sum()).collect();
    let bf = entries
        .iter()
        .map(|&(i, j)| round_bf16((0..m).fold(0f32, |s, r| s + (dy[r * n + i] * x[r * k + j]) as f32) as f64))
        .collect();
    (exact, bf)
}

fn entries(n: usize, k: usize, count: usize, rng: &mut Rng) -> Vec<(usize, usize)> {
    let mut e = vec![(0, 0), (n - 1, k - 1)];
    e.extend((0..count).map(|_| ((rng.next_u64() as usize) % n, (rng.next_u64() as usize) % k)));
    e
}

/// Forward then backward at `m` tokens on fresh random data; the weight
/// matrices' gradients in bf16 with `bf16_weights`, else f32.
pub fn backward_case(
    stream: &Stream,
    c: &BlockConfig,
    m: usize,
    extra_rows: usize,
    seed: u64,
    full: bool,
    bf16_weights: bool,
) -> Result<Report, Error> {
    let mut rng = Rng::new(seed);
    let hw = random_weights(c, &mut rng)?;
    let w = BlockWeights::upload(stream, *c, &hw)?;
    let Inputs { attn: attn_h, x0: x0_h, pos: pos_h } = random_inputs(c, m, &mut rng);
    let (d, f, ka, q) = (c.hidden, c.ffn, c.attn_width(), c.qkv_width());
    let dx2_h = rng.bf16s(m * d, -1.0, 1.0);
    let dqkv_h = rng.bf16s(m * q, -1.0, 1.0);
    let attn = Tensor::from_host(stream, &attn_h, &[m, ka])?;
    let x0 = Tensor::from_host(stream, &x0_h, &[m, d])?;
    let pos = Tensor::from_host(stream, &pos_h, &[m])?;
    let dx2 = Tensor::from_host(stream, &dx2_h, &[m, d])?;
    let dqkv = Tensor::from_host(stream, &dqkv_h, &[m, q])?;
    let mut fs = BlockState::new(stream, c, m)?;
    let mut bs = BackwardState::new(stream, c, m)?;
    let mut g = if bf16_weights { BlockGrads::new_bf16_weights(stream, c, m)? } else { BlockGrads::new(stream, c, m)? };
    let run = |fs: &mut BlockState, bs: &mut BackwardState, g: &mut BlockGrads| -> Result<Vec<Vec<f64>>, Error> {
        fs.poison()?;
        bs.poison()?;
        g.poison()?;
        block_forward(stream, &w, ForwardInputs { attn: &attn, x0: &x0, pos: &pos }, fs)?;
        block_backward(stream, &w, fs, BackwardInputs { attn: &attn, pos: &pos, dx2: &dx2, dqkv: &dqkv }, bs, g)?;
        let b = |t: &Tensor<bf16>| t.to_host().map(|v| to_f64(&v));
        let s = |t: &Tensor<f32>| t.to_host().map(|v| f32s(&v));
        let p = |t: &ColPartials| s(t.tensor().ok_or_else(|| Error::arg("dgamma partials", "not written"))?);
        let w = |t: &WeightGrad<Tensor<bf16>, Tensor<f32>>| match t {
            WeightGrad::Bf16(t) => b(t),
            WeightGrad::F32(t) => s(t),
            WeightGrad::Frozen => Ok(vec![]),
        };
        let mut out = vec![
            b(&bs.dz2)?, s(&bs.s2)?, b(&bs.dh2)?, b(&bs.xg2)?, b(&bs.dz1)?, s(&bs.s1)?, b(&bs.xg1)?, b(&g.dx0)?, b(&g.dattn)?,
            p(&bs.dgamma2_partials)?, p(&bs.dgamma1_partials)?, s(&g.dgamma2)?, s(&g.dgamma1)?,
            w(&g.dw_qkv)?, w(&g.dw_down)?, w(&g.dw_gate_up)?, w(&g.dwo)?, b(&fs.y1)?,
        ];
        if let Some(n) = &g.qk_norm {
            out.extend([s(&n.q)?, s(&n.k)?, p(&bs.qk_gamma_partials)?]);
        }
        Ok(out)
    };
    let got = run(&mut fs, &mut bs, &mut g)?;
    let again = run(&mut fs, &mut bs, &mut g)?;
    let repeat_bitwise = got.iter().zip(&again).all(|(a, b)| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()));

    // Both norm backwards ran one config: its tile height lays out both dγ partials.
    let tile_m = bs.dgamma2_partials.producer().expect("written above").config.tile_m;
    let (first, mid, last) = if full { ((0..m).collect(), vec![], vec![]) } else { tile_rows(m, tile_m, extra_rows, &mut rng) };
    let sets = [&first, &mid, &last];
    let refs = |path| sets.map(|rows| backward_rows(c, &hw, &attn_h, &x0_h, &pos_h, &dx2_h, &dqkv_h, rows, path, full));
    let (exact, bf) = (refs(Path::F64), refs(Path::Bf16Unfused));
    let rows: Vec<usize> = sets.iter().flat_map(|s| s.iter().copied()).collect();
    let cat = |r: &[(BackwardRows, WeightGrads); 3], f: fn(&BackwardRows) -> &Vec<f64>| {
        r.iter().flat_map(|(b, _)| f(b).iter().copied()).collect::<Vec<f64>>()
    };
    let mut checks = vec![];
    let per_row: [(&str, usize, usize, fn(&BackwardRows) -> &Vec<f64>); 9] = [
        ("dz2 (RoPE, QK-norm backward)", 0, q, |b| &b.dz2),
        ("s2 (Σ dz2 ⊙ z2 / d)", 1, 1, |b| &b.s2),
        ("dh2 (norm 2 backward + dx2)", 2, d, |b| &b.dh2),
        ("x̂2 ⊙ γ2", 3, d, |b| &b.xg2),
        ("dz1 (dSwiGLU)", 4, 2 * f, |b| &b.dz1),
        ("s1 (Σ dz1 ⊙ z1 / d)", 5, 1, |b| &b.s1),
        ("x̂1 ⊙ γ1", 6, d, |b| &b.xg1),
        ("dx0", 7, d, |b| &b.dx0),
        ("dattn", 8, ka, |b| &b.dattn),
    ];
    for (name, i, width, field) in per_row {
        checks.push(Check::new(name, &pick(&got[i], width, &rows), &cat(&bf, field), &cat(&exact, field)));
    }
    // Column partials of the whole tiles sampled: partial t holds Σ over tile t's rows.
    let d_pad = got[9].len() / m.div_ceil(tile_m);
    for k in [0, 2].into_iter().filter(|&k| !full && !sets[k].is_empty()) {
        let t = sets[k][0] / tile_m;
        let (e, b) = (&exact[k].1, &bf[k].1);
        for (name, gi, ew, bw) in [("dγ2 partials", 9, &e.dgamma2, &b.dgamma2), ("dγ1 partials", 10, &e.dgamma1, &b.dgamma1)] {
            checks.push(Check::new(&format!("{name}, M-tile {t}"), &got[gi][t * d_pad..t * d_pad + d], bw, ew));
        }
    }
    // QK-norm's column partials, of the map program's own M-tiles (checked where they are the norm's).
    let qk_tile_m = bs.qk_gamma_partials.producer().map(|p| p.config.tile_m);
    let mut asserts = vec![];
    if c.qk_norm && !full && qk_tile_m != Some(tile_m) {
        // Not a failure (the tuner chose the norm's tile): said, not skipped silently.
        asserts.push((format!("QK-norm dγ partials not checked: their M-tile {qk_tile_m:?} is not the norm's {tile_m}"), true));
    }
    if c.qk_norm && !full && qk_tile_m == Some(tile_m) {
        let q_pad = got[20].len() / m.div_ceil(tile_m);
        for k in [0, 2].into_iter().filter(|&k| !sets[k].is_empty()) {
            let t = sets[k][0] / tile_m;
            let name = format!("QK-norm dγ partials, M-tile {t}");
            checks.push(Check::new(&name, &got[20][t * q_pad..t * q_pad + q], &bf[k].1.dqk_cols, &exact[k].1.dqk_cols));
        }
    }
    if full {
        let (e, b) = (&exact[0].1, &bf[0].1);
        for (name, gi, ew, bw) in [
            ("dγ2", 11, &e.dgamma2, &b.dgamma2),
            ("dγ1", 12, &e.dgamma1, &b.dgamma1),
            ("dWqkv", 13, &e.dw_qkv, &b.dw_qkv),
            ("dWd", 14, &e.dw_down, &b.dw_down),
            ("dWgu", 15, &e.dw_gate_up, &b.dw_gate_up),
            ("dWo", 16, &e.dwo, &b.dwo),
        ] {
            checks.push(Check::new(name, &got[gi], bw, ew));
        }
        if c.qk_norm {
            checks.push(Check::new("QK-norm dγ of q", &got[18], &b.dq_norm, &e.dq_norm));
            checks.push(Check::new("QK-norm dγ of k", &got[19], &b.dk_norm, &e.dk_norm));
        }
    }
    // Weight gradients as GEMMs of the saved operands, over all rows.
    let attn64 = to_f64(&attn_h);
    for (name, gi, (dy, n), (x, k)) in [
        ("dWqkv = dz2ᵀ·(x̂2⊙γ2), entries", 13, (&got[0], q), (&got[3], d)),
        ("dWd = dh2ᵀ·y1, entries", 14, (&got[2], d), (&got[17], f)),
        ("dWgu = dz1ᵀ·(x̂1⊙γ1), entries", 15, (&got[4], 2 * f), (&got[6], d)),
        ("dWo = dx0ᵀ·attn, entries", 16, (&got[7], d), (&attn64, ka)),
    ] {
        let e = entries(n, k, 64, &mut rng);
        let (exact, bf) = weight_grad_entries(dy, x, m, n, k, &e);
        let ours: Vec<f64> = e.iter().map(|&(i, j)| got[gi][i * k + j]).collect();
        checks.push(Check::new(name, &ours, &bf, &exact));
    }
    Ok(Report { rows_checked: rows.len(), checks, repeat_bitwise, asserts })
}

/// The LM-head tail forward and backward at `m` tokens, vocabulary `v`, with
/// `loss`: `head_forward` then `head_backward`, or with `fused` `head_forward_backward`.
#[allow(clippy::too_many_arguments)]
pub fn head_case(
    stream: &Stream,
    d: usize,
    v: usize,
    m: usize,
    chunk_rows: usize,
    sample: usize,
    seed: u64,
    full: bool,
    fused: bool,
    loss: HeadLoss,
) -> Result<Report, Error> {
    let mut rng = Rng::new(seed);
    let s = (3.0 / d as f64).sqrt();
    let (x_h, gamma_h, w_h) = (rng.bf16s(m * d, -1.0, 1.0), rng.bf16s(d, 0.5, 1.5), rng.bf16s(v * d, -s, s));
    // Every 13th row ignored (target −100).
    let t_h: Vec<i32> = (0..m).map(|i| if i % 13 == 5 { -100 } else { (rng.next_u64() % v as u64) as i32 }).collect();
    let mut h = HeadWeights::new(Tensor::from_host(stream, &gamma_h, &[d])?, Tensor::from_host(stream, &w_h, &[v, d])?, 1e-5)?;
    h.loss = loss;
    let x = Tensor::from_host(stream, &x_h, &[m, d])?;
    let targets = Tensor::from_host(stream, &t_h, &[m])?;
    let mut fs = HeadState::new(stream, &h, m)?;
    let mut bs = HeadBackwardState::new(stream, &h, m, chunk_rows)?;
    let mut g = HeadGrads::new(stream, &h, m)?;
    let mut run = |fs: &mut HeadState, g: &mut HeadGrads| -> Result<Vec<Vec<f64>>, Error> {
        fs.poison()?;
        g.poison()?;
        if fused {
            head_forward_backward(stream, &h, &x, &targets, fs, &mut bs, g)?;
        } else {
            head_forward(stream, &h, &x, &targets, fs)?;
            head_backward(stream, &h, &x, &targets, fs, &mut bs, g)?;
        }
        let f = |t: &Tensor<f32>| t.to_host().map(|v| f32s(&v));
        Ok(vec![f(&fs.loss)?, f(&fs.lse)?, to_f64(&g.dx.to_host()?), f(&fs.mean)?, f(&g.dgamma)?, f(&g.dw)?])
    };
    let got = run(&mut fs, &mut g)?;
    let again = run(&mut fs, &mut g)?;
    let repeat_bitwise = got.iter().zip(&again).all(|(a, b)| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()));
    // With `accumulate`, a third run adds dγ and dW to the second's (within
    // 1e-5 of the largest entry and the sums' rounding) and writes dx.
    g.accumulate = true;
    g.dx.poison()?;
    if fused {
        head_forward_backward(stream, &h, &x, &targets, &mut fs, &mut bs, &mut g)?;
    } else {
        head_forward(stream, &h, &x, &targets, &mut fs)?;
        head_backward(stream, &h, &x, &targets, &fs, &mut bs, &mut g)?;
    }
    let doubled = |fresh: &[f64], added: &[f32]| {
        let big = fresh.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        fresh.iter().zip(added).fold(0.0f64, |m, (f, a)| m.max((*a as f64 - 2.0 * f).abs() / (1e-5 * big + 8.0 * f.abs() * f32::EPSILON as f64)))
    };
    let worst = doubled(&again[4], &g.dgamma.to_host()?).max(doubled(&again[5], &g.dw.to_host()?));
    let dx_written = to_f64(&g.dx.to_host()?).iter().zip(&again[2]).all(|(a, b)| a.to_bits() == b.to_bits());
    let accumulated = (format!("accumulate: dγ, dW twice the gradient ({worst:.2} of the tolerance), dx written: {dx_written}"), worst <= 1.0 && dx_written);

    let rows: Vec<usize> = if full { (0..m).collect() } else { crate::host::sample_rows(m, sample, &mut rng) };
    let (exact, ew) = head_rows(&x_h, &gamma_h, &w_h, &t_h, 1e-5, &loss, &rows, Path::F64);
    let (bf, bw) = head_rows(&x_h, &gamma_h, &w_h, &t_h, 1e-5, &loss, &rows, Path::Bf16Unfused);
    let ignored = |v: &[f64]| -> Vec<f64> { v.iter().zip(&rows).map(|(x, &r)| if t_h[r] < 0 { 0.0 } else { *x }).collect() };
    let mut checks = vec![
        Check::new("loss per row", &pick(&got[0], 1, &rows), &bf.loss, &exact.loss),
        Check::new("lse", &ignored(&pick(&got[1], 1, &rows)), &ignored(&bf.lse), &ignored(&exact.lse)),
        Check::new("dx", &pick(&got[2], d, &rows), &bf.dx, &exact.dx),
    ];
    // The mean over every non-ignored row of the device's per-row losses; the
    // yardstick is a plain f32 running sum, as an unfused reduction would add.
    let valid: Vec<f64> = got[0].iter().zip(&t_h).filter(|(_, t)| **t >= 0).map(|(l, _)| *l).collect();
    let mean = valid.iter().sum::<f64>() / valid.len() as f64;
    let f32_mean = (valid.iter().fold(0f32, |s, &l| s + l as f32) / valid.len() as f32) as f64;
    checks.push(Check::new("mean loss (of the per-row losses)", &got[3], &[f32_mean], &[mean]));
    if full {
        checks.push(Check::new("dγ", &got[4], &bw.dgamma, &ew.dgamma));
        checks.push(Check::new("dW", &got[5], &bw.dw, &ew.dw));
    }
    Ok(Report { rows_checked: rows.len(), checks, repeat_bitwise, asserts: vec![accumulated] })
}

/// The launches of one block forward and backward at `m` tokens (named
/// `names`), counted on the stream, and the forward's state.
fn block_launches(
    stream: &Stream,
    c: &BlockConfig,
    m: usize,
    rng: &mut Rng,
    names: [&'static str; 2],
    out: &mut Vec<(&'static str, Launches, Launches)>,
) -> Result<BlockState, Error> {
    let w = BlockWeights::upload(stream, *c, &random_weights(c, rng)?)?;
    let inp = random_inputs(c, m, rng);
    let attn = Tensor::from_host(stream, &inp.attn, &[m, c.attn_width()])?;
    let x0 = Tensor::from_host(stream, &inp.x0, &[m, c.hidden])?;
    let pos = Tensor::from_host(stream, &inp.pos, &[m])?;
    let (mut fs, mut bs, mut g) = (BlockState::new(stream, c, m)?, BackwardState::new(stream, c, m)?, BlockGrads::new(stream, c, m)?);
    let (dx2, dqkv) = (Tensor::zeros(stream, &[m, c.hidden])?, Tensor::zeros(stream, &[m, c.qkv_width()])?);
    let t0 = stream.launches();
    block_forward(stream, &w, ForwardInputs { attn: &attn, x0: &x0, pos: &pos }, &mut fs)?;
    let t1 = stream.launches();
    out.push((names[0], t1 - t0, c.forward_launches()));
    block_backward(stream, &w, &fs, BackwardInputs { attn: &attn, pos: &pos, dx2: &dx2, dqkv: &dqkv }, &mut bs, &mut g)?;
    out.push((names[1], stream.launches() - t1, c.backward_launches()));
    Ok(fs)
}

/// Each op's launches: the forward, the backward and the tail's, counted on
/// the stream; the block's with `qk_norm` too.
pub fn launch_counts(stream: &Stream) -> Result<Vec<(&'static str, Launches, Launches)>, Error> {
    let m = 1000;
    let (mut out, mut rng) = (vec![], Rng::new(4));
    let qk = crate::block::config_qk_norm(256, 512);
    block_launches(stream, &qk, m, &mut rng, ["block_forward, QK-norm", "block_backward, QK-norm"], &mut out)?;
    let c = crate::block::config(256, 512);
    let fs = block_launches(stream, &c, m, &mut rng, ["block_forward", "block_backward"], &mut out)?;
    let v = 4096;
    let mut h = HeadWeights::new(Tensor::from_host(stream, &rng.bf16s(c.hidden, 0.5, 1.5), &[c.hidden])?, Tensor::from_host(stream, &rng.bf16s(v * c.hidden, -0.1, 0.1), &[v, c.hidden])?, 1e-5)?;
    let targets = Tensor::from_host(stream, &(0..m as i32).collect::<Vec<_>>(), &[m])?;
    let (mut hs, mut hb, mut hg) = (HeadState::new(stream, &h, m)?, HeadBackwardState::new(stream, &h, m, 256)?, HeadGrads::new(stream, &h, m)?);
    let t2 = stream.launches();
    head_forward(stream, &h, &fs.x2, &targets, &mut hs)?;
    let t3 = stream.launches();
    out.push(("head_forward", t3 - t2, head_forward_launches(&h.loss)));
    head_backward(stream, &h, &fs.x2, &targets, &hs, &mut hb, &mut hg)?;
    let t4 = stream.launches();
    out.push(("head_backward (4 chunks)", t4 - t3, head_backward_launches(hb.chunks())));
    head_forward_backward(stream, &h, &fs.x2, &targets, &mut hs, &mut hb, &mut hg)?;
    out.push(("head_forward_backward (4)", stream.launches() - t4, head_forward_backward_launches(hb.chunks(), &h.loss)));
    // Label smoothing's row sums: from the weight's column sums, or the soft-capped programs' partials.
    let smooth = HeadLoss { label_smoothing: 0.1, ..HeadLoss::default() };
    for (names, loss) in [
        (["head_forward, smoothing", "head_fwd_bwd (4), smoothing"], smooth),
        (["head_forward, capped smoothing", "head_fwd_bwd (4), capped smoothing"], HeadLoss { softcap: Some(30.0), ..smooth }),
    ] {
        h.loss = loss;
        let t = stream.launches();
        head_forward(stream, &h, &fs.x2, &targets, &mut hs)?;
        let t1 = stream.launches();
        out.push((names[0], t1 - t, head_forward_launches(&loss)));
        head_forward_backward(stream, &h, &fs.x2, &targets, &mut hs, &mut hb, &mut hg)?;
        out.push((names[1], stream.launches() - t1, head_forward_backward_launches(hb.chunks(), &loss)));
    }
    stream.synchronize()?;
    Ok(out)
}
