//! Checks the frontend's shared-memory estimate (`coda_dsl::smem`) against
//! what nvcc computes: for the generated programs closest to the two-stage
//! boundary (one per shape of epilogue), the size of CUTLASS's epilogue `SharedStorage` and the mainloop
//! stage count the builder derives from it. Only the C++ front end runs (the
//! probe stops at an incomplete type that spells the numbers), ~10 s each.

use coda_dsl::{ir::Program, smem, testgen};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Candidates scanned, and how many of those nearest the boundary are compiled.
const SCANNED: usize = 3000;
const PROBED: usize = 6;

/// The estimate's epilogue bytes (before rounding) of a lowered program.
fn estimate(p: &Program) -> usize {
    let inputs: Vec<_> = p.inputs.iter().map(|i| i.kind).collect();
    let outputs: Vec<_> = p.outputs.iter().map(|o| o.kind).collect();
    let (base, items) = smem::usage(&smem::Subtile::of(&p.config, p.group_size()), &inputs, &outputs);
    base + items.iter().sum::<usize>()
}

/// Bytes left over after the estimate's two mainloop stages (the margin).
fn margin(p: &Program) -> isize {
    smem::CAPACITY as isize - smem::epilogue_bytes(estimate(p)) as isize - 2 * smem::stage_bytes(&p.config) as isize
}

/// (sizeof epilogue SharedStorage, mainloop stages) as nvcc computes them.
fn probe(toolchain: &coda_codegen::Toolchain, headers: &Path, dir: &Path, p: &Program) -> (usize, usize) {
    let cu = coda_codegen::emit(p, "probe", "0.1.0");
    let ns = cu
        .lines()
        .find_map(|l| l.strip_prefix("namespace coda_gen::").and_then(|l| l.strip_suffix(" {")))
        .expect("the generated C++ opens its namespace");
    let src = format!(
        "{cu}\ntemplate <unsigned long Bytes, int Stages> struct Show;\n\
         using ProbeKernel = coda_gen::{ns}::Kernel;\n\
         Show<sizeof(ProbeKernel::CollectiveEpilogue::SharedStorage), ProbeKernel::CollectiveMainloop::DispatchPolicy::Stages> probe;\n"
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
    (nums[0], nums[1])
}


/// Each program's probe, compiled in parallel in `CARGO_TARGET_TMPDIR/<dir>`.
fn probe_all<'a>(dir: &str, programs: impl Iterator<Item = &'a Program>) -> Vec<(&'a Program, (usize, usize))> {
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

/// The estimate bounds CUTLASS's size closely and never promises more stages.
fn assert_bounds(p: &Program, bytes: usize, stages: usize) {
    let est = smem::epilogue_bytes(estimate(p));
    let stage = smem::stage_bytes(&p.config);
    eprintln!(
        "{}: margin {} B; estimate {est} B, CUTLASS {bytes} B; stages: estimate {}, CUTLASS {stages}",
        p.name,
        margin(p),
        smem::stages_left(&p.config, estimate(p))
    );
    assert!(est >= bytes, "{}: estimate {est} B < CUTLASS's {bytes} B", p.name);
    assert!(est - bytes <= 4096, "{}: estimate {est} B is loose against CUTLASS's {bytes} B", p.name);
    assert_eq!((smem::CAPACITY - bytes.next_multiple_of(128)) / stage, stages, "{}: the stage formula", p.name);
    assert!(smem::stages_left(&p.config, estimate(p)) <= stages);
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

    for (p, (bytes, stages)) in probe_all("smem-estimate", near.iter().map(|(_, p)| p)) {
        assert_bounds(p, bytes, stages);
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
    for (p, (bytes, stages)) in probe_all("smem-estimate-group", programs.iter()) {
        assert_bounds(p, bytes, stages);
    }
}
