//! The Llama block on the CPU: weight layouts, and the reparameterised forward
//! and backward (the block's own epilogue programs, run by the interpreter,
//! with the aux reductions and plain GEMMs) equal to the standard block in f64.

use std::collections::HashMap;

use coda_runtime::bf16;
use coda_runtime::dsl::interp::{self, Inputs, Precision};
use coda_llama::layout::{FfnDims, HeadRows, interleave_gate_up, qkv_from_checkpoint, rope_pairs_adjacent, rope_pairs_half, split_gate_up};
use coda_llama::programs::{
    cross_entropy_grad, linear_cross_entropy, linear_cross_entropy_backward, linear_cross_entropy_save, linear_dswiglu, linear_residual_rms_partial,
    linear_rowscale_qk_norm_rope, linear_rowscale_rope, linear_rowscale_swiglu_save, matmul, qk_norm_rope_backward, rms_input, rmsnorm_backward,
    rmsnorm_backward_head, rope_backward,
};
use coda_tests::reference::{Path, backward_rows, forward_rows, head_rows};
use coda_llama::{BlockConfig, HostWeights, QkNorm};

fn values(n: usize, seed: u64, scale: f64) -> Vec<f64> {
    coda_tests::host::Rng::new(seed).f64s(n, -scale, scale)
}

fn bf(v: &[f64]) -> Vec<bf16> {
    v.iter().map(|&x| bf16::from_f64(x)).collect()
}

#[test]
fn layouts_round_trip() {
    let (f, d) = (6, 4);
    let gate: Vec<u32> = (0..(f * d) as u32).collect();
    let up: Vec<u32> = (1000..1000 + (f * d) as u32).collect();
    let w = interleave_gate_up(&gate, &up, FfnDims { ffn: f, hidden: d }).unwrap();
    assert_eq!(&w[..2 * d], &[0, 1, 2, 3, 1000, 1001, 1002, 1003]);
    assert_eq!(split_gate_up(&w, FfnDims { ffn: f, hidden: d }).unwrap(), (gate, up));

    let (heads, hd) = (3, 8);
    let q: Vec<u32> = (0..(heads * hd * d) as u32).collect();
    let adj = rope_pairs_adjacent(&q, HeadRows { heads, head_dim: hd, cols: d }).unwrap();
    // Head 0's rows become 0, 4, 1, 5, 2, 6, 3, 7.
    let first: Vec<u32> = adj.chunks(d).take(hd).map(|r| r[0] / d as u32).collect();
    assert_eq!(first, [0, 4, 1, 5, 2, 6, 3, 7]);
    assert_eq!(rope_pairs_half(&adj, HeadRows { heads, head_dim: hd, cols: d }).unwrap(), q);
}

/// RoPE in the checkpoint's rotate_half pairing equals RoPE on adjacent pairs
/// of the permuted weights, and the attention scores q·k are unchanged.
#[test]
fn adjacent_pair_rope_matches_rotate_half() {
    let (heads, hd, d, pos, theta) = (2, 8, 5, 7.0f64, 10000.0f64);
    let (wq, x) = (values(heads * hd * d, 1, 1.0), values(d, 2, 1.0));
    let proj = |w: &[f64]| -> Vec<f64> { w.chunks(d).map(|r| r.iter().zip(&x).map(|(a, b)| a * b).sum()).collect() };
    let freq = |i: usize| theta.powf(-2.0 * i as f64 / hd as f64);
    let std_q = proj(&wq);
    let mut rotated_half = std_q.clone();
    for h in 0..heads {
        for i in 0..hd / 2 {
            let (a, b) = (std_q[h * hd + i], std_q[h * hd + i + hd / 2]);
            let (s, c) = (pos * freq(i)).sin_cos();
            rotated_half[h * hd + i] = a * c - b * s;
            rotated_half[h * hd + i + hd / 2] = a * s + b * c;
        }
    }
    let adj_q = proj(&rope_pairs_adjacent(&wq, HeadRows { heads, head_dim: hd, cols: d }).unwrap());
    let mut rotated_adj = adj_q.clone();
    for p in 0..heads * hd / 2 {
        let (a, b) = (adj_q[2 * p], adj_q[2 * p + 1]);
        let (s, c) = (pos * freq(p % (hd / 2))).sin_cos();
        rotated_adj[2 * p] = a * c - b * s;
        rotated_adj[2 * p + 1] = a * s + b * c;
    }
    // Rows of width 1: the inverse permutation applied to the output vector.
    let back = rope_pairs_half(&rotated_adj, HeadRows { heads, head_dim: hd, cols: 1 }).unwrap();
    for (a, b) in back.iter().zip(&rotated_half) {
        assert!((a - b).abs() < 1e-12);
    }
    let score = |q: &[f64]| q.iter().map(|v| v * v).sum::<f64>();
    assert!((score(&rotated_adj) - score(&rotated_half)).abs() < 1e-10);
}

