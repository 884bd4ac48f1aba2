//! The interpreter's semantics: partial layouts on ragged tiles, precisions,
//! the device partial layout, and the RMSNorm reparameterisation in f64.

use std::collections::HashMap;

use coda_dsl::interp::{self, Inputs, Precision, round_bf16};
use coda_dsl::ir::{Config, Schedule};
use quote::quote;

fn program(item: proc_macro2::TokenStream, config: Config) -> coda_dsl::Program {
    coda_dsl::lower_fn(&syn::parse2(item).unwrap(), config).unwrap()
}

fn oproj() -> coda_dsl::Program {
    program(
        quote! {
            fn residual_rms_partial(acc: Acc, z: Tile<bf16>, gamma: PerCol<bf16>)
                -> (Tile<bf16>, Tile<bf16>, RowPartial<f32>) {
                let h = acc + z;
                let u = h * gamma;
                let sq = row_sum(h * h);
                (h, u, sq)
            }
        },
        Config { tile_n: 128, tile_m: 128, ..Config::default() },
    )
}

/// Deterministic, never-zero test values.
fn values(n: usize, seed: u64) -> Vec<f64> {
    (0..n).map(|i| (((i as u64 + 1) * 2654435761 ^ seed) % 1999) as f64 / 1000.0 - 0.9995).collect()
}

#[test]
fn row_partials_cover_ragged_last_tile() {
    let p = oproj();
    let (rows, n) = (3, 300); // tiles of 128: 128 + 128 + 44 columns
    let acc = values(rows * n, 1);
    let z = values(rows * n, 2);
    let inputs = Inputs {
        acc: acc.clone(),
        tensors: HashMap::from([("z".into(), z.clone()), ("gamma".into(), values(n, 3))]),
        scalars: HashMap::new(),
    };
    let out = interp::evaluate(&p, rows, n, &inputs, Precision::F64).unwrap();
    assert_eq!(out["sq"].len(), rows * 3);
    for r in 0..rows {
        for (t, cols) in [(0, 0..128), (1, 128..256), (2, 256..300)] {
            let want: f64 = cols.map(|c| (acc[r * n + c] + z[r * n + c]).powi(2)).sum();
            assert!((out["sq"][r * 3 + t] - want).abs() < 1e-12, "row {r} tile {t}");
        }
        let total: f64 = out["sq"][r * 3..r * 3 + 3].iter().sum();
        let full: f64 = (0..n).map(|c| out["h"][r * n + c].powi(2)).sum();
        assert!((total - full).abs() < 1e-9);
    }
}

#[test]
fn precisions_round_where_the_kernels_and_pytorch_do() {
    let p = oproj();
    let (rows, n) = (2, 16);
    let inputs = Inputs {
        acc: values(rows * n, 4),
        tensors: HashMap::from([("z".into(), values(rows * n, 5)), ("gamma".into(), values(n, 6))]),
        scalars: HashMap::new(),
    };
    let f64o = interp::evaluate(&p, rows, n, &inputs, Precision::F64).unwrap();
    let f32o = interp::evaluate(&p, rows, n, &inputs, Precision::F32).unwrap();
    let bf = interp::evaluate(&p, rows, n, &inputs, Precision::Bf16Unfused).unwrap();
    for i in 0..rows * n {
        // Fused: computed in f32, rounded once to bf16 on store.
        assert_eq!(f32o["h"][i], round_bf16((inputs.acc[i] as f32 + inputs.tensors["z"][i] as f32) as f64));
        // Unfused: the GEMM output itself is bf16 first.
        assert_eq!(bf["h"][i], round_bf16(round_bf16(inputs.acc[i]) + inputs.tensors["z"][i]));
        // Reference: exact.
        assert_eq!(f64o["h"][i], inputs.acc[i] + inputs.tensors["z"][i]);
    }
}

