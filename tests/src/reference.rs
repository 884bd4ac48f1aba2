//! The standard (not reparameterised) block on the host, for tests: in f64
//! (the reference) and op by op in bf16 with f32 accumulation (what an unfused
//! PyTorch block does: the error yardstick). Rows are independent, so a check
//! can compute just the rows it samples.

use coda_runtime::bf16;
use coda_runtime::dsl::interp::round_bf16;

use coda_llama::{BlockConfig, HeadLoss, HostWeights};

/// The forward's tensors for the listed rows, each `[rows, width]` row-major.
#[derive(Clone, Debug, Default)]
pub struct ForwardRows {
    pub x1: Vec<f64>,
    pub z1: Vec<f64>,
    pub y1: Vec<f64>,
    pub x2: Vec<f64>,
    /// The qkv before QK-norm and RoPE (with QK-norm only).
    pub z2: Vec<f64>,
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

#[derive(Clone)]
struct W {
    wo: Vec<f64>,
    g1: Vec<f64>,
    wgu: Vec<f64>,
    wd: Vec<f64>,
    g2: Vec<f64>,
    wqkv: Vec<f64>,
    /// QK-norm's q and k weights.
    qk: Option<(Vec<f64>, Vec<f64>)>,
}

impl W {
    fn from_host(w: &HostWeights) -> W {
        W {
            wo: f64s(&w.wo),
            g1: f64s(&w.gamma1),
            wgu: f64s(&w.w_gate_up),
            wd: f64s(&w.w_down),
            g2: f64s(&w.gamma2),
            wqkv: f64s(&w.w_qkv),
            qk: w.qk_norm.as_ref().map(|n| (f64s(&n.q), f64s(&n.k))),
        }
    }
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
    let z2: Vec<f64> = matvec(&n2, &w.wqkv, d).into_iter().map(rnd).collect();
    let mut qkv = z2.clone();
    if let Some((gq, gk)) = &w.qk {
        let hd = c.head_dim;
        for h in 0..c.heads + c.kv_heads {
            let gamma = if h < c.heads { gq } else { gk };
            let normed = rms_norm(&z2[h * hd..(h + 1) * hd], gamma, eps, path);
            qkv[h * hd..(h + 1) * hd].copy_from_slice(&normed);
        }
    }
    for (p, freq) in c.rope_freq().expect("the block's config passes its check").chunks(2).enumerate() {
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
    if w.qk.is_some() {
        out.z2.extend(z2);
    }
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
    let w = W::from_host(w);
    let (ka, d) = (c.attn_width(), c.hidden);
    let parts: Vec<ForwardRows> = in_threads(rows, |rs| {
        let mut out = ForwardRows::default();
        for &r in rs {
            let a = f64s(&attn[r * ka..(r + 1) * ka]);
            let x = f64s(&x0[r * d..(r + 1) * d]);
            forward_row(c, &w, &a, &x, pos[r] as f64, path, &mut out);
        }
        out
    });
    let mut out = ForwardRows::default();
    for p in parts {
        out.x1.extend(p.x1);
        out.z1.extend(p.z1);
        out.y1.extend(p.y1);
        out.x2.extend(p.x2);
        out.z2.extend(p.z2);
        out.qkv.extend(p.qkv);
    }
    out
}

/// The backward's per-row tensors for the listed rows, each `[rows, width]`
/// (the reparameterised names: `xg = x̂ ⊙ γ` is the normed GEMM input).
#[derive(Clone, Debug, Default)]
pub struct BackwardRows {
    pub dz2: Vec<f64>,
    pub s2: Vec<f64>,
    pub dh2: Vec<f64>,
    pub xg2: Vec<f64>,
    pub dz1: Vec<f64>,
    pub s1: Vec<f64>,
    pub xg1: Vec<f64>,
    pub dx0: Vec<f64>,
    pub dattn: Vec<f64>,
}

/// Weight and norm-weight gradients summed over the rows given, in the
/// kernels' layouts (`dw_gate_up` interleaved, `dw_qkv` with RoPE pairs adjacent).
#[derive(Clone, Debug, Default)]
pub struct WeightGrads {
    pub dwo: Vec<f64>,
    pub dgamma1: Vec<f64>,
    pub dw_gate_up: Vec<f64>,
    pub dw_down: Vec<f64>,
    pub dgamma2: Vec<f64>,
    pub dw_qkv: Vec<f64>,
    /// QK-norm's weight gradients (empty without QK-norm), and their terms
    /// per qkv column before the sum over heads (0 on v).
    pub dq_norm: Vec<f64>,
    pub dk_norm: Vec<f64>,
    pub dqk_cols: Vec<f64>,
}

impl WeightGrads {
    /// Zeros; the weight matrices' gradients only `with_matrices` (the norm
    /// weights' always).
    fn zeros(c: &BlockConfig, with_matrices: bool) -> WeightGrads {
        let (d, f) = (c.hidden, c.ffn);
        let z = |n: usize| if with_matrices { vec![0.0; n] } else { vec![] };
        WeightGrads {
            dwo: z(d * c.attn_width()),
            dgamma1: vec![0.0; d],
            dw_gate_up: z(2 * f * d),
            dw_down: z(d * f),
            dgamma2: vec![0.0; d],
            dw_qkv: z(c.qkv_width() * d),
            dq_norm: vec![0.0; if c.qk_norm { c.head_dim } else { 0 }],
            dk_norm: vec![0.0; if c.qk_norm { c.head_dim } else { 0 }],
            dqk_cols: vec![0.0; if c.qk_norm { c.qkv_width() } else { 0 }],
        }
    }
    fn parts(&mut self) -> [&mut Vec<f64>; 9] {
        [
            &mut self.dwo,
            &mut self.dgamma1,
            &mut self.dw_gate_up,
            &mut self.dw_down,
            &mut self.dgamma2,
            &mut self.dw_qkv,
            &mut self.dq_norm,
            &mut self.dk_norm,
            &mut self.dqk_cols,
        ]
    }
}

/// `y = x · W` for one row, `w` `[k, n]` row-major: the input gradient of `x · Wᵀ`.
fn matvec_t(x: &[f64], w: &[f64], n: usize) -> Vec<f64> {
    let mut y = vec![0.0; n];
    for (xi, row) in x.iter().zip(w.chunks(n)) {
        for (yj, wj) in y.iter_mut().zip(row) {
            *yj += xi * wj;
        }
    }
    y
}

/// `acc += a ⊗ b` (`[a.len(), b.len()]`).
fn outer_add(acc: &mut [f64], a: &[f64], b: &[f64]) {
    for (row, ai) in acc.chunks_mut(b.len()).zip(a) {
        for (x, bj) in row.iter_mut().zip(b) {
            *x += ai * bj;
        }
    }
}

/// RMSNorm backward for `n = x̂ ⊙ γ`, `x̂ = r x`: returns `(dx, xg, s, x̂)`
/// with `s = mean(dn ⊙ n)`.
fn rms_norm_backward(x: &[f64], gamma: &[f64], dn: &[f64], eps: f64, path: Path) -> (Vec<f64>, Vec<f64>, f64, Vec<f64>) {
    let rnd = |v: f64| if path == Path::F64 { v } else { round_bf16(v) };
    let d = x.len() as f64;
    let r = match path {
        Path::F64 => 1.0 / (x.iter().map(|v| v * v).sum::<f64>() / d + eps).sqrt(),
        Path::Bf16Unfused => (1.0 / ((x.iter().fold(0f32, |s, v| s + (v * v) as f32) / d as f32) + eps as f32).sqrt()) as f64,
    };
    let xhat: Vec<f64> = x.iter().map(|v| v * r).collect();
    let xg: Vec<f64> = xhat.iter().zip(gamma).map(|(a, g)| rnd(rnd(*a) * g)).collect();
    let s = dn.iter().zip(&xhat).zip(gamma).map(|((a, b), g)| a * b * g).sum::<f64>() / d;
    let dx = (0..x.len()).map(|i| rnd(r * (dn[i] * gamma[i] - xhat[i] * s))).collect();
    (dx, xg, s, xhat)
}

/// One row of the standard block's backward (recomputing its forward), with
/// its contribution to the weight gradients added to `wg` when given.
#[allow(clippy::too_many_arguments)]
fn backward_row(
    c: &BlockConfig,
    w: &W,
    attn: &[f64],
    x0: &[f64],
    pos: f64,
    dx2: &[f64],
    dqkv: &[f64],
    path: Path,
    out: &mut BackwardRows,
    wg: Option<&mut WeightGrads>,
) {
    let rnd = |v: f64| if path == Path::F64 { v } else { round_bf16(v) };
    let (d, f, eps) = (c.hidden, c.ffn, c.eps as f64);
    let mut fwd = ForwardRows::default();
    forward_row(c, w, attn, x0, pos, path, &mut fwd);
    let (x1, z1, y1, x2) = (&fwd.x1, &fwd.z1, &fwd.y1, &fwd.x2);

    // RoPE backward: the inverse rotation, then QK-norm's backward per head.
    let mut dz2 = dqkv.to_vec();
    for (p, freq) in c.rope_freq().expect("the block's config passes its check").chunks(2).enumerate() {
        let (s, co) = (pos * freq[0] as f64).sin_cos();
        let (s, co) = (rnd(s), rnd(co));
        let (a, b) = (dqkv[2 * p], dqkv[2 * p + 1]);
        dz2[2 * p] = rnd(a * co + b * s);
        dz2[2 * p + 1] = rnd(b * co - a * s);
    }
    let mut qk_dgamma = vec![];
    if let Some((gq, gk)) = &w.qk {
        let hd = c.head_dim;
        for h in 0..c.heads + c.kv_heads {
            let gamma = if h < c.heads { gq } else { gk };
            let cols = h * hd..(h + 1) * hd;
            let (dz, _, _, zhat) = rms_norm_backward(&fwd.z2[cols.clone()], gamma, &dz2[cols.clone()], eps, path);
            qk_dgamma.push((h < c.heads, dz2[cols.clone()].iter().zip(&zhat).map(|(a, b)| a * b).collect::<Vec<f64>>()));
            dz2[cols].copy_from_slice(&dz);
        }
    }
    let dn2: Vec<f64> = matvec_t(&dz2, &w.wqkv, d).into_iter().map(rnd).collect();
    let (dxn2, xg2, s2, xhat2) = rms_norm_backward(x2, &w.g2, &dn2, eps, path);
    let dh2: Vec<f64> = dx2.iter().zip(&dxn2).map(|(a, b)| rnd(a + b)).collect();

    let dy1: Vec<f64> = matvec_t(&dh2, &w.wd, f).into_iter().map(rnd).collect();
    let mut dz1 = vec![0.0; 2 * f];
    for j in 0..f {
        let (g, u) = (z1[2 * j], z1[2 * j + 1]);
        let sg = 1.0 / (1.0 + (-g).exp());
        dz1[2 * j] = rnd(dy1[j] * u * sg * (1.0 + g * (1.0 - sg)));
        dz1[2 * j + 1] = rnd(dy1[j] * rnd(g * sg));
    }
    let dn1: Vec<f64> = matvec_t(&dz1, &w.wgu, d).into_iter().map(rnd).collect();
    let (dxn1, xg1, s1, xhat1) = rms_norm_backward(x1, &w.g1, &dn1, eps, path);
    let dh1: Vec<f64> = dh2.iter().zip(&dxn1).map(|(a, b)| rnd(a + b)).collect();
    let dattn: Vec<f64> = matvec_t(&dh1, &w.wo, c.attn_width()).into_iter().map(rnd).collect();

    if let Some(wg) = wg {
        if !wg.dwo.is_empty() {
            outer_add(&mut wg.dw_qkv, &dz2, &xg2);
            outer_add(&mut wg.dw_down, &dh2, y1);
            outer_add(&mut wg.dw_gate_up, &dz1, &xg1);
            outer_add(&mut wg.dwo, &dh1, attn);
        }
        for i in 0..d {
            wg.dgamma2[i] += dn2[i] * xhat2[i];
            wg.dgamma1[i] += dn1[i] * xhat1[i];
        }
        for (h, (is_q, dg)) in qk_dgamma.into_iter().enumerate() {
            let acc = if is_q { &mut wg.dq_norm } else { &mut wg.dk_norm };
            acc.iter_mut().zip(&dg).for_each(|(a, b)| *a += b);
            wg.dqk_cols[h * c.head_dim..(h + 1) * c.head_dim].iter_mut().zip(&dg).for_each(|(a, b)| *a += b);
        }
    }
    out.dz2.extend(dz2);
    out.s2.push(s2);
    out.dh2.extend(dh2);
    out.xg2.extend(xg2);
    out.dz1.extend(dz1);
    out.s1.push(s1);
    out.xg1.extend(xg1);
    out.dx0.extend(dh1);
    out.dattn.extend(dattn);
}

/// The standard block backward for `rows`, given the forward's inputs and the
/// gradients `dx2` `[M, d]` and `dqkv` `[M, qkv_width]` of its outputs; the
/// norm weights' gradients, and `with_matrices` the weight matrices', are
/// summed over `rows` (all rows for the full gradients).
#[allow(clippy::too_many_arguments)]
pub fn backward_rows(
    c: &BlockConfig,
    w: &HostWeights,
    attn: &[bf16],
    x0: &[bf16],
    pos: &[f32],
    dx2: &[bf16],
    dqkv: &[bf16],
    rows: &[usize],
    path: Path,
    with_matrices: bool,
) -> (BackwardRows, WeightGrads) {
    let w = W::from_host(w);
    let (ka, d, q) = (c.attn_width(), c.hidden, c.qkv_width());
    let parts: Vec<(BackwardRows, WeightGrads)> = in_threads(rows, |rs| {
        let mut out = BackwardRows::default();
        let mut wg = WeightGrads::zeros(c, with_matrices);
        for &r in rs {
            let row = |v: &[bf16], n: usize| f64s(&v[r * n..(r + 1) * n]);
            backward_row(c, &w, &row(attn, ka), &row(x0, d), pos[r] as f64, &row(dx2, d), &row(dqkv, q), path, &mut out, Some(&mut wg));
        }
        (out, wg)
    });
    let mut out = BackwardRows::default();
    let mut wg = WeightGrads::zeros(c, with_matrices);
    for (p, mut g) in parts {
        for (a, b) in [
            (&mut out.dz2, p.dz2),
            (&mut out.s2, p.s2),
            (&mut out.dh2, p.dh2),
            (&mut out.xg2, p.xg2),
            (&mut out.dz1, p.dz1),
            (&mut out.s1, p.s1),
            (&mut out.xg1, p.xg1),
            (&mut out.dx0, p.dx0),
            (&mut out.dattn, p.dattn),
        ] {
            a.extend(b);
        }
        for (a, b) in wg.parts().into_iter().zip(g.parts()) {
            a.iter_mut().zip(b.iter()).for_each(|(x, y)| *x += y);
        }
    }
    if path == Path::Bf16Unfused {
        // PyTorch's bf16 weight gradients: f32 accumulation, bf16 result.
        for v in wg.parts() {
            v.iter_mut().for_each(|x| *x = round_bf16(*x as f32 as f64));
        }
    }
    (out, wg)
}

/// Runs `f` over `rows` split across the machine's threads, in order.
fn in_threads<T: Send>(rows: &[usize], f: impl Fn(&[usize]) -> T + Sync) -> Vec<T> {
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    let chunk = rows.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let f = &f;
        let handles: Vec<_> = rows.chunks(chunk).map(|rs| s.spawn(move || f(rs))).collect();
        handles.into_iter().map(|h| h.join().expect("reference thread")).collect()
    })
}