/// A small block, and one with QK-norm (whose heads are 128 wide).
fn small_blocks() -> [(BlockConfig, HostWeights); 2] {
    let plain = BlockConfig { hidden: 64, ffn: 96, heads: 4, kv_heads: 2, head_dim: 16, eps: 1e-5, rope_theta: 10000.0, qk_norm: false };
    let qk = BlockConfig { heads: 2, kv_heads: 1, head_dim: 128, qk_norm: true, ..plain };
    [small_block(plain), small_block(qk)]
}

fn small_block(c: BlockConfig) -> (BlockConfig, HostWeights) {
    let (d, f, ka, hd) = (c.hidden, c.ffn, c.attn_width(), c.head_dim);
    let w = HostWeights {
        wo: bf(&values(d * ka, 3, 0.2)),
        gamma1: bf(&values(d, 4, 0.5).iter().map(|g| 1.0 + g).collect::<Vec<_>>()),
        w_gate_up: bf(&interleave_gate_up(&values(f * d, 5, 0.2), &values(f * d, 6, 0.2), &c).unwrap()),
        w_down: bf(&values(d * f, 7, 0.1)),
        gamma2: bf(&values(d, 8, 0.5).iter().map(|g| 1.0 + g).collect::<Vec<_>>()),
        w_qkv: bf(&qkv_from_checkpoint(
            &values(c.heads * hd * d, 9, 0.2),
            &values(c.kv_heads * hd * d, 10, 0.2),
            &values(c.kv_heads * hd * d, 11, 0.2),
            &c,
        )
        .unwrap()),
        qk_norm: c.qk_norm.then(|| {
            let norm = |seed| bf(&values(hd, seed, 0.5).iter().map(|g| 1.0 + g).collect::<Vec<_>>());
            QkNorm { q: norm(21), k: norm(22) }
        }),
    };
    (c, w)
}

fn up(v: &[bf16]) -> Vec<f64> {
    v.iter().map(|x| x.to_f64()).collect()
}

/// Row-major `x[m, k] · w[n, k]ᵀ`.
fn gemm_nt(x: &[f64], w: &[f64], k: usize) -> Vec<f64> {
    x.chunks(k).flat_map(|r| w.chunks(k).map(move |wr| wr.iter().zip(r).map(|(a, b)| a * b).sum::<f64>()).collect::<Vec<_>>()).collect()
}

/// Row-major `x[m, k] · w[k, n]`.
fn gemm_nn(x: &[f64], w: &[f64], k: usize) -> Vec<f64> {
    let n = w.len() / k;
    x.chunks(k)
        .flat_map(|r| (0..n).map(move |j| r.iter().enumerate().map(|(i, a)| a * w[i * n + j]).sum::<f64>()).collect::<Vec<_>>())
        .collect()
}

