//! The Llama block on the CPU: weight layouts, and the reparameterised forward
//! (the block's own epilogue programs, run by the interpreter, with the aux
//! reductions) equal to the standard block in f64.

use std::collections::HashMap;

use coda_runtime::bf16;
use coda_runtime::dsl::interp::{self, Inputs, Precision};
use coda_runtime::llama::layout::{interleave_gate_up, qkv_from_checkpoint, rope_pairs_adjacent, rope_pairs_half, split_gate_up};
use coda_runtime::llama::programs::{linear_residual_rms_partial, linear_rowscale_rope, linear_rowscale_swiglu_save};
use coda_runtime::llama::reference::{Path, forward_rows};
use coda_runtime::llama::{BlockConfig, HostWeights};

fn values(n: usize, seed: u64, scale: f64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) * scale
        })
        .collect()
}

fn bf(v: &[f64]) -> Vec<bf16> {
    v.iter().map(|&x| bf16::from_f64(x)).collect()
}

#[test]
fn layouts_round_trip() {
    let (f, d) = (6, 4);
    let gate: Vec<u32> = (0..(f * d) as u32).collect();
    let up: Vec<u32> = (1000..1000 + (f * d) as u32).collect();
    let w = interleave_gate_up(&gate, &up, f, d);
    assert_eq!(&w[..2 * d], &[0, 1, 2, 3, 1000, 1001, 1002, 1003]);
    assert_eq!(split_gate_up(&w, f, d), (gate, up));

    let (heads, hd) = (3, 8);
    let q: Vec<u32> = (0..(heads * hd * d) as u32).collect();
    let adj = rope_pairs_adjacent(&q, heads, hd, d);
    // Head 0's rows become 0, 4, 1, 5, 2, 6, 3, 7.
    let first: Vec<u32> = adj.chunks(d).take(hd).map(|r| r[0] / d as u32).collect();
    assert_eq!(first, [0, 4, 1, 5, 2, 6, 3, 7]);
    assert_eq!(rope_pairs_half(&adj, heads, hd, d), q);
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
    let adj_q = proj(&rope_pairs_adjacent(&wq, heads, hd, d));
    let mut rotated_adj = adj_q.clone();
    for p in 0..heads * hd / 2 {
        let (a, b) = (adj_q[2 * p], adj_q[2 * p + 1]);
        let (s, c) = (pos * freq(p % (hd / 2))).sin_cos();
        rotated_adj[2 * p] = a * c - b * s;
        rotated_adj[2 * p + 1] = a * s + b * c;
    }
    // Rows of width 1: the inverse permutation applied to the output vector.
    let back = rope_pairs_half(&rotated_adj, heads, hd, 1);
    for (a, b) in back.iter().zip(&rotated_half) {
        assert!((a - b).abs() < 1e-12);
    }
    let score = |q: &[f64]| q.iter().map(|v| v * v).sum::<f64>();
    assert!((score(&rotated_adj) - score(&rotated_half)).abs() < 1e-10);
}

#[test]
fn reparameterised_forward_equals_the_standard_block_in_f64() {
    let c = BlockConfig { hidden: 64, ffn: 96, heads: 4, kv_heads: 2, head_dim: 16, eps: 1e-5, rope_theta: 10000.0 };
    let (m, d, f, ka) = (6, c.hidden, c.ffn, c.attn_width());
    let w = HostWeights {
        wo: bf(&values(d * ka, 3, 0.2)),
        gamma1: bf(&values(d, 4, 0.5).iter().map(|g| 1.0 + g).collect::<Vec<_>>()),
        w_gate_up: bf(&interleave_gate_up(&values(f * d, 5, 0.2), &values(f * d, 6, 0.2), f, d)),
        w_down: bf(&values(d * f, 7, 0.1)),
        gamma2: bf(&values(d, 8, 0.5).iter().map(|g| 1.0 + g).collect::<Vec<_>>()),
        w_qkv: bf(&qkv_from_checkpoint(
            &values(c.heads * 16 * d, 9, 0.2),
            &values(c.kv_heads * 16 * d, 10, 0.2),
            &values(c.kv_heads * 16 * d, 11, 0.2),
            c.heads,
            c.kv_heads,
            16,
            d,
        )),
    };
    let (attn, x0) = (bf(&values(m * ka, 12, 1.0)), bf(&values(m * d, 13, 1.0)));
    let pos: Vec<f32> = (0..m).map(|i| (i * 37) as f32).collect();
    let rows: Vec<usize> = (0..m).collect();
    let std = forward_rows(&c, &w, &attn, &x0, &pos, &rows, Path::F64);

    // The same block as its epilogue programs, interpreted, GEMMs in f64.
    let up = |v: &[bf16]| v.iter().map(|x| x.to_f64()).collect::<Vec<f64>>();
    let gemm = |x: &[f64], w: &[f64], k: usize| -> Vec<f64> {
        x.chunks(k).flat_map(|r| w.chunks(k).map(move |wr| wr.iter().zip(r).map(|(a, b)| a * b).sum::<f64>()).collect::<Vec<_>>()).collect()
    };
    let run = |p: &coda_runtime::dsl::Program, n: usize, acc: Vec<f64>, t: Vec<(&str, Vec<f64>)>| {
        let tensors: HashMap<String, Vec<f64>> = t.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        interp::evaluate(p, m, n, &Inputs { acc, tensors, scalars: HashMap::new() }, Precision::F64).unwrap()
    };
    let p1 = linear_residual_rms_partial::program();
    let o1 = run(&p1, d, gemm(&up(&attn), &up(&w.wo), ka), vec![("residual", up(&x0)), ("gamma", up(&w.gamma1))]);
    let r1 = interp::rms_from_partials(&o1["sq"], p1.n_tiles(d), d, c.eps as f64);
    let o2 = run(&linear_rowscale_swiglu_save::program(), 2 * f, gemm(&o1["u"], &up(&w.w_gate_up), d), vec![("r", r1)]);
    let o3 = run(&p1, d, gemm(&o2["y"], &up(&w.w_down), f), vec![("residual", o1["h"].clone()), ("gamma", up(&w.gamma2))]);
    let r2 = interp::rms_from_partials(&o3["sq"], p1.n_tiles(d), d, c.eps as f64);
    let freq: Vec<f64> = c.rope_freq().iter().map(|&v| v as f64).collect();
    let pos64: Vec<f64> = pos.iter().map(|&v| v as f64).collect();
    let o4 = run(
        &linear_rowscale_rope::program(),
        c.qkv_width(),
        gemm(&o3["u"], &up(&w.w_qkv), d),
        vec![("r", r2), ("pos", pos64), ("freq", freq)],
    );
    for (name, ours, theirs) in [
        ("x1", &o1["h"], &std.x1),
        ("z1", &o2["z"], &std.z1),
        ("y1", &o2["y"], &std.y1),
        ("x2", &o3["h"], &std.x2),
        ("qkv", &o4["y"], &std.qkv),
    ] {
        let scale = theirs.iter().fold(0f64, |a, v| a.max(v.abs()));
        let err = ours.iter().zip(theirs).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        assert!(err <= 1e-10 * scale, "{name}: {err:e} (scale {scale:e})");
    }
}