#[test]
fn device_partials_layout_is_tile_major() {
    // [n_tiles = 2, m_pad = 4]: m fastest.
    let dev = [0.0f32, 1.0, 2.0, 3.0, 10.0, 11.0, 12.0, 13.0];
    assert_eq!(interp::partials_from_device(&dev, 4, 2, &[1, 3]), vec![1.0, 11.0, 3.0, 13.0]);
}

#[test]
fn reparameterised_norm_equals_rmsnorm_then_gemm() {
    let p1 = oproj();
    let p2 = program(quote! { fn rowscale(acc: Acc, r: PerRow<f32>) -> Tile<bf16> { let y = acc * r; y } }, Config::default());
    let (rows, d, f, eps) = (5, 300, 7, 1e-5);
    let (h0, z, gamma, w) = (values(rows * d, 7), values(rows * d, 8), values(d, 9), values(f * d, 10));
    let o1 = interp::evaluate(
        &p1,
        rows,
        d,
        &Inputs { acc: h0.clone(), tensors: HashMap::from([("z".into(), z.clone()), ("gamma".into(), gamma.clone())]), scalars: HashMap::new() },
        Precision::F64,
    )
    .unwrap();
    let r = interp::rms_from_partials(&o1["sq"], p1.n_tiles(d), d, eps);
    let gemm = |x: &[f64]| -> Vec<f64> {
        let mut out = vec![0.0; rows * f];
        for i in 0..rows {
            for j in 0..f {
                out[i * f + j] = (0..d).map(|k| x[i * d + k] * w[j * d + k]).sum();
            }
        }
        out
    };
    let y = interp::evaluate(
        &p2,
        rows,
        f,
        &Inputs { acc: gemm(&o1["u"]), tensors: HashMap::from([("r".into(), r)]), scalars: HashMap::new() },
        Precision::F64,
    )
    .unwrap()["y"]
        .clone();
    // Standard: RMSNorm(h; γ) then the GEMM.
    let mut normed = vec![0.0; rows * d];
    for i in 0..rows {
        let h: Vec<f64> = (0..d).map(|k| h0[i * d + k] + z[i * d + k]).collect();
        let rr = 1.0 / (h.iter().map(|v| v * v).sum::<f64>() / d as f64 + eps).sqrt();
        for k in 0..d {
            normed[i * d + k] = h[k] * rr * gamma[k];
        }
    }
    let y_std = gemm(&normed);
    for (a, b) in y.iter().zip(&y_std) {
        assert!((a - b).abs() <= 1e-10 * b.abs().max(1e-3), "{a} vs {b}");
    }
}

#[test]
fn every_function_has_its_math_meaning() {
    let p = program(
        quote! {
            fn maps(acc: Acc, s: Scalar) -> Tile<f32> {
                let y = select(acc - 0.5, max(exp(acc), log(abs(acc) + s)), min(silu(acc) / sigmoid(acc), tanh(sqrt(abs(acc)) * rsqrt(s))));
                y
            }
        },
        Config::default(),
    );
    let acc = vec![0.5, -1.25, 2.0, 0.0];
    let s = 1.5;
    let out = interp::evaluate(&p, 1, 4, &Inputs { acc: acc.clone(), tensors: HashMap::new(), scalars: HashMap::from([("s".into(), s)]) }, Precision::F64)
        .unwrap();
    for (i, &x) in acc.iter().enumerate() {
        let sig = 1.0 / (1.0 + (-x).exp());
        let want = if x - 0.5 != 0.0 { x.exp().max((x.abs() + s).ln()) } else { (x * sig / sig).min((x.abs().sqrt() / s.sqrt()).tanh()) };
        assert!((out["y"][i] - want).abs() < 1e-12, "x = {x}");
    }
}

