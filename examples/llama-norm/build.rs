fn main() {
    coda_codegen::epilogues(["src/programs.rs"]).compile("llama_norm_kernels");
}