/// The weight gradient `dy[m, n]ᵀ · x[m, k]` → `[n, k]`.
fn gemm_tn(dy: &[f64], x: &[f64], n: usize, k: usize) -> Vec<f64> {
    let mut out = vec![0.0; n * k];
    for (dr, xr) in dy.chunks(n).zip(x.chunks(k)) {
        for (i, a) in dr.iter().enumerate() {
            for (j, b) in xr.iter().enumerate() {
                out[i * k + j] += a * b;
            }
        }
    }
    out
}

/// Finishes row partials `[rows, n_tiles]` to `scale · Σ`.
fn row_sums(p: &[f64], n_tiles: usize, scale: f64) -> Vec<f64> {
    p.chunks(n_tiles).map(|r| r.iter().sum::<f64>() * scale).collect()
}

/// Finishes column partials `[m_tiles, n]` to `Σ`.
fn col_sums(p: &[f64], n: usize) -> Vec<f64> {
    (0..n).map(|j| p.chunks(n).map(|r| r[j]).sum()).collect()
}

fn assert_close(name: &str, ours: &[f64], theirs: &[f64]) {
    assert_eq!(ours.len(), theirs.len(), "{name}: lengths");
    let scale = theirs.iter().fold(0f64, |a, v| a.max(v.abs()));
    let err = ours.iter().zip(theirs).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    assert!(err <= 1e-10 * scale, "{name}: {err:e} (scale {scale:e})");
}

type Run<'a> = dyn Fn(&coda_runtime::dsl::Program, usize, Vec<f64>, Vec<(&str, Vec<f64>)>) -> HashMap<String, Vec<f64>> + 'a;

/// The interpreter over `m` rows; the programs' one scalar is the norm's `eps`.
fn interpreter(m: usize, eps: f32) -> impl Fn(&coda_runtime::dsl::Program, usize, Vec<f64>, Vec<(&str, Vec<f64>)>) -> HashMap<String, Vec<f64>> {
    move |p, n, acc, t| {
        let tensors: HashMap<String, Vec<f64>> = t.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        let scalars = p.scalar_params().into_iter().map(|s| (s, eps as f64)).collect();
        interp::evaluate(p, m, n, &Inputs { acc, tensors, scalars }, Precision::F64).unwrap()
    }
}

/// QK-norm's weights laid over the qkv columns, as the forward's aux launch lays them.
fn qk_gamma(c: &BlockConfig, w: &HostWeights) -> Vec<f64> {
    let n = w.qk_norm.as_ref().expect("QK-norm weights");
    let (q, k) = (up(&n.q), up(&n.k));
    let mut g: Vec<f64> = (0..c.heads).flat_map(|_| q.clone()).chain((0..c.kv_heads).flat_map(|_| k.clone())).collect();
    g.resize(c.qkv_width(), 0.0);
    g
}

struct Fused {
    o1: HashMap<String, Vec<f64>>,
    r1: Vec<f64>,
    o2: HashMap<String, Vec<f64>>,
    o3: HashMap<String, Vec<f64>>,
    r2: Vec<f64>,
    o4: HashMap<String, Vec<f64>>,
}