/// The LM-head tail's per-row values for the listed rows.
#[derive(Clone, Debug, Default)]
pub struct HeadRows {
    pub loss: Vec<f64>,
    pub lse: Vec<f64>,
    /// The final norm's statistic `s = mean(dn ⊙ n)`.
    pub s: Vec<f64>,
    pub dx: Vec<f64>,
}

/// The head's weight gradients summed over the rows given.
#[derive(Clone, Debug, Default)]
pub struct HeadWeightGrads {
    pub dgamma: Vec<f64>,
    pub dw: Vec<f64>,
}

struct HeadRow {
    loss: f64,
    lse: f64,
    s: f64,
    dx: Vec<f64>,
    dlogits: Vec<f64>,
    xg: Vec<f64>,
    dn_xhat: Vec<f64>,
}

/// One row of final RMSNorm → `z = n · Wᵀ` → `y` (`z`, or soft-capped
/// `cap · tanh(z / cap)`) → the loss `lse − (1 − ε)·y[t] − (ε / V)·Σy + λ·lse²`
/// of `loss` (plain cross-entropy by default), and its backward for a loss
/// weight `weight` (`1 / n_valid`, or 0 when ignored).
#[allow(clippy::too_many_arguments)]
fn head_row(x: &[f64], gamma: &[f64], w: &[f64], target: i64, weight: f64, eps: f64, loss: &HeadLoss, path: Path) -> HeadRow {
    let rnd = |v: f64| if path == Path::F64 { v } else { round_bf16(v) };
    let d = x.len();
    let n = rms_norm(x, gamma, eps, path);
    let z: Vec<f64> = matvec(&n, w, d).into_iter().map(rnd).collect();
    let cap = loss.softcap.map(f64::from);
    // tanh(z / cap) for the cap and its derivative; y = z without one.
    let t: Vec<f64> = z.iter().map(|&z| cap.map_or(0.0, |c| rnd((z / c).tanh()))).collect();
    let logits: Vec<f64> = match cap {
        Some(c) => t.iter().map(|&t| rnd(c * t)).collect(),
        None => z.clone(),
    };
    let (eps_s, lambda, v) = (loss.label_smoothing as f64, loss.z_loss as f64, logits.len() as f64);
    let mx = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let lse = mx + logits.iter().map(|l| (l - mx).exp()).sum::<f64>().ln();
    let valid = target >= 0 && (target as usize) < logits.len();
    let sum: f64 = logits.iter().sum();
    let loss = if valid { lse - (1.0 - eps_s) * logits[target as usize] - eps_s / v * sum + lambda * lse * lse } else { 0.0 };
    let weight = if valid { weight } else { 0.0 };
    let dlogits: Vec<f64> = logits
        .iter()
        .enumerate()
        .map(|(j, l)| {
            let onehot = if valid && j as i64 == target { 1.0 - eps_s } else { 0.0 };
            let dy = ((l - lse).exp() * (1.0 + 2.0 * lambda * lse) - onehot - eps_s / v) * weight;
            rnd(if cap.is_some() { dy * (1.0 - t[j] * t[j]) } else { dy })
        })
        .collect();
    let dn: Vec<f64> = matvec_t(&dlogits, w, d).into_iter().map(rnd).collect();
    let (dx, xg, s, xhat) = rms_norm_backward(x, gamma, &dn, eps, path);
    let dn_xhat = dn.iter().zip(&xhat).map(|(a, b)| a * b).collect();
    HeadRow { loss, lse, s, dx, dlogits, xg, dn_xhat }
}

