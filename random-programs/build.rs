//! Generates `CODA_RANDOM_PROGRAMS` programs (default 2, what CI compiles)
//! from `CODA_RANDOM_SEED` with coda-dsl's seeded generator, writes them into
//! one source file and compiles their kernels. The H200 batch is
//! `CODA_RANDOM_PROGRAMS=100` (its build time: README, "Verified on an H200").
//! `CODA_RANDOM_MAPS=1` keeps only the map programs of the draw (about one in
//! seven), for a batch that checks the map kernels' own epilogue subtiles.

use std::fmt::Write;

fn main() {
    println!("cargo:rerun-if-env-changed=CODA_RANDOM_PROGRAMS");
    println!("cargo:rerun-if-env-changed=CODA_RANDOM_SEED");
    println!("cargo:rerun-if-env-changed=CODA_RANDOM_MAPS");
    let var = |name: &str, default: u64| match std::env::var(name) {
        Ok(v) => v.parse().unwrap_or_else(|_| panic!("{name} must be a number, not `{v}`")),
        Err(_) => default,
    };
    let count = var("CODA_RANDOM_PROGRAMS", 2) as usize;
    let seed = var("CODA_RANDOM_SEED", 0xc0da_0201);
    // Generated programs the build cannot compile yet, each an open bug with
    // its regression test; the batch draws one more per skipped program.
    // (Session 5 skipped random_013 here until the smem estimate was fixed.)
    const SKIP: [(u64, &str); 0] = [];
    let skip: Vec<&str> = SKIP.iter().filter(|(s, _)| *s == seed).map(|(_, name)| *name).collect();
    let maps_only = var("CODA_RANDOM_MAPS", 0) != 0;
    let mut drawn = coda_dsl::testgen::batch_where(count + skip.len(), seed, "random_", |g| g.is_map || !maps_only);
    drawn.truncate(count + drawn.iter().take(count).filter(|g| skip.contains(&g.name.as_str())).count());

    let kind = if maps_only { "map programs" } else { "programs" };
    let mut src = format!("// {count} {kind} generated from seed {seed:#x} by coda-dsl's testgen (build.rs).\n\n");
    let mut batch = vec![];
    for g in drawn {
        if skip.contains(&g.name.as_str()) {
            // Commented out in place: the programs after it keep their lines,
            // which their generated C++ cites (and the kernel cache keys on).
            src += &g.source.lines().map(|l| format!("// skipped: {l}\n")).collect::<String>();
        } else {
            src += &g.source;
            batch.push(g);
        }
        src.push('\n');
    }
    src += "/// Each program: its name, source, kernel and IR.\npub fn all() -> Vec<Generated> {\n    vec![\n";
    for g in &batch {
        let _ = writeln!(
            src,
            "        Generated {{ name: {:?}, source: {:?}, kernel: &{}::KERNEL, program: {}::program() }},",
            g.name, g.source, g.name, g.name
        );
    }
    src += "    ]\n}\n";
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("random_programs.rs");
    // Rewritten only when it changes: the build reruns when the file is newer.
    if std::fs::read_to_string(&out).ok().as_deref() != Some(src.as_str()) {
        std::fs::write(&out, src).expect("OUT_DIR is writable");
    }
    // Each program in its drawn config alone: the batch checks the codegen
    // across configs, not the tuner's default pair (which would double it).
    coda_codegen::epilogues([&out]).configs(coda_codegen::ConfigSet::Own).compile("coda_random_kernels");
}
