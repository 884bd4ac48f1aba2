//! One GPU correctness case: every output (partials and `r` included) against
//! the interpreter in f64, with the unfused bf16 path as the yardstick.

use std::collections::HashMap;

use coda_runtime::dsl::interp::{self, Inputs, Precision, round_bf16};
use coda_runtime::{Error, Stream, Tensor, bf16};

use coda_tests::host::{Check, Rng, linear_rows, sample_rows, to_f64};
use crate::{NormLinear, Weights, norm_linear, residual_rms_partial, rowscale};

pub const EPS: f32 = 1e-5;

#[derive(Debug)]
pub struct CaseReport {
    pub m: usize,
    pub d: usize,
    pub k: usize,
    pub f: usize,
    pub rows_checked: usize,
    pub checks: Vec<Check>,
    /// A second run on the same inputs gave bitwise identical outputs.
    pub repeat_bitwise: bool,
}

impl CaseReport {
    pub fn pass(&self) -> bool {
        self.repeat_bitwise && self.checks.iter().all(Check::pass)
    }
}

struct Host {
    x: Vec<bf16>,
    z: Vec<bf16>,
    wo: Vec<bf16>,
    gamma: Vec<bf16>,
    w1: Vec<bf16>,
}

fn poison(o: &mut NormLinear) -> Result<(), Error> {
    o.h.poison()?;
    o.u.poison()?;
    o.sq.poison()?;
    o.r.poison()?;
    o.y.poison()
}

struct Got {
    h: Vec<bf16>,
    u: Vec<bf16>,
    sq: Vec<f32>,
    r: Vec<f32>,
    y: Vec<bf16>,
}

fn download(o: &NormLinear) -> Result<Got, Error> {
    let sq = o.sq.tensor().ok_or_else(|| Error::arg("sq", "not written"))?.to_host()?;
    Ok(Got { h: o.h.to_host()?, u: o.u.to_host()?, sq, r: o.r.to_host()?, y: o.y.to_host()? })
}

fn rows_of<T: Copy>(v: &[T], width: usize, rows: &[usize]) -> Vec<T> {
    rows.iter().flat_map(|&r| v[r * width..(r + 1) * width].iter().copied()).collect()
}