/// The standard tail for `rows` of the residual stream `x` `[M, d]` with final
/// norm weight `gamma` `[d]`, head `w` `[V, d]` and `targets` `[M]`; the loss
/// (`loss`'s terms per row) is the mean over all non-ignored rows of
/// `targets`, and the weight gradients are summed over `rows`.
#[allow(clippy::too_many_arguments)]
pub fn head_rows(
    x: &[bf16],
    gamma: &[bf16],
    w: &[bf16],
    targets: &[i32],
    eps: f32,
    loss: &HeadLoss,
    rows: &[usize],
    path: Path,
) -> (HeadRows, HeadWeightGrads) {
    let (d, v) = (gamma.len(), w.len() / gamma.len());
    let valid = targets.iter().filter(|&&t| t >= 0 && (t as usize) < v).count();
    let weight = if valid > 0 { 1.0 / valid as f64 } else { 0.0 };
    let (g, w) = (f64s(gamma), f64s(w));
    let parts = in_threads(rows, |rs| {
        let mut out = HeadRows::default();
        let mut wg = HeadWeightGrads { dgamma: vec![0.0; d], dw: vec![0.0; v * d] };
        for &r in rs {
            let h = head_row(&f64s(&x[r * d..(r + 1) * d]), &g, &w, targets[r] as i64, weight, eps as f64, loss, path);
            out.loss.push(h.loss);
            out.lse.push(h.lse);
            out.s.push(h.s);
            out.dx.extend(h.dx);
            outer_add(&mut wg.dw, &h.dlogits, &h.xg);
            wg.dgamma.iter_mut().zip(&h.dn_xhat).for_each(|(a, b)| *a += b);
        }
        (out, wg)
    });
    let mut out = HeadRows::default();
    let mut wg = HeadWeightGrads { dgamma: vec![0.0; d], dw: vec![0.0; v * d] };
    for (p, g) in parts {
        out.loss.extend(p.loss);
        out.lse.extend(p.lse);
        out.s.extend(p.s);
        out.dx.extend(p.dx);
        wg.dw.iter_mut().zip(&g.dw).for_each(|(a, b)| *a += b);
        wg.dgamma.iter_mut().zip(&g.dgamma).for_each(|(a, b)| *a += b);
    }
    if path == Path::Bf16Unfused {
        wg.dw.iter_mut().chain(wg.dgamma.iter_mut()).for_each(|x| *x = round_bf16(*x as f32 as f64));
    }
    (out, wg)
}

