// Compiles the aux reduction kernels, and links the static CUDA runtime once
// for every crate that launches CODA kernels.
fn main() {
    let tc = coda_codegen::Toolchain::find().unwrap_or_else(|e| {
        // The message says how to install or point at a toolchain; no backtrace.
        eprintln!("\n{e}\n");
        std::process::exit(1)
    });
    println!("cargo:rerun-if-changed=kernels/finishers.cu");
    for var in ["CODA_CUDA_HOME", "CUDA_HOME", "CODA_CUTLASS_HOME", "CODA_TOOLCHAIN_DIR", "XDG_CACHE_HOME", "HOME"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    tc.cc_build().cargo_metadata(true).file("kernels/finishers.cu").compile("coda_aux");
    tc.emit_cudart_link();
}
