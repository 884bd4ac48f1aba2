//! The tuner's cost models against timings they must rank: per program and
//! shape, both default configs, each in the heuristic's scheduler options.
//! On the H200, two sets: session 8's searches of the Llama programs (57
//! shapes; `linear_dswiglu`'s from session 25, its pairs staged by TMA),
//! which its constants were fitted to, so this guards them; and session
//! 10's searches of the untuned suite at six shapes (84; `swiglu_backward`'s
//! from session 25), programs and shapes the fit never saw. On the H100,
//! session 40's searches of the shipped Llama shapes (43) and session 41's
//! of three suite programs at long K (9), both fitted to, and of four other
//! suite programs (16), held out. Choosing by the
//! model must beat always running either config, and stay near each
//! shape's faster one.

use coda_runtime::Problem;
use coda_runtime::dsl::ir::Config;
use coda_runtime::dsl::work::Work;
use coda_runtime::tune::{CostModel, cost_model, predicted_us};

struct Row {
    what: String,
    work: Work,
    prob: Problem,
    coop_ms: f64,
    pp_ms: f64,
}

fn rows(text: &str) -> Vec<Row> {
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    let header = lines.next().unwrap();
    assert!(header.ends_with("coop_128x256_c1x1\tpp_128x128_c1x2"), "{header}");
    lines
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let x = |i: usize| f[i].parse::<f64>().unwrap_or_else(|e| panic!("{l}: field {i}: {e}"));
            let work = Work { tile_load_bytes: x(1) as f32, store_bytes: x(2) as f32, sfu: x(3) as f32, alu: x(4) as f32 };
            let prob = Problem { m: x(5) as usize, n: x(6) as usize, k: x(7) as usize };
            Row { what: format!("{} {}×{}×{}", f[0], f[5], f[6], f[7]), work, prob, coop_ms: x(8), pp_ms: x(9) }
        })
        .collect()
}

/// (model, cooperative alone, ping-pong alone) as geomeans of the time over
/// each shape's faster config, and the model's worst shape.
fn rank(cm: &CostModel, rows: &[Row]) -> (f64, f64, f64, (f64, String)) {
    let (coop, pp) = (Config::from_name("coop_128x256_c1x1").unwrap(), Config::from_name("pp_128x128_c1x2").unwrap());
    let geomean = |r: &dyn Fn(&Row) -> f64| (rows.iter().map(|x| r(x).ln()).sum::<f64>() / rows.len() as f64).exp();
    let chosen = |r: &Row| {
        let takes_pp = predicted_us(cm, &r.work, &pp, 132, r.prob) < predicted_us(cm, &r.work, &coop, 132, r.prob);
        (if takes_pp { r.pp_ms } else { r.coop_ms }) / r.coop_ms.min(r.pp_ms)
    };
    let worst = rows.iter().map(|r| (chosen(r), r.what.clone())).max_by(|a, b| a.0.total_cmp(&b.0)).unwrap();
    (geomean(&chosen), geomean(&|r| r.coop_ms / r.coop_ms.min(r.pp_ms)), geomean(&|r| r.pp_ms / r.coop_ms.min(r.pp_ms)), worst)
}

#[test]
fn the_model_ranks_the_searches_it_was_fitted_to() {
    let rows = rows(include_str!("data/h200-default-pair-searches.tsv"));
    assert_eq!(rows.len(), 57);
    let (g, coop, pp, worst) = rank(cost_model("NVIDIA H200"), &rows);
    eprintln!("fitted: model {g:.4} (worst {:.3}, {}), cooperative alone {coop:.4}, ping-pong alone {pp:.4}", worst.0, worst.1);
    assert!(g <= 1.02 && g < coop.min(pp), "model {g:.4}, cooperative {coop:.4}, ping-pong {pp:.4}");
    assert!(worst.0 <= 1.25, "worst choice {:.3}× ({})", worst.0, worst.1);
}

#[test]
fn the_model_ranks_programs_it_never_saw() {
    let rows = rows(include_str!("data/h200-untuned-suite-searches.tsv"));
    assert_eq!(rows.len(), 84);
    let (g, coop, pp, worst) = rank(cost_model("NVIDIA H200"), &rows);
    eprintln!("held out: model {g:.4} (worst {:.3}, {}), cooperative alone {coop:.4}, ping-pong alone {pp:.4}", worst.0, worst.1);
    assert!(g <= 1.01 && g < coop.min(pp), "model {g:.4}, cooperative {coop:.4}, ping-pong {pp:.4}");
    assert!(worst.0 <= 1.15, "worst choice {:.3}× ({})", worst.0, worst.1);
}

/// The H100's model on its searches; the H200's, which the H100 had before
/// its own, chose ping-pong at every long-K suite shape (1.17–1.87× slower).
#[test]
fn the_h100_model_ranks_the_h100_searches() {
    let llama = rows(include_str!("data/h100-default-pair-searches.tsv"));
    let suite = rows(include_str!("data/h100-untuned-suite-searches.tsv"));
    assert_eq!((llama.len(), suite.len()), (43, 9));
    let h100 = cost_model("NVIDIA H100 80GB HBM3");
    assert_eq!(h100.gpu, "NVIDIA H100 80GB HBM3");
    for (what, rows, bound, worst_bound) in [("Llama", &llama, 1.005, 1.05), ("suite at long K", &suite, 1.001, 1.001)] {
        let (g, coop, pp, worst) = rank(h100, rows);
        eprintln!("H100 {what}: model {g:.4} (worst {:.3}, {}), cooperative alone {coop:.4}, ping-pong alone {pp:.4}", worst.0, worst.1);
        assert!(g <= bound && g <= coop.min(pp), "{what}: model {g:.4}, cooperative {coop:.4}, ping-pong {pp:.4}");
        assert!(worst.0 <= worst_bound, "{what}: worst choice {:.3}× ({})", worst.0, worst.1);
    }
    let (h200_on_suite, ..) = rank(cost_model("NVIDIA H200"), &suite);
    assert!(h200_on_suite > 1.3, "the H200's model on the H100's suite searches: {h200_on_suite:.4}");
}

/// Four suite programs the H100's constants never saw (session 41, call C),
/// at long K and in square launches of 0.2 and 1.6 ms (where ping-pong
/// wins): better than the H200's constants and either config alone.
#[test]
fn the_h100_model_ranks_programs_it_never_saw() {
    let rows = rows(include_str!("data/h100-held-out-searches.tsv"));
    assert_eq!(rows.len(), 16);
    let (g, coop, pp, worst) = rank(cost_model("NVIDIA H100 80GB HBM3"), &rows);
    let (h200, ..) = rank(cost_model("NVIDIA H200"), &rows);
    eprintln!("H100 held out: model {g:.4} (worst {:.3}, {}), cooperative alone {coop:.4}, ping-pong alone {pp:.4}, H200's model {h200:.4}", worst.0, worst.1);
    assert!(g <= 1.005 && g < coop.min(pp) && g < h200, "model {g:.4}, cooperative {coop:.4}, ping-pong {pp:.4}, H200's {h200:.4}");
    assert!(worst.0 <= 1.02, "worst choice {:.3}× ({})", worst.0, worst.1);
}
