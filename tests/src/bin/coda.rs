//! `coda bench [--quick] [--json PATH] [--svg PATH]`: times every fused op and
//! the block against their bare GEMMs (cuBLASLt and our plain CUTLASS GEMM) on
//! the GPU, prints a table, and writes the rows as JSON and the ratios as an
//! SVG chart. Progress goes to stderr.

use coda_runtime::Stream;
use coda_tests::suite;

fn usage() -> ! {
    eprintln!("usage: coda bench [--quick] [--json PATH] [--svg PATH]");
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) != Some("bench") {
        usage();
    }
    let value = |flag: &str| args.iter().position(|a| a == flag).map(|i| args.get(i + 1).cloned().unwrap_or_else(|| usage()));
    let plan = if args.iter().any(|a| a == "--quick") { suite::Plan::quick() } else { suite::Plan::full() };
    let stream = match Stream::new(0) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("coda bench: needs an H100/H200: {e}");
            std::process::exit(1);
        }
    };
    let gpu = stream.cuda().context().name().unwrap_or_else(|_| "unknown GPU".into());
    let total = plan.rows();
    let started = std::time::Instant::now();
    let mut progress = |done: usize, r: &suite::Row| {
        eprintln!("[{done}/{total}, {:.0} s] {} {}: {:.3}× cuBLASLt", started.elapsed().as_secs_f64(), r.name, r.shape, r.vs_cublas());
    };
    let rows = suite::run(&stream, &plan, &mut progress).unwrap_or_else(|e| {
        eprintln!("coda bench: {e}");
        std::process::exit(1);
    });
    print!("{}", suite::table(&rows));
    if let Some(path) = value("--json") {
        let json = serde_json::json!({ "gpu": gpu, "samples": plan.samples, "rows": rows });
        std::fs::write(&path, serde_json::to_string_pretty(&json).expect("rows serialize")).unwrap_or_else(|e| panic!("{path}: {e}"));
    }
    if let Some(path) = value("--svg") {
        let svg = suite::chart(&rows, &format!("CODA fused ops / bare cuBLASLt GEMMs, {gpu}")).unwrap_or_else(|e| panic!("chart: {e}"));
        std::fs::write(&path, svg).unwrap_or_else(|e| panic!("{path}: {e}"));
    }
}
