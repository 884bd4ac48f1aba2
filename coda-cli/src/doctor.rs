//! `coda doctor`: what CODA needs on this machine, found or not, with the fix.

use coda_runtime::Stream;

/// One check: what was looked for, what was found, and the fix if it failed.
fn report(what: &str, found: Result<String, String>) -> Result<bool, String> {
    match found {
        Ok(s) => crate::out(&format!("ok    {what}: {s}\n")).map(|()| true),
        // The libraries' messages start with where they come from.
        Err(fix) => crate::out(&format!("FAIL  {what}: {}\n", fix.strip_prefix("coda: ").unwrap_or(&fix))).map(|()| false),
    }
}

pub fn run() -> Result<(), String> {
    let mut ok = true;
    // SAFETY: only probes whether the library can be loaded.
    let driver = unsafe { cudarc::driver::sys::is_culib_present() };
    ok &= report(
        "CUDA driver (libcuda.so)",
        if driver { Ok("loadable".into()) } else { Err("not found: install the NVIDIA driver (R580 or newer for CUDA 13)".into()) },
    )?;
    if !driver {
        report("GPU 0", Err("not checked (no driver)".into()))?;
    } else {
        let gpu = Stream::new(0);
        ok &= report(
            "GPU 0",
            gpu.as_ref().map(|s| format!("{}, {} SMs, sm_90", s.device_name(), s.sm_count())).map_err(|e| {
                format!("{e}; CODA's kernels need an H100 or H200 (sm_90a)")
            }),
        )?;
        // Not a failure: every config runs; which is fastest was measured elsewhere.
        if let Some(note) = gpu.ok().and_then(|s| configs_note(s.device_name(), &shipped_gpus())) {
            crate::out(&format!("note  configs: {note}\n"))?;
        }
    }
    ok &= report(
        "CUDA toolchain (nvcc 13, CUTLASS 4.2; needed to build kernels, not to run them)",
        coda_codegen::Toolchain::find().and_then(|tc| {
            let v = tc.version()?;
            Ok(format!("{v} at {}", tc.cuda_home.display()))
        }),
    )?;
    // SAFETY: as above.
    let (blas, lt) = unsafe { (cudarc::cublas::sys::is_culib_present(), cudarc::cublaslt::sys::is_culib_present()) };
    let fix = "not on the library path: install the CUDA 13 cuBLAS libraries (e.g. `pip install nvidia-cublas`) and add their lib/ to LD_LIBRARY_PATH";
    ok &= report("cuBLAS (coda-llama's weight gradients)", if blas { Ok("loadable".into()) } else { Err(fix.into()) })?;
    ok &= report("cuBLASLt (the benchmarks' baseline)", if lt { Ok("loadable".into()) } else { Err(fix.into()) })?;
    let cache = coda_runtime::tune::cache_path();
    ok &= report(
        "tuning cache",
        cache.map(|p| p.display().to_string()).ok_or_else(|| "no location: set CODA_TUNE_CACHE or HOME".to_string()),
    )?;
    if ok { Ok(()) } else { Err("some checks failed (see above)".into()) }
}

/// The GPUs coda-llama ships searches for.
fn shipped_gpus() -> Vec<String> {
    let mut gpus: Vec<String> = coda_llama::SHIPPED_TUNING
        .iter()
        .flat_map(|text| serde_json::from_str::<Vec<coda_runtime::tune::Entry>>(text).unwrap_or_default())
        .map(|e| e.gpu)
        .collect();
    gpus.sort();
    gpus.dedup();
    gpus
}

/// What `gpu` gets that was measured elsewhere: the heuristic's constants
/// and coda-llama's shipped searches; `None` where both were measured on it.
fn configs_note(gpu: &str, shipped: &[String]) -> Option<String> {
    let fitted = coda_runtime::tune::cost_model(gpu).gpu;
    let searched = shipped.iter().any(|g| g == gpu);
    if gpu == fitted && searched {
        return None;
    }
    let mut elsewhere = vec![];
    if gpu != fitted {
        elsewhere.push(format!("the heuristic was fitted on an {fitted}"));
    }
    if !searched {
        elsewhere.push(format!("coda-llama ships searches for {} only", shipped.join(", ")));
    }
    Some(format!(
        "{} (this is an {gpu}): run `coda tune --shape M,N,K` at your shapes or set CODA_TUNE=search (a fit from another \
         GPU can choose far from a search's best: on an H100 the H200's ran long launches up to 1.87× slower; bench/NOTES.md, session 41)",
        elsewhere.join(", and ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The note says which of the two was measured elsewhere, and nothing
    /// where both were measured on this GPU.
    #[test]
    fn configs_note_names_what_was_measured_elsewhere() {
        // Every GPU with a cost model of its own gets no note where coda-llama ships its searches.
        for cm in &coda_runtime::tune::COST_MODELS {
            assert!(shipped_gpus().iter().any(|g| g == cm.gpu), "{}", cm.gpu);
            assert_eq!(configs_note(cm.gpu, &shipped_gpus()), None);
        }
        let (h200, h100, gh200) = ("NVIDIA H200", "NVIDIA H100 80GB HBM3", "NVIDIA GH200 480GB");
        let both = configs_note(gh200, &[h200.to_string()]).unwrap();
        assert!(both.starts_with(&format!("the heuristic was fitted on an {h200}, and coda-llama ships searches for {h200} only")), "{both}");
        let one = configs_note(gh200, &[h200.to_string(), gh200.to_string()]).unwrap();
        assert!(one.starts_with(&format!("the heuristic was fitted on an {h200} (this is an {gh200})")), "{one}");
        let other = configs_note(h100, &[h200.to_string()]).unwrap();
        assert!(other.starts_with(&format!("coda-llama ships searches for {h200} only (this is an {h100})")), "{other}");
    }
}