/// The block forward as its epilogue programs, interpreted, GEMMs in f64.
fn fused_forward(run: &Run, c: &BlockConfig, w: &HostWeights, attn: &[bf16], x0: &[bf16], pos: &[f64]) -> Fused {
    let (d, f, ka) = (c.hidden, c.ffn, c.attn_width());
    let p1 = linear_residual_rms_partial::program();
    let o1 = run(&p1, d, gemm_nt(&up(attn), &up(&w.wo), ka), vec![("residual", up(x0)), ("gamma", up(&w.gamma1))]);
    let r1 = interp::rms_from_partials(&o1["sq"], p1.n_tiles(d), d, c.eps as f64);
    let o2 = run(&linear_rowscale_swiglu_save::program(), 2 * f, gemm_nt(&o1["u"], &up(&w.w_gate_up), d), vec![("r", r1.clone())]);
    let o3 = run(&p1, d, gemm_nt(&o2["y"], &up(&w.w_down), f), vec![("residual", o1["h"].clone()), ("gamma", up(&w.gamma2))]);
    let r2 = interp::rms_from_partials(&o3["sq"], p1.n_tiles(d), d, c.eps as f64);
    let freq: Vec<f64> = c.rope_freq().unwrap().iter().map(|&v| v as f64).collect();
    let mut inputs = vec![("r", r2.clone()), ("pos", pos.to_vec()), ("freq", freq)];
    let qkv = if c.qk_norm {
        inputs.push(("gamma", qk_gamma(c, w)));
        linear_rowscale_qk_norm_rope::program()
    } else {
        linear_rowscale_rope::program()
    };
    let o4 = run(&qkv, c.qkv_width(), gemm_nt(&o3["u"], &up(&w.w_qkv), d), inputs);
    Fused { o1, r1, o2, o3, r2, o4 }
}

#[test]
fn reparameterised_forward_equals_the_standard_block_in_f64() {
    for (c, w) in small_blocks() {
        forward_equals_the_standard_block(&c, &w);
    }
}

fn forward_equals_the_standard_block(c: &BlockConfig, w: &HostWeights) {
    let (m, d, ka) = (6, c.hidden, c.attn_width());
    let (attn, x0) = (bf(&values(m * ka, 12, 1.0)), bf(&values(m * d, 13, 1.0)));
    let pos: Vec<f32> = (0..m).map(|i| (i * 37) as f32).collect();
    let rows: Vec<usize> = (0..m).collect();
    let std = forward_rows(c, w, &attn, &x0, &pos, &rows, Path::F64);
    let pos64: Vec<f64> = pos.iter().map(|&v| v as f64).collect();
    let o = fused_forward(&interpreter(m, c.eps), c, w, &attn, &x0, &pos64);
    for (name, ours, theirs) in [
        ("x1", &o.o1["h"], &std.x1),
        ("z1", &o.o2["z"], &std.z1),
        ("y1", &o.o2["y"], &std.y1),
        ("x2", &o.o3["h"], &std.x2),
        ("qkv", &o.o4["y"], &std.qkv),
    ] {
        assert_close(name, ours, theirs);
    }
    if c.qk_norm {
        assert_close("z2 (qkv before QK-norm)", &o.o4["z"], &std.z2);
    }
}

/// Every gradient of the block (inputs, weights, norm weights) from the
/// backward's epilogue programs equals the standard backward's.
#[test]
fn reparameterised_backward_equals_the_standard_block_in_f64() {
    for (c, w) in small_blocks() {
        backward_equals_the_standard_block(&c, &w);
    }
}

