fn main() {
    coda_codegen::epilogues(["src/programs.rs"]).compile("my_kernels");
}