/// Each comparison is 1 where it holds and 0 elsewhere, as IEEE compares:
/// a NaN operand makes every one false but `!=`.
#[test]
fn comparisons_give_one_or_zero() {
    let p = program(
        quote! {
            fn compares(acc: Acc, t: PerCol<f32>) -> (Tile<f32>, Tile<bf16>) {
                let bits = (acc > t) + 2.0 * (acc >= t) + 4.0 * (acc < t) + 8.0 * (acc <= t) + 16.0 * (acc == t) + 32.0 * (acc != t);
                let relu_grad = select(acc > 0.0, t, 0.0);
                (bits, relu_grad)
            }
        },
        Config::default(),
    );
    let acc = vec![1.0, 2.0, 3.0, f64::NAN, -0.0, -1.0];
    let t = vec![2.0, 2.0, 2.0, 2.0, 0.0, 5.0];
    let out = eval(&p, 1, 6, acc.clone(), &[("t", t.clone())]);
    for (i, (&a, &b)) in acc.iter().zip(&t).enumerate() {
        let want = [a > b, a >= b, a < b, a <= b, a == b, a != b].iter().enumerate().map(|(k, &v)| if v { (1 << k) as f64 } else { 0.0 }).sum::<f64>();
        assert_eq!(out["bits"][i], want, "{a} vs {b}");
        assert_eq!(out["relu_grad"][i], if a > 0.0 { b } else { 0.0 });
    }
}

fn eval(p: &coda_dsl::Program, rows: usize, n: usize, acc: Vec<f64>, tensors: &[(&str, Vec<f64>)]) -> HashMap<String, Vec<f64>> {
    let tensors = tensors.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    interp::evaluate(p, rows, n, &Inputs { acc, tensors, scalars: HashMap::new() }, Precision::F64).unwrap()
}

#[test]
fn lse_partials_handle_ragged_tiles_and_minus_infinity() {
    let p = program(
        quote! { fn ce(acc: Acc) -> LsePartial<f32> { let lse = row_lse(acc); lse } },
        Config { tile_n: 128, ..Config::default() },
    );
    let (rows, n) = (2, 200); // tiles: 128 + 72 columns
    let mut acc = values(rows * n, 11);
    for c in 128..200 {
        acc[n + c] = f64::NEG_INFINITY; // row 1's last tile is all −inf
    }
    let out = eval(&p, rows, n, acc.clone(), &[]);
    let lse = &out["lse"]; // [rows, n_tiles, 2]
    for r in 0..rows {
        for (t, cols) in [(0, 0..128), (1, 128..200)] {
            let (mx, se) = (lse[r * 4 + 2 * t], lse[r * 4 + 2 * t + 1]);
            let want_mx = cols.clone().map(|c| acc[r * n + c]).fold(f64::NEG_INFINITY, f64::max);
            assert_eq!(mx, want_mx);
            if want_mx == f64::NEG_INFINITY {
                assert_eq!(se, 0.0, "an all −inf tile contributes nothing");
            } else {
                let want: f64 = cols.map(|c| (acc[r * n + c] - mx).exp()).sum();
                assert!((se - want).abs() < 1e-12);
            }
        }
        let full = interp::lse_from_partials(&lse[r * 4..r * 4 + 4], 2)[0];
        let direct = (0..n).map(|c| acc[r * n + c]).filter(|x| x.is_finite()).map(f64::exp).sum::<f64>().ln();
        assert!((full - direct).abs() < 1e-12, "row {r}: {full} vs {direct}");
    }
}

#[test]
fn gather_picks_the_target_column_and_skips_ignored_rows() {
    let p = program(
        quote! { fn g(acc: Acc, target: PerRow<i32>) -> PerRow<f32> { let t = gather(acc, target); t } },
        Config::default(),
    );
    let (rows, n) = (4, 16);
    let acc = values(rows * n, 12);
    let out = eval(&p, rows, n, acc.clone(), &[("target", vec![3.0, -100.0, 15.0, 16.0])]);
    assert_eq!(out["t"][0], acc[3]);
    assert!(out["t"][1].is_nan(), "the ignore index writes nothing");
    assert_eq!(out["t"][2], acc[2 * n + 15]);
    assert!(out["t"][3].is_nan(), "a target past N writes nothing");
}