#[cfg(test)]
mod finite_differences {
    //! The hand-written f64 backward against central differences of the f64
    //! forward, once, on a tiny block: every input and weight, a few entries each.
    use super::*;

    fn values(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
        crate::host::Rng::new(seed).f64s(n, lo, hi)
    }

    /// Central difference of `loss` along entry `i` of `v`.
    fn fd(v: &mut [f64], i: usize, loss: &mut dyn FnMut(&[f64]) -> f64) -> f64 {
        let (x, h) = (v[i], 1e-5);
        v[i] = x + h;
        let up = loss(v);
        v[i] = x - h;
        let down = loss(v);
        v[i] = x;
        (up - down) / (2.0 * h)
    }

    fn close(name: &str, fd: f64, analytic: f64) {
        assert!((fd - analytic).abs() <= 1e-6 * (1.0 + analytic.abs()), "{name}: finite difference {fd:e}, backward {analytic:e}");
    }

    /// Without QK-norm (head_dim 8) and with it (head_dim 128, its only size).
    #[test]
    fn block_backward_matches_finite_differences() {
        for (qk_norm, head_dim) in [(false, 8), (true, 128)] {
            let c = BlockConfig { hidden: 16, ffn: 24, heads: 2, kv_heads: 1, head_dim, eps: 1e-5, rope_theta: 10000.0, qk_norm };
            block_matches_finite_differences(&c);
        }
    }

