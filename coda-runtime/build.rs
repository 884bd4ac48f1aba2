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
    // Beside each GEMM program's own config, the other configs the timed
    // search picked for it on an H200 (`tuning/nvidia-h200.json`).
    let winners = coda_codegen::ConfigSet::parse("coop_128x256_c1x1,pp_128x128_c1x2,pp_128x192_c2x1").expect("config names");
    coda_codegen::epilogues(["src/llama/programs.rs"])
        .configs(winners)
        .config_programs([
            "linear_residual_rms_partial",
            "linear_rowscale_swiglu",
            "linear_rowscale_swiglu_save",
            "linear_rowscale_rope",
            "linear_cross_entropy",
            "linear_cross_entropy_save",
            "linear_cross_entropy_backward",
            "rmsnorm_backward",
            "rmsnorm_backward_head",
            "linear_dswiglu",
            "matmul",
        ])
        .compile("coda_llama_kernels");
    println!("cargo:rerun-if-changed=tuning/nvidia-h200.json");
    tc.emit_cudart_link();
}
