//! Checks the frontend's shared-memory estimate (`coda_dsl::smem`) against
//! what nvcc computes: for the generated programs closest to the two-stage
//! boundary (one per shape of epilogue), the size of CUTLASS's epilogue `SharedStorage`, the mainloop
//! stage count the builder derives from it and the load stages `coda::sm90::Gemm` picks. Only the
//! C++ front end runs (the probe stops at an incomplete type that spells the numbers), ~10 s each.

use coda_dsl::{ir::Program, smem, testgen};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Candidates scanned, and how many of those nearest the boundary are compiled.
const SCANNED: usize = 3000;
const PROBED: usize = 6;

/// The estimate's epilogue bytes (before rounding) of a lowered program
/// whose C and tile inputs have `load_stages` buffers (None: the fewest).
fn estimate(p: &Program, load_stages: Option<usize>) -> usize {
    let inputs: Vec<_> = p.inputs.iter().map(|i| i.kind).collect();
    let outputs: Vec<_> = p.outputs.iter().map(|o| o.kind).collect();
    let fewest = smem::subtile(&p.config, p.group_size(), &inputs, &outputs).fewest_load_stages(&inputs, &outputs);
    let t = smem::Subtile { load_stages: load_stages.unwrap_or(fewest.load_stages), ..fewest };
    let (base, items) = smem::usage(&t, &inputs, &outputs);
    base + items.iter().sum::<usize>()
}

/// Bytes left over after the estimate's two mainloop stages (the margin).
fn margin(p: &Program) -> isize {
    smem::CAPACITY as isize - smem::epilogue_bytes(estimate(p, None)) as isize - 2 * smem::stage_bytes(&p.config) as isize
}

/// What nvcc computes for a program.
struct Probed {
    /// sizeof the epilogue's `SharedStorage`.
    bytes: usize,
    mainloop_stages: usize,
    load_stages: usize,
}