/// `x·Woᵀ + z`, RMSNorm, `·W1ᵀ` at `x [m, k]`, `d` hidden, `f` outputs, on fresh random data.
/// Large problems are checked on `sample` rows (first and last 64 and random ones).
pub fn run_case(stream: &Stream, m: usize, d: usize, k: usize, f: usize, seed: u64, sample: usize) -> Result<CaseReport, Error> {
    let mut rng = Rng::new(seed);
    let (so, s1) = ((3.0 / k as f64).sqrt(), (3.0 / d as f64).sqrt());
    let host = Host {
        x: rng.bf16s(m * k, -1.0, 1.0),
        z: rng.bf16s(m * d, -1.0, 1.0),
        wo: rng.bf16s(d * k, -so, so),
        gamma: rng.bf16s(d, 0.5, 1.5),
        w1: rng.bf16s(f * d, -s1, s1),
    };
    let x = Tensor::from_host(stream, &host.x, &[m, k])?;
    let z = Tensor::from_host(stream, &host.z, &[m, d])?;
    let w = Weights {
        wo: Tensor::from_host(stream, &host.wo, &[d, k])?,
        gamma: Tensor::from_host(stream, &host.gamma, &[d])?,
        w1: Tensor::from_host(stream, &host.w1, &[f, d])?,
        eps: EPS,
    };
    let mut out = NormLinear::new(stream, m, d, f)?;
    norm_linear(stream, &x, &z, &w, &mut out)?;
    poison(&mut out)?;
    norm_linear(stream, &x, &z, &w, &mut out)?;
    let got = download(&out)?;
    poison(&mut out)?;
    norm_linear(stream, &x, &z, &w, &mut out)?;
    let again = download(&out)?;
    let bits = |a: &[bf16], b: &[bf16]| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
    let fbits = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
    let repeat_bitwise = bits(&got.h, &again.h)
        && bits(&got.u, &again.u)
        && fbits(&got.sq, &again.sq)
        && fbits(&got.r, &again.r)
        && bits(&got.y, &again.y);

    let rows = sample_rows(m, sample, &mut rng);
    let n_rows = rows.len();
    // The partials' layout follows the config the launch ran.
    let config = out.sq.producer().expect("written above").config;
    let p1 = coda_runtime::dsl::Program { config, ..residual_rms_partial::program() };
    let n_tiles = p1.n_tiles(d);
    let m_pad = p1.m_padded(m);
    let acc = linear_rows(&to_f64(&host.x), &to_f64(&host.wo), k, &rows);
    let inputs = Inputs {
        acc: acc.clone(),
        tensors: HashMap::from([
            ("z".to_string(), to_f64(&rows_of(&host.z, d, &rows))),
            ("gamma".to_string(), to_f64(&host.gamma)),
        ]),
        scalars: HashMap::new(),
    };
    let eval = |prec| interp::evaluate(&p1, n_rows, d, &inputs, prec).expect("inputs match the program");
    let (ref1, bf1) = (eval(Precision::F64), eval(Precision::Bf16Unfused));
    let mut checks = vec![];
    for name in ["h", "u"] {
        let ours = to_f64(&rows_of(if name == "h" { &got.h } else { &got.u }, d, &rows));
        checks.push(Check::new(name, &ours, &bf1[name], &ref1[name]));
    }
    let sq_ours = interp::partials_from_device(&got.sq, m_pad, n_tiles, &rows);
    checks.push(Check::new("sq (partials)", &sq_ours, &bf1["sq"], &ref1["sq"]));
    let r_ref = interp::rms_from_partials(&ref1["sq"], n_tiles, d, EPS as f64);
    let r_bf: Vec<f64> =
        interp::rms_from_partials(&bf1["sq"], n_tiles, d, EPS as f64).iter().map(|&v| v as f32 as f64).collect();
    let r_ours: Vec<f64> = rows.iter().map(|&i| got.r[i] as f64).collect();
    checks.push(Check::new("r (aux)", &r_ours, &r_bf, &r_ref));

    // The consumer kernel on its actual inputs (our u and r).
    let p2 = rowscale::program();
    let acc2 = linear_rows(&to_f64(&got.u), &to_f64(&host.w1), d, &rows);
    let inputs2 = Inputs {
        acc: acc2,
        tensors: HashMap::from([("r".to_string(), r_ours.clone())]),
        scalars: HashMap::new(),
    };
    let eval2 = |prec| interp::evaluate(&p2, n_rows, f, &inputs2, prec).expect("inputs match the program");
    let y_ours = to_f64(&rows_of(&got.y, f, &rows));
    checks.push(Check::new("y", &y_ours, &eval2(Precision::Bf16Unfused)["y"], &eval2(Precision::F64)["y"]));

    // End to end against the standard block: RMSNorm(h; γ) then the GEMM.
    let gamma = to_f64(&host.gamma);
    let z_rows = to_f64(&rows_of(&host.z, d, &rows));
    let mut norm_ref = vec![0.0; n_rows * d];
    let mut norm_bf = vec![0.0; n_rows * d];
    for i in 0..n_rows {
        let h_ref = &ref1["h"][i * d..(i + 1) * d];
        let h_bf: Vec<f64> = (0..d).map(|j| round_bf16(round_bf16(acc[i * d + j]) + z_rows[i * d + j])).collect();
        let ms_bf = h_bf.iter().fold(0f32, |s, v| s + (round_bf16(v * v)) as f32) / d as f32;
        let r_b = 1.0 / (ms_bf + EPS).sqrt();
        for j in 0..d {
            norm_ref[i * d + j] = h_ref[j] * r_ref[i] * gamma[j];
            norm_bf[i * d + j] = round_bf16(round_bf16(h_bf[j] * r_b as f64) * gamma[j]);
        }
    }
    let all: Vec<usize> = (0..n_rows).collect();
    let y_std = linear_rows(&norm_ref, &to_f64(&host.w1), d, &all);
    let y_std_bf: Vec<f64> = linear_rows(&norm_bf, &to_f64(&host.w1), d, &all).into_iter().map(round_bf16).collect();
    checks.push(Check::new("y vs standard RMSNorm·W1ᵀ", &y_ours, &y_std_bf, &y_std));

    Ok(CaseReport { m, d, k, f, rows_checked: n_rows, checks, repeat_bitwise })
}
