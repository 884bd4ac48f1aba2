// Compiles the Llama block's epilogue programs, written in CODA's DSL.
fn main() {
    // Beside each GEMM program's own config, the configs the timed searches
    // on an H200 picked for it at some shape (`tuning/nvidia-h200.json`,
    // session 3's search over 24 configs, narrowed to these three): a
    // program the own config always won for gets no other.
    let three = "coop_128x256_c1x1,pp_128x128_c1x2,pp_128x192_c2x1";
    let two = "coop_128x256_c1x1,pp_128x128_c1x2";
    let mut build = coda_codegen::epilogues(["src/programs.rs"]);
    for (program, set) in [
        ("linear_residual_rms_partial", three),
        ("linear_rowscale_rope", three),
        ("linear_cross_entropy", three),
        ("linear_cross_entropy_save", three),
        ("matmul", three),
        ("linear_cross_entropy_backward", two),
        ("rmsnorm_backward", two),
        ("rmsnorm_backward_head", two),
        ("linear_dswiglu", two),
    ] {
        build.program_configs(program, coda_codegen::ConfigSet::parse(set).expect("config names"));
    }
    build.compile("coda_llama_kernels");
    println!("cargo:rerun-if-changed=tuning/nvidia-h200.json");
}