#[test]
fn onehot_marks_the_target_column_and_nothing_for_ignored_rows() {
    let p = program(
        quote! { fn o(acc: Acc, target: PerRow<i32>) -> Tile<f32> { let y = acc - onehot(target); y } },
        Config::default(),
    );
    let (rows, n) = (3, 16);
    let acc = values(rows * n, 13);
    let out = eval(&p, rows, n, acc.clone(), &[("target", vec![5.0, -100.0, 16.0])]);
    for r in 0..rows {
        for c in 0..n {
            let hot = r == 0 && c == 5;
            assert_eq!(out["y"][r * n + c], acc[r * n + c] - if hot { 1.0 } else { 0.0 }, "row {r} col {c}");
        }
    }
}

#[test]
fn map_programs_need_no_accumulator() {
    let p = program(
        quote! { fn m(x: Tile<bf16>, w: PerRow<f32>) -> (Tile<bf16>, RowPartial<f32>) { let y = x * w; let s = row_sum(x * y); (y, s) } },
        Config::default(),
    );
    assert!(p.is_map());
    let (rows, n) = (2, 8);
    let x = values(rows * n, 14);
    let out = eval(&p, rows, n, vec![], &[("x", x.clone()), ("w", vec![2.0, -1.0])]);
    assert_eq!(out["y"][n + 3], -x[n + 3]);
    let want: f64 = (0..n).map(|c| 2.0 * x[c] * x[c]).sum();
    assert!((out["s"][0] - want).abs() < 1e-12);
}

#[test]
fn col_partials_sum_each_m_tile_including_the_ragged_one() {
    let p = program(quote! { fn c(acc: Acc) -> ColPartial<f32> { let d = col_sum(acc); d } }, Config::default());
    let (rows, n) = (300, 8); // M-tiles of 128: 128 + 128 + 44 rows
    let acc = values(rows * n, 13);
    let out = eval(&p, rows, n, acc.clone(), &[]);
    assert_eq!(out["d"].len(), 3 * n);
    for (t, rs) in [(0, 0..128), (1, 128..256), (2, 256..300)] {
        for c in 0..n {
            let want: f64 = rs.clone().map(|r| acc[r * n + c]).sum();
            assert!((out["d"][t * n + c] - want).abs() < 1e-12);
        }
    }
    assert_eq!(interp::col_partials_from_device(&[1.0, 2.0, 9.0, 3.0, 4.0, 9.0], 3, 2), vec![1.0, 2.0, 3.0, 4.0]);
}

#[test]
fn max_partials_ignore_nan_and_start_at_minus_infinity() {
    let p = program(
        quote! {
            fn amax(acc: Acc) -> (RowMaxPartial<f32>, ColMaxPartial<f32>) {
                let r = row_max(abs(acc));
                let c = col_max(acc);
                (r, c)
            }
        },
        Config::default(),
    );
    let (rows, n): (usize, usize) = (130, 300); // two M-tiles, the second of one row; ragged N-tiles
    let n_tiles = n.div_ceil(p.config.tile_n);
    let mut acc = values(rows * n, 17);
    acc[5 * n + 7] = f64::NAN; // ignored, as `max` does
    for c in 0..n {
        acc[129 * n + c] = f64::NAN; // the second M-tile's one row: nothing to reduce
    }
    let out = eval(&p, rows, n, acc.clone(), &[]);
    let fmax = |xs: &mut dyn Iterator<Item = f64>| xs.fold(f64::NEG_INFINITY, f64::max);
    for r in 0..rows {
        for t in 0..n_tiles {
            let cols = t * p.config.tile_n..((t + 1) * p.config.tile_n).min(n);
            let want = fmax(&mut cols.map(|c| acc[r * n + c].abs()));
            assert_eq!(out["r"][r * n_tiles + t], want, "row {r} tile {t}");
        }
    }
    assert_eq!(out["r"][129 * n_tiles], f64::NEG_INFINITY);
    assert!(out["r"][5 * n_tiles].is_finite());
    assert_eq!(out["c"].len(), 2 * n);
    for c in 0..n {
        assert_eq!(out["c"][c], fmax(&mut (0..128).map(|r| acc[r * n + c])), "column {c}");
        assert_eq!(out["c"][n + c], fmax(&mut (128..130).map(|r| acc[r * n + c])), "column {c}, second M-tile");
    }
    // Every value is negative in these: the identity is −∞, not 0.
    let neg: Vec<f64> = acc.iter().map(|x| -x.abs() - 1.0).collect();
    let out = eval(&p, rows, n, neg, &[]);
    assert!(out["c"].iter().all(|&x| x < -1.0));
}

