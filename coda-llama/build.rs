// Compiles the Llama block's epilogue programs, written in CODA's DSL.
fn main() {
    // Beside each GEMM program's own config, the other configs the timed
    // search picked for it on an H200 (`tuning/nvidia-h200.json`).
    let winners = coda_codegen::ConfigSet::parse("coop_128x256_c1x1,pp_128x128_c1x2,pp_128x192_c2x1").expect("config names");
    coda_codegen::epilogues(["src/programs.rs"])
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
}
