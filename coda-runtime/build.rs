// Compiles the aux reduction kernels and the Llama block's epilogue programs,
// and links the static CUDA runtime once for every crate that launches CODA kernels.
fn main() {
    let manifest = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let tc = coda_codegen::Toolchain::find(&manifest).unwrap_or_else(|e| panic!("\n{e}\n"));
    println!("cargo:rerun-if-changed=kernels/aux.cu");
    for var in ["CODA_CUDA_HOME", "CUDA_HOME", "CODA_CUTLASS_HOME"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    tc.cc_build().cargo_metadata(true).file("kernels/aux.cu").compile("coda_aux");
    // The Llama block's fused ops, written in our own DSL.
    coda_codegen::epilogues(["src/llama/programs.rs"]).compile("coda_llama_kernels");
    tc.emit_cudart_link();
}