fn backward_equals_the_standard_block(c: &BlockConfig, w: &HostWeights) {
    let (c, w) = (*c, w);
    let (m, d, f, ka, q) = (7, c.hidden, c.ffn, c.attn_width(), c.qkv_width());
    let (attn, x0) = (bf(&values(m * ka, 14, 1.0)), bf(&values(m * d, 15, 1.0)));
    let (dx2, dqkv) = (bf(&values(m * d, 16, 0.5)), bf(&values(m * q, 17, 0.5)));
    let pos: Vec<f32> = (0..m).map(|i| (i * 53) as f32).collect();
    let pos64: Vec<f64> = pos.iter().map(|&v| v as f64).collect();
    let rows: Vec<usize> = (0..m).collect();
    let (std, std_w) = backward_rows(&c, w, &attn, &x0, &pos, &dx2, &dqkv, &rows, Path::F64, true);

    let run = interpreter(m, c.eps);
    let fw = fused_forward(&run, &c, w, &attn, &x0, &pos64);
    let inv_d = 1.0 / d as f64;
    let freq: Vec<f64> = c.rope_freq().unwrap().iter().map(|&v| v as f64).collect();
    let (rope, b1) = if c.qk_norm {
        let p = qk_norm_rope_backward::program();
        let inputs = vec![("dy", up(&dqkv)), ("z", fw.o4["z"].clone()), ("pos", pos64), ("freq", freq), ("gamma", qk_gamma(&c, w))];
        let b1 = run(&p, q, vec![], inputs);
        // QK-norm's weight gradients: the column sums, then the sums over the q heads and over the k heads.
        let cols = col_sums(&b1["dgamma"], q);
        let heads = |first: usize, count: usize| -> Vec<f64> {
            (0..c.head_dim).map(|j| (0..count).map(|h| cols[first + h * c.head_dim + j]).sum()).collect()
        };
        assert_close("QK-norm dγ of q", &heads(0, c.heads), &std_w.dq_norm);
        assert_close("QK-norm dγ of k", &heads(c.heads * c.head_dim, c.kv_heads), &std_w.dk_norm);
        (p, b1)
    } else {
        let p = rope_backward::program();
        let b1 = run(&p, q, vec![], vec![("dy", up(&dqkv)), ("y", fw.o4["y"].clone()), ("pos", pos64), ("freq", freq)]);
        (p, b1)
    };
    let s2 = row_sums(&b1["dot"], rope.n_tiles(q), inv_d);
    let norm = rmsnorm_backward::program();
    let b2 = run(
        &norm,
        d,
        gemm_nn(&b1["dz"], &up(&w.w_qkv), q),
        vec![("h", fw.o3["h"].clone()), ("r", fw.r2.clone()), ("s", s2.clone()), ("gamma", up(&w.gamma2)), ("dres", up(&dx2))],
    );
    let dsw = linear_dswiglu::program();
    let b3 = run(&dsw, f, gemm_nn(&b2["dx"], &up(&w.w_down), d), vec![("z", fw.o2["z"].clone())]);
    let s1 = row_sums(&b3["dot"], dsw.n_tiles(f), inv_d);
    let b4 = run(
        &norm,
        d,
        gemm_nn(&b3["dz"], &up(&w.w_gate_up), 2 * f),
        vec![("h", fw.o1["h"].clone()), ("r", fw.r1.clone()), ("s", s1.clone()), ("gamma", up(&w.gamma1)), ("dres", b2["dx"].clone())],
    );
    let b5 = run(&matmul::program(), ka, gemm_nn(&b4["dx"], &up(&w.wo), d), vec![]);

    for (name, ours, theirs) in [
        ("dz2", &b1["dz"], &std.dz2),
        ("s2", &s2, &std.s2),
        ("dh2", &b2["dx"], &std.dh2),
        ("xg2", &b2["xg"], &std.xg2),
        ("dz1", &b3["dz"], &std.dz1),
        ("s1", &s1, &std.s1),
        ("xg1", &b4["xg"], &std.xg1),
        ("dx0", &b4["dx"], &std.dx0),
        ("dattn", &b5["y"], &std.dattn),
        ("dgamma2", &col_sums(&b2["dgamma"], d), &std_w.dgamma2),
        ("dgamma1", &col_sums(&b4["dgamma"], d), &std_w.dgamma1),
        ("dw_qkv", &gemm_tn(&b1["dz"], &b2["xg"], q, d), &std_w.dw_qkv),
        ("dw_down", &gemm_tn(&b2["dx"], &fw.o2["y"], d, f), &std_w.dw_down),
        ("dw_gate_up", &gemm_tn(&b3["dz"], &b4["xg"], 2 * f, d), &std_w.dw_gate_up),
        ("dwo", &gemm_tn(&b4["dx"], &up(&attn), d, ka), &std_w.dwo),
    ] {
        assert_close(name, ours, theirs);
    }
}