fn probe(toolchain: &coda_codegen::Toolchain, headers: &Path, dir: &Path, p: &Program) -> Probed {
    let cu = coda_codegen::emit(p, "probe", "0.1.0");
    let ns = cu
        .lines()
        .find_map(|l| l.strip_prefix("namespace coda_gen::").and_then(|l| l.strip_suffix(" {")))
        .expect("the generated C++ opens its namespace");
    let src = format!(
        "{cu}\ntemplate <unsigned long Bytes, int Stages, int LoadStages> struct Show;\n\
         using ProbeKernel = coda_gen::{ns}::Kernel;\n\
         Show<sizeof(ProbeKernel::CollectiveEpilogue::SharedStorage), ProbeKernel::CollectiveMainloop::DispatchPolicy::Stages,\n\
              ProbeKernel::kLoadStages> probe;\n"
    );
    let path = dir.join(format!("{}.cu", p.name));
    std::fs::write(&path, src).unwrap();
    let out = Command::new(toolchain.cuda_home.join("bin/nvcc"))
        .args(coda_codegen::toolchain::NVCC_FLAGS)
        .arg(format!("-I{}", headers.display()))
        .arg(format!("-I{}", toolchain.cutlass_home.join("include").display()))
        .arg(format!("-I{}", toolchain.cutlass_home.join("tools/util/include").display()))
        .args(["-c", "-o", "/dev/null"])
        .arg(&path)
        .output()
        .expect("nvcc runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let shown = stderr
        .split("\"Show<")
        .nth(1)
        .and_then(|s| s.split_once(">\""))
        .unwrap_or_else(|| panic!("{}: no Show<…> in nvcc's output:\n{stderr}", p.name))
        .0;
    let nums: Vec<usize> = shown.split(',').map(|n| n.trim().trim_end_matches("UL").parse().unwrap()).collect();
    Probed { bytes: nums[0], mainloop_stages: nums[1], load_stages: nums[2] }
}


/// Each program's probe, compiled in parallel in `CARGO_TARGET_TMPDIR/<dir>`.
fn probe_all<'a>(dir: &str, programs: impl Iterator<Item = &'a Program>) -> Vec<(&'a Program, Probed)> {
    let toolchain = coda_codegen::Toolchain::find().unwrap_or_else(|e| panic!("{e}"));
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(dir);
    std::fs::create_dir_all(&dir).unwrap();
    let headers = coda_codegen::templates::write(&dir).unwrap();
    std::thread::scope(|s| {
        let handles: Vec<_> = programs
            .map(|p| {
                let (toolchain, headers, dir) = (&toolchain, &headers, &dir);
                s.spawn(move || (p, probe(toolchain, headers, dir, p)))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// At the load stages Gemm picked, the estimate bounds CUTLASS's size
/// closely and never promises more stages; and the pick leaves a GEMM's
/// mainloop at least the stages the fewest load stages would (by the
/// estimate), a map's the two it needs.
fn assert_bounds(p: &Program, probed: &Probed) {
    let Probed { bytes, mainloop_stages: stages, load_stages } = *probed;
    let est = smem::epilogue_bytes(estimate(p, Some(load_stages)));
    let stage = smem::stage_bytes(&p.config);
    eprintln!(
        "{}: margin {} B; {load_stages} load stages: estimate {est} B, CUTLASS {bytes} B; stages: estimate {}, CUTLASS {stages}",
        p.name,
        margin(p),
        smem::stages_left(&p.config, estimate(p, Some(load_stages)))
    );
    assert!(est >= bytes, "{}: estimate {est} B < CUTLASS's {bytes} B", p.name);
    assert!(est - bytes <= 4096, "{}: estimate {est} B is loose against CUTLASS's {bytes} B", p.name);
    assert_eq!((smem::CAPACITY - bytes.next_multiple_of(128)) / stage, stages, "{}: the stage formula", p.name);
    assert!(smem::stages_left(&p.config, estimate(p, Some(load_stages))) <= stages);
    if p.is_map() {
        assert!(stages >= 2, "{}: a map's mainloop needs 2 stages", p.name);
    } else {
        assert!(smem::stages_left(&p.config, estimate(p, None)) <= stages, "{}: the load stages cost a mainloop stage", p.name);
    }
}

#[test]
fn estimate_bounds_cutlass_shared_storage_at_the_boundary() {
    let mut near: Vec<(isize, Program)> = testgen::batch(SCANNED, 0xc0da_5e3e, "probe_")
        .iter()
        .flat_map(|g| coda_dsl::lower_file(&syn::parse_file(&g.source).unwrap()).expect("generated programs lower"))
        .map(|p| (margin(&p), p))
        .collect();
    near.sort_by_key(|(m, p)| (*m, p.name.clone()));
    // One program per shape of epilogue (tile, schedule, kinds of input and output).
    let mut seen = std::collections::HashSet::new();
    near.retain(|(_, p)| {
        let mut kinds: Vec<String> = p.inputs.iter().map(|i| format!("{:?}", i.kind)).collect();
        kinds.extend(p.outputs.iter().map(|o| format!("{:?}", o.kind)));
        kinds.sort();
        seen.insert((p.config.tile_m, p.config.tile_n, p.config.schedule, kinds))
    });
    // The nearest with a `PerCol` input (staged through shared memory) among them.
    let has_col = |p: &Program| p.inputs.iter().any(|i| matches!(i.kind, coda_dsl::ir::InputKind::PerCol(_)));
    if let Some(i) = near.iter().position(|(_, p)| has_col(p)).filter(|&i| i >= PROBED) {
        let with_col = near.remove(i);
        near.insert(PROBED - 1, with_col);
    }
    near.truncate(PROBED);
    assert!(near.iter().any(|(_, p)| has_col(p)));

    for (p, probed) in probe_all("smem-estimate", near.iter().map(|(_, p)| p)) {
        assert_bounds(p, &probed);
    }
}

/// Programs with group reductions have a subtile one group wide, so fewer
/// subtiles per tile and other stage counts: the estimate follows them.
#[test]
fn estimate_bounds_cutlass_shared_storage_of_group_subtiles() {
    let src = r#"
        #[epilogue(tile = (128, 128), cluster = (1, 2), schedule = pingpong)]
        fn g_pp_128(acc: Acc, res: Tile<bf16>, gate: Tile<bf16>, w: PerCol<bf16>) -> (Tile<bf16>, Tile<bf16>, HalfTile<bf16>) {
            let h = acc + res;
            let y = h * rsqrt(group_mean(h * h, 128) + 0.001) * w;
            let s = y * gate;
            let (e, o) = unpair(s);
            let q = e * o;
            (y, s, q)
        }
        #[epilogue]
        fn g_coop_128(acc: Acc, res: Tile<bf16>) -> Tile<bf16> {
            let h = acc + res;
            let y = h - group_max(h, 128);
            y
        }
        #[epilogue(tile = (256, 128), cluster = (1, 2))]
        fn g_coop_64(acc: Acc, other: Tile<bf16>) -> (Tile<bf16>, DoubleTile<bf16>) {
            let y = acc / group_sum(abs(acc) + other, 64);
            let d = pair(y, acc);
            (y, d)
        }
        #[epilogue(tile = (128, 192), schedule = pingpong)]
        fn g_pp_32(acc: Acc) -> Tile<f32> {
            let y = group_mean(acc, 32);
            y
        }
    "#;
    let programs = coda_dsl::lower_file(&syn::parse_file(src).unwrap()).unwrap();
    for (p, probed) in probe_all("smem-estimate-group", programs.iter()) {
        assert_bounds(p, &probed);
    }
}

/// In ping-pong with an 8-bit D, CUTLASS's builder makes its own subtile
/// 64 columns wide (`N_perf`), and the estimate follows it.
#[test]
fn estimate_bounds_cutlass_shared_storage_of_8bit_pingpong() {
    let src = r#"
        #[epilogue(tile = (128, 128), cluster = (1, 2), schedule = pingpong)]
        fn q_pp(acc: Acc, s: PerRow<f32>) -> Tile<e4m3> {
            let y = acc * s;
            y
        }
        #[epilogue(tile = (128, 128), cluster = (1, 2), schedule = pingpong)]
        fn q_pp_more(acc: Acc, r: Tile<bf16>, s: PerRow<f32>) -> (Tile<e4m3>, Tile<bf16>) {
            let h = acc + r;
            let y = h * s;
            (y, h)
        }
    "#;
    let programs = coda_dsl::lower_file(&syn::parse_file(src).unwrap()).unwrap();
    for (p, probed) in probe_all("smem-estimate-8bit", programs.iter()) {
        assert_bounds(p, &probed);
    }
}

/// A tile input beside C takes the mainloop's shared memory: Gemm gives a
/// GEMM's fewer load stages where that buys a mainloop stage, and keeps the
/// builder's 4 where it buys none; a map keeps the most that leave its
/// mainloop 2.
#[test]
fn load_stages_give_the_mainloop_its_stages() {
    let src = r#"
        #[epilogue(tile = (128, 128), cluster = (1, 2), schedule = pingpong)]
        fn norm_grad_like(acc: Acc, h: Tile<bf16>, r: PerRow<f32>, gamma: PerCol<bf16>, dres: Tile<bf16>)
            -> (Tile<bf16>, ColPartial<f32>, Tile<bf16>) {
            let xhat = h * r;
            let dx = dres + r * acc * gamma;
            let dgamma = col_sum(acc * xhat);
            let xg = xhat * gamma;
            (dx, dgamma, xg)
        }
        #[epilogue]
        fn f32_input(acc: Acc, g: Tile<f32>) -> Tile<bf16> {
            let y = acc * g;
            y
        }
        #[epilogue(tile = (128, 256))]
        fn f32_map(x0: Tile<f32>, x1: PerCol<f32>, x2: PerCol<f32>) -> (RowPartial, HalfTile<f32>, HalfTile<f32>) {
            let (even, odd) = unpair(x0 * x1 + x2);
            let total = row_sum(x0);
            (total, even, odd)
        }
        #[epilogue(tile = (128, 128), cluster = (1, 2), schedule = pingpong)]
        fn norm_grad_map(g: Tile<bf16>, h: Tile<bf16>, r: PerRow<f32>, gamma: PerCol<bf16>, dres: Tile<bf16>)
            -> (Tile<bf16>, ColPartial<f32>, Tile<bf16>) {
            let xhat = h * r;
            let dx = dres + r * g * gamma;
            let dgamma = col_sum(g * xhat);
            let xg = xhat * gamma;
            (dx, dgamma, xg)
        }
        #[epilogue]
        fn only_c(acc: Acc, c: Tile<bf16>) -> Tile<bf16> {
            let y = acc + c;
            y
        }
    "#;
    let programs = coda_dsl::lower_file(&syn::parse_file(src).unwrap()).unwrap();
    let got: Vec<(String, usize, usize)> = probe_all("smem-load-stages", programs.iter())
        .into_iter()
        .map(|(p, probed)| {
            assert_bounds(p, &probed);
            (p.name.clone(), probed.load_stages, probed.mainloop_stages)
        })
        .collect();
    let want = [
        // 4 load stages would leave 5 mainloop stages (session 22's rmsnorm_backward); C shares D's buffers, so 3 is the fewest.
        ("norm_grad_like", 3, 6),
        // Cooperative 128 × 256: 2 f32 subtiles instead of 4 leave the mainloop 3 stages still.
        ("f32_input", 4, 3),
        // 4 f32 subtiles would leave 1 mainloop stage and no kernel; 3 leave 2, as 2 would
        // (32 columns: 64-column map subtiles would leave fewer than 2).
        ("f32_map", 3, 2),
        // The same epilogue as a map, 64 columns wide: the builder's 4 (3 mainloop stages of one k-block).
        ("norm_grad_map", 4, 3),
        // C in D's buffers costs little: the builder's 4.
        ("only_c", 4, 4),
    ];
    assert_eq!(got, want.map(|(n, l, s)| (n.to_string(), l, s)));
}

/// A `DoubleTile` input is staged by TMA (a tile of 32-bit words) where the
/// estimate leaves the mainloop two stages beside it, else loaded by each
/// thread; either way the estimate bounds what nvcc computes.
#[test]
fn pair_inputs_are_staged_where_the_estimate_fits_them() {
    let src = r#"
        #[epilogue]
        fn pairs_coop(acc: Acc, z: DoubleTile<bf16>) -> DoubleTile<bf16> {
            let (g, u) = unpair(z);
            let d = pair(acc * u, acc * g);
            d
        }
        #[epilogue(tile = (128, 128), cluster = (1, 2), schedule = pingpong)]
        fn pairs_pp_group(acc: Acc, z: DoubleTile<bf16>) -> Tile<bf16> {
            let (g, u) = unpair(z);
            let h = acc * g + u;
            let y = h * rsqrt(group_mean(h * h, 128) + 0.001);
            y
        }
        #[epilogue]
        fn pairs_coop_group(acc: Acc, z: DoubleTile<bf16>) -> Tile<bf16> {
            let (g, u) = unpair(z);
            let h = acc * g + u;
            let y = h * rsqrt(group_mean(h * h, 128) + 0.001);
            y
        }
    "#;
    let programs = coda_dsl::lower_file(&syn::parse_file(src).unwrap()).unwrap();
    let staged: Vec<(String, bool)> = programs
        .iter()
        .map(|p| (p.name.clone(), coda_codegen::emit(p, "probe", "0.1.0").contains("TileLoad<Desc, float>;  // z: DoubleTile")))
        .collect();
    let want = [("pairs_coop", true), ("pairs_pp_group", true), ("pairs_coop_group", false)];
    assert_eq!(staged, want.map(|(n, s)| (n.to_string(), s)));
    for (p, probed) in probe_all("smem-estimate-pairs", programs.iter()) {
        assert_bounds(p, &probed);
    }
}