#[test]
fn unpair_and_pair_move_between_widths() {
    let p = program(
        quote! {
            fn pw(acc: Acc, z: DoubleTile<bf16>) -> (HalfTile<f32>, Tile<f32>, DoubleTile<bf16>) {
                let (g, u) = unpair(acc);
                let half = g * u;
                let swapped = pair(u, g);
                let (e, o) = unpair(z);
                let wide = pair(e + 1.0, o * 2.0);
                (half, swapped, wide)
            }
        },
        Config::default(),
    );
    let (rows, n) = (2, 8);
    let acc = values(rows * n, 14);
    let z = values(rows * 2 * n, 15);
    let out = eval(&p, rows, n, acc.clone(), &[("z", z.clone())]);
    for r in 0..rows {
        for j in 0..n / 2 {
            let (g, u) = (acc[r * n + 2 * j], acc[r * n + 2 * j + 1]);
            assert_eq!(out["half"][r * n / 2 + j], g * u);
            assert_eq!(out["swapped"][r * n + 2 * j], u);
            assert_eq!(out["swapped"][r * n + 2 * j + 1], g);
        }
        for c in 0..n {
            assert_eq!(out["wide"][r * 2 * n + 2 * c], z[r * 2 * n + 2 * c] + 1.0);
            assert_eq!(out["wide"][r * 2 * n + 2 * c + 1], z[r * 2 * n + 2 * c + 1] * 2.0);
        }
    }
}

#[test]
fn rank_one_stores_keep_one_value_per_row_or_column() {
    let p = program(
        quote! {
            fn r1(acc: Acc, r: PerRow<f32>, g: PerCol<f32>) -> (Tile<f32>, PerRow<f32>, PerCol<f32>) {
                let y = acc * r * g;
                let rr = r * 2.0;
                let gg = g + 1.0;
                (y, rr, gg)
            }
        },
        Config::default(),
    );
    let (rows, n) = (3, 8);
    let (r, g) = (values(rows, 16), values(n, 17));
    let out = eval(&p, rows, n, values(rows * n, 18), &[("r", r.clone()), ("g", g.clone())]);
    assert_eq!(out["rr"], r.iter().map(|v| v * 2.0).collect::<Vec<_>>());
    assert_eq!(out["gg"], g.iter().map(|v| v + 1.0).collect::<Vec<_>>());
}