/// The LM-head tail (loss, and the gradients of its input and weights) from
/// its epilogue programs equals final RMSNorm → head → mean cross-entropy.
#[test]
fn reparameterised_head_equals_the_standard_tail_in_f64() {
    let (m, d, v, eps) = (9, 64, 80, 1e-5);
    let x = bf(&values(m * d, 18, 1.0));
    let gamma = bf(&values(d, 19, 0.5).iter().map(|g| 1.0 + g).collect::<Vec<_>>());
    let w = bf(&values(v * d, 20, 0.3));
    let targets: Vec<i32> = (0..m as i32).map(|i| if i == 4 { -100 } else { (i * 31) % v as i32 }).collect();
    let rows: Vec<usize> = (0..m).collect();
    let (std, std_w) = head_rows(&x, &gamma, &w, &targets, eps as f32, &Default::default(), &rows, Path::F64);

    let run = interpreter(m, 1e-5);
    let t64: Vec<f64> = targets.iter().map(|&t| t as f64).collect();
    let ri = rms_input::program();
    let a = run(&ri, d, vec![], vec![("x", up(&x)), ("gamma", up(&gamma))]);
    let r = interp::rms_from_partials(&a["sq"], ri.n_tiles(d), d, eps);
    let logits_acc = gemm_nt(&a["u"], &up(&w), d);
    let ce = linear_cross_entropy::program();
    let b = run(&ce, v, logits_acc.clone(), vec![("r", r.clone()), ("target", t64.clone())]);
    let lse = interp::lse_from_partials(&b["lse"], ce.n_tiles(v));
    let valid = targets.iter().filter(|&&t| t >= 0).count() as f64;
    let loss: Vec<f64> = (0..m).map(|i| if targets[i] >= 0 { lse[i] - b["target_logit"][i] } else { 0.0 }).collect();
    let weights: Vec<f64> = targets.iter().map(|&t| if t >= 0 { 1.0 / valid } else { 0.0 }).collect();
    let ceb = linear_cross_entropy_backward::program();
    let g = run(&ceb, v, logits_acc.clone(), vec![("r", r.clone()), ("lse", lse.clone()), ("target", t64.clone()), ("w", weights.clone())]);
    let s = row_sums(&g["dot"], ceb.n_tiles(v), 1.0 / d as f64);
    // The fused training path: the forward keeps the logits, a map program takes the gradient.
    let saved = run(&linear_cross_entropy_save::program(), v, logits_acc, vec![("r", r.clone()), ("target", t64.clone())]);
    let lse_saved = interp::lse_from_partials(&saved["lse"], ce.n_tiles(v));
    let grad = cross_entropy_grad::program();
    let g2 = run(&grad, v, vec![], vec![("logits", saved["logits"].clone()), ("lse", lse_saved.clone()), ("target", t64), ("w", weights)]);
    assert_close("lse (saved logits)", &lse_saved, &std.lse);
    assert_close("target logit (saved logits)", &saved["target_logit"], &b["target_logit"]);
    assert_close("dlogits from saved logits", &g2["dlogits"], &g["dlogits"]);
    assert_close("s from saved logits", &row_sums(&g2["dot"], grad.n_tiles(v), 1.0 / d as f64), &std.s);
    let h = run(
        &rmsnorm_backward_head::program(),
        d,
        gemm_nn(&g["dlogits"], &up(&w), v),
        vec![("h", up(&x)), ("r", r), ("s", s.clone()), ("gamma", up(&gamma))],
    );
    for (name, ours, theirs) in [
        ("loss", &loss, &std.loss),
        ("lse", &lse, &std.lse),
        ("s", &s, &std.s),
        ("dx", &h["dx"], &std.dx),
        ("dgamma", &col_sums(&h["dgamma"], d), &std_w.dgamma),
        ("dw", &gemm_tn(&g["dlogits"], &h["xg"], v, d), &std_w.dw),
    ] {
        assert_close(name, ours, theirs);
    }
}