    fn block_matches_finite_differences(c: &BlockConfig) {
        let c = *c;
        let (d, f, ka, q) = (c.hidden, c.ffn, c.attn_width(), c.qkv_width());
        let w = W {
            wo: values(d * ka, 1, -0.4, 0.4),
            g1: values(d, 2, 0.5, 1.5),
            wgu: values(2 * f * d, 3, -0.4, 0.4),
            wd: values(d * f, 4, -0.3, 0.3),
            g2: values(d, 5, 0.5, 1.5),
            wqkv: values(q * d, 6, -0.4, 0.4),
            qk: c.qk_norm.then(|| (values(c.head_dim, 14, 0.5, 1.5), values(c.head_dim, 15, 0.5, 1.5))),
        };
        let (attn, x0, pos) = (values(ka, 7, -1.0, 1.0), values(d, 8, -1.0, 1.0), 5.0);
        let (dx2, dqkv) = (values(d, 9, -1.0, 1.0), values(q, 10, -1.0, 1.0));
        // L = Σ dx2 ⊙ x2 + Σ dqkv ⊙ qkv has exactly these output gradients.
        let loss = |w: &W, attn: &[f64], x0: &[f64]| {
            let mut o = ForwardRows::default();
            forward_row(&c, w, attn, x0, pos, Path::F64, &mut o);
            o.x2.iter().zip(&dx2).chain(o.qkv.iter().zip(&dqkv)).map(|(a, b)| a * b).sum::<f64>()
        };
        let mut out = BackwardRows::default();
        let mut g = WeightGrads::zeros(&c, true);
        backward_row(&c, &w, &attn, &x0, pos, &dx2, &dqkv, Path::F64, &mut out, Some(&mut g));

        let picks = |n: usize| [0, n / 3, n - 1];
        let (mut a, mut x) = (attn.clone(), x0.clone());
        for i in picks(ka) {
            close("dattn", fd(&mut a, i, &mut |a| loss(&w, a, &x0)), out.dattn[i]);
        }
        for i in picks(d) {
            close("dx0", fd(&mut x, i, &mut |x| loss(&w, &attn, x)), out.dx0[i]);
        }
        let mut weights: Vec<(&str, fn(&mut W) -> &mut Vec<f64>, &Vec<f64>)> = vec![
            ("dwo", |w| &mut w.wo, &g.dwo),
            ("dgamma1", |w| &mut w.g1, &g.dgamma1),
            ("dw_gate_up", |w| &mut w.wgu, &g.dw_gate_up),
            ("dw_down", |w| &mut w.wd, &g.dw_down),
            ("dgamma2", |w| &mut w.g2, &g.dgamma2),
            ("dw_qkv", |w| &mut w.wqkv, &g.dw_qkv),
        ];
        if c.qk_norm {
            weights.push(("dq_norm", |w| &mut w.qk.as_mut().expect("QK-norm weights").0, &g.dq_norm));
            weights.push(("dk_norm", |w| &mut w.qk.as_mut().expect("QK-norm weights").1, &g.dk_norm));
        }
        for (name, field, grad) in weights {
            for i in picks(grad.len()) {
                let mut wv = w.clone();
                let mut v = field(&mut wv).clone();
                let numeric = fd(&mut v, i, &mut |v| {
                    *field(&mut wv) = v.to_vec();
                    loss(&wv, &attn, &x0)
                });
                close(name, numeric, grad[i]);
            }
        }
    }