/// IEEE special values through `row_lse` and its finisher: a NaN anywhere in
/// a row is NaN (a max that skipped it would hide it), +∞ gives +∞ (not
/// ∞ − ∞ = NaN), an all −∞ row −∞; and the new maps and `pow` mean what
/// they say.
#[test]
fn lse_of_special_values_and_new_maps() {
    let p = program(
        quote! { fn ce(acc: Acc) -> LsePartial<f32> { let lse = row_lse(acc); lse } },
        Config { tile_n: 128, ..Config::default() },
    );
    let n = 200;
    let (inf, nan) = (f64::INFINITY, f64::NAN);
    let rows: [Vec<f64>; 4] = [
        (0..n).map(|c| if c == 150 { nan } else { 1.0 }).collect(),
        (0..n).map(|c| if c == 3 { inf } else { 1.0 }).collect(),
        vec![f64::NEG_INFINITY; n],
        (0..n).map(|c| if c % 2 == 0 { 1e4 } else { -1e4 }).collect(),
    ];
    let out = eval(&p, rows.len(), n, rows.concat(), &[]);
    let lse = interp::lse_from_partials(&out["lse"], 2);
    assert!(lse[0].is_nan(), "{lse:?}");
    assert!(out["lse"][2].is_nan() && out["lse"][3].is_nan(), "the NaN tile's partials are NaN");
    assert_eq!(lse[1], inf);
    assert_eq!((out["lse"][4], out["lse"][5]), (inf, 1.0), "a +∞ max sums to 1");
    assert_eq!(lse[2], f64::NEG_INFINITY);
    assert!((lse[3] - (1e4 + 100f64.ln())).abs() < 1e-9, "{}", lse[3]);

    let maps = program(
        quote! {
            fn act(acc: Acc) -> (Tile<f32>, Tile<f32>, Tile<f32>, Tile<f32>) {
                let g = gelu(acc);
                let ge = gelu_exact(acc);
                let sp = softplus(acc);
                let p = pow(acc, 7);
                (g, ge, sp, p)
            }
        },
        Config::default(),
    );
    let xs = vec![-3.0, -0.5, 0.0, 0.75, 2.5, 40.0];
    let out = eval(&maps, 1, xs.len(), xs.clone(), &[]);
    for (i, &x) in xs.iter().enumerate() {
        let tanh_form = 0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x.powi(3))).tanh());
        assert!((out["g"][i] - tanh_form).abs() < 1e-12, "gelu({x})");
        // erf(x/√2) = 2Φ(x) − 1; Φ(0.75) = 0.773372647623132 (tables).
        if x == 0.75 {
            assert!((out["ge"][i] - 0.75 * 0.773372647623132).abs() < 1e-12, "gelu_exact(0.75) = {}", out["ge"][i]);
        }
        assert!((out["sp"][i] - (1.0 + x.exp()).ln()).abs() < 1e-12 * (1.0 + x.abs()), "softplus({x})");
        assert_eq!(out["p"][i], x * x * x * x * x * x * x, "pow({x}, 7) is multiplications");
    }
}

/// Group reductions: each row's sum, mean or max over its group's columns
/// below N (a ragged last group included), at every column of the group.
#[test]
fn group_reductions_cover_each_group_and_the_ragged_last() {
    let p = program(
        quote! {
            fn g(acc: Acc) -> (Tile<f32>, Tile<f32>, Tile<f32>) {
                let s = group_sum(acc, 32);
                let m = group_mean(acc * acc, 32);
                let x = group_max(abs(acc), 32) + 0.0;
                (s, m, x)
            }
        },
        Config { tile_m: 128, tile_n: 128, schedule: Schedule::Pingpong, ..Config::default() },
    );
    let (rows, n) = (3, 70);
    let acc = values(rows * n, 7);
    let out = eval(&p, rows, n, acc.clone(), &[]);
    for r in 0..rows {
        for c in 0..n {
            let g = (c / 32) * 32..((c / 32 + 1) * 32).min(n);
            let xs = || g.clone().map(|j| acc[r * n + j]);
            let sum: f64 = xs().sum();
            let mean = xs().map(|x| x * x).sum::<f64>() / g.len() as f64;
            let max = xs().map(f64::abs).fold(f64::NEG_INFINITY, f64::max);
            assert!((out["s"][r * n + c] - sum).abs() < 1e-12, "sum at ({r}, {c})");
            assert!((out["m"][r * n + c] - mean).abs() < 1e-12, "mean at ({r}, {c})");
            assert_eq!(out["x"][r * n + c], max, "max at ({r}, {c})");
        }
    }
}

