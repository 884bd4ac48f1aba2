//! The standard (not reparameterised) block on the host, for tests: in f64
//! (the reference) and op by op in bf16 with f32 accumulation (what an unfused
//! PyTorch block does: the error yardstick). Rows are independent, so a check
//! can compute just the rows it samples.

use crate::bf16;
use crate::dsl::interp::round_bf16;

use super::{BlockConfig, HostWeights};

/// The forward's tensors for the listed rows, each `[rows, width]` row-major.
#[derive(Clone, Debug, Default)]
pub struct ForwardRows {
    pub x1: Vec<f64>,
    pub z1: Vec<f64>,
    pub y1: Vec<f64>,
    pub x2: Vec<f64>,
    pub qkv: Vec<f64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// Everything in f64.
    F64,
    /// Op by op in bf16: GEMM outputs and element-wise results rounded to bf16,
    /// norms' statistics in f32 (as PyTorch's RMSNorm computes them).
    Bf16Unfused,
}

struct W {
    wo: Vec<f64>,
    g1: Vec<f64>,
    wgu: Vec<f64>,
    wd: Vec<f64>,
    g2: Vec<f64>,
    wqkv: Vec<f64>,
}

fn f64s(v: &[bf16]) -> Vec<f64> {
    v.iter().map(|x| x.to_f64()).collect()
}

/// `y = x · Wᵀ` for one row, `w` `[n, k]`.
fn matvec(x: &[f64], w: &[f64], k: usize) -> Vec<f64> {
    w.chunks(k).map(|row| row.iter().zip(x).map(|(a, b)| a * b).sum()).collect()
}

fn rms_norm(x: &[f64], gamma: &[f64], eps: f64, path: Path) -> Vec<f64> {
    match path {
        Path::F64 => {
            let r = 1.0 / (x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64 + eps).sqrt();
            x.iter().zip(gamma).map(|(v, g)| v * r * g).collect()
        }
        Path::Bf16Unfused => {
            let ms = x.iter().fold(0f32, |s, v| s + (v * v) as f32) / x.len() as f32;
            let r = 1.0 / (ms + eps as f32).sqrt();
            x.iter().zip(gamma).map(|(v, g)| round_bf16(round_bf16(v * r as f64) * g)).collect()
        }
    }
}

fn forward_row(c: &BlockConfig, w: &W, attn: &[f64], x0: &[f64], pos: f64, path: Path, out: &mut ForwardRows) {
    let rnd = |v: f64| if path == Path::F64 { v } else { round_bf16(v) };
    let (d, f, eps) = (c.hidden, c.ffn, c.eps as f64);
    let x1: Vec<f64> = matvec(attn, &w.wo, c.attn_width()).iter().zip(x0).map(|(a, b)| rnd(rnd(*a) + b)).collect();
    let n1 = rms_norm(&x1, &w.g1, eps, path);
    let z1: Vec<f64> = matvec(&n1, &w.wgu, d).into_iter().map(rnd).collect();
    let silu = |g: f64| g / (1.0 + (-g).exp());
    let y1: Vec<f64> = (0..f).map(|j| rnd(rnd(silu(z1[2 * j])) * z1[2 * j + 1])).collect();
    let x2: Vec<f64> = matvec(&y1, &w.wd, f).iter().zip(&x1).map(|(a, b)| rnd(rnd(*a) + b)).collect();
    let n2 = rms_norm(&x2, &w.g2, eps, path);
    let mut qkv: Vec<f64> = matvec(&n2, &w.wqkv, d).into_iter().map(rnd).collect();
    for (p, freq) in c.rope_freq().chunks(2).enumerate() {
        let angle = pos * freq[0] as f64;
        let (s, co) = (rnd(angle.sin()), rnd(angle.cos()));
        let (a, b) = (qkv[2 * p], qkv[2 * p + 1]);
        qkv[2 * p] = rnd(a * co - b * s);
        qkv[2 * p + 1] = rnd(a * s + b * co);
    }
    out.x1.extend(x1);
    out.z1.extend(z1);
    out.y1.extend(y1);
    out.x2.extend(x2);
    out.qkv.extend(qkv);
}

/// The standard block forward for `rows` of `attn` `[M, heads·hd]`, `x0` `[M, d]`, `pos` `[M]`.
pub fn forward_rows(
    c: &BlockConfig,
    w: &HostWeights,
    attn: &[bf16],
    x0: &[bf16],
    pos: &[f32],
    rows: &[usize],
    path: Path,
) -> ForwardRows {
    let w = W {
        wo: f64s(&w.wo),
        g1: f64s(&w.gamma1),
        wgu: f64s(&w.w_gate_up),
        wd: f64s(&w.w_down),
        g2: f64s(&w.gamma2),
        wqkv: f64s(&w.w_qkv),
    };
    let (ka, d) = (c.attn_width(), c.hidden);
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    let chunk = rows.len().div_ceil(threads).max(1);
    let parts: Vec<ForwardRows> = std::thread::scope(|s| {
        let handles: Vec<_> = rows
            .chunks(chunk)
            .map(|rs| {
                let w = &w;
                s.spawn(move || {
                    let mut out = ForwardRows::default();
                    for &r in rs {
                        let a = f64s(&attn[r * ka..(r + 1) * ka]);
                        let x = f64s(&x0[r * d..(r + 1) * d]);
                        forward_row(c, w, &a, &x, pos[r] as f64, path, &mut out);
                    }
                    out
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("reference thread")).collect()
    });
    let mut out = ForwardRows::default();
    for p in parts {
        out.x1.extend(p.x1);
        out.z1.extend(p.z1);
        out.y1.extend(p.y1);
        out.x2.extend(p.x2);
        out.qkv.extend(p.qkv);
    }
    out
}