    /// Plain cross-entropy, and soft-capping, z-loss and label smoothing together.
    #[test]
    fn head_backward_matches_finite_differences() {
        let (d, v, eps) = (16, 40, 1e-5);
        let (x, g, w) = (values(d, 11, -1.0, 1.0), values(d, 12, 0.5, 1.5), values(v * d, 13, -0.5, 0.5));
        let (target, weight) = (7, 0.25);
        for variant in [HeadLoss::default(), HeadLoss { softcap: Some(1.5), z_loss: 0.05, label_smoothing: 0.1 }] {
            let h = head_row(&x, &g, &w, target, weight, eps, &variant, Path::F64);
            let loss = |x: &[f64], g: &[f64], w: &[f64]| weight * head_row(x, g, w, target, weight, eps, &variant, Path::F64).loss;
            let (mut xv, mut gv, mut wv) = (x.clone(), g.clone(), w.clone());
            for i in [0, 5, d - 1] {
                close("dx", fd(&mut xv, i, &mut |xv| loss(xv, &g, &w)), h.dx[i]);
                close("dgamma", fd(&mut gv, i, &mut |gv| loss(&x, gv, &w)), h.dn_xhat[i]);
            }
            let mut dw = vec![0.0; v * d];
            outer_add(&mut dw, &h.dlogits, &h.xg);
            for i in [0, target as usize * d + 3, v * d - 1] {
                close("dw", fd(&mut wv, i, &mut |wv| loss(&x, &g, wv)), dw[i]);
            }
        }
    }
}