#[test]
fn fp8_stores_round_to_nearest_even_and_saturate() {
    use coda_dsl::interp::{round_e4m3, round_e5m2};
    // e4m3: 3 mantissa bits; 1.0625 is halfway between 1.0 and 1.125 → even (1.0).
    assert_eq!(round_e4m3(1.0625), 1.0);
    assert_eq!(round_e4m3(1.1875), 1.25);
    assert_eq!(round_e4m3(1000.0), 448.0);
    assert_eq!(round_e4m3(-1e9), -448.0);
    assert_eq!(round_e4m3(2f64.powi(-9)), 2f64.powi(-9)); // the smallest subnormal
    assert_eq!(round_e4m3(2f64.powi(-11)), 0.0);
    assert!(round_e4m3(f64::NAN).is_nan());
    // e5m2: 2 mantissa bits.
    assert_eq!(round_e5m2(1.125), 1.0);
    assert_eq!(round_e5m2(1.375), 1.5);
    assert_eq!(round_e5m2(1e6), 57344.0);
    let p = program(quote! { fn q(acc: Acc) -> Tile<e4m3> { let q = acc * 2.0; q } }, Config::default());
    let inputs = Inputs { acc: vec![0.53125, 300.0, -0.001], ..Inputs::default() };
    for precision in [Precision::F32, Precision::Bf16Unfused] {
        let out = interp::evaluate(&p, 1, 3, &inputs, precision).unwrap();
        assert_eq!(out["q"], [1.0, 448.0, -0.001953125], "{precision:?}");
    }
    // f64 rounds nothing but keeps the format's range, as the store does.
    let inputs = Inputs { acc: vec![0.53125, 300.0, -0.001, f64::NEG_INFINITY, f64::NAN], ..Inputs::default() };
    let exact = interp::evaluate(&p, 1, 5, &inputs, Precision::F64).unwrap();
    assert_eq!(exact["q"][..4], [1.0625, 448.0, -0.002, -448.0]);
    assert!(exact["q"][4].is_nan());
    let p = program(quote! { fn q(acc: Acc) -> Tile<e5m2> { let q = acc * 2.0; q } }, Config::default());
    let inputs = Inputs { acc: vec![1e5, -0.3], ..Inputs::default() };
    assert_eq!(interp::evaluate(&p, 1, 2, &inputs, Precision::F64).unwrap()["q"], [57344.0, -0.6]);
}

/// Sums of negative zeros are +0 in every precision, as on the device
/// (whose sums start from +0): so `1 / sum` is +∞, not −∞.
#[test]
fn sums_of_negative_zeros_are_positive_zero() {
    let p = program(
        quote! {
            fn z(acc: Acc) -> (Tile<f32>, RowPartial<f32>) {
                let g = 1.0 / group_sum(acc, 32);
                let s = row_sum(acc);
                (g, s)
            }
        },
        Config::default(),
    );
    for precision in [Precision::F64, Precision::F32, Precision::Bf16Unfused] {
        let out = interp::evaluate(&p, 1, 32, &Inputs { acc: vec![-0.0; 32], ..Inputs::default() }, precision).unwrap();
        assert!(out["g"].iter().all(|&g| g == f64::INFINITY), "{precision:?}: {:?}", out["g"]);
        assert!(out["s"][0] == 0.0 && out["s"][0].is_sign_positive(), "{precision:?}: {:?}", out["s"]);
    }
}

#[test]
fn per_group_outputs_take_each_groups_value() {
    let p = program(
        quote! {
            fn q(acc: Acc) -> PerGroup<f32> {
                let s = group_max(abs(acc), 32);
                s
            }
        },
        Config { tile_n: 128, tile_m: 128, ..Config::default() },
    );
    // 2 rows × 70 columns: groups of 32, 32 and a ragged 6.
    let acc: Vec<f64> = (0..140).map(|i| if i % 70 == 40 { -9.0 } else { (i % 70) as f64 / 100.0 }).collect();
    let out = interp::evaluate(&p, 2, 70, &Inputs { acc, ..Inputs::default() }, Precision::F64).unwrap();
    assert_eq!(out["s"], [0.31, 9.0, 0.69, 0.31, 9.0, 0.69]);
}
