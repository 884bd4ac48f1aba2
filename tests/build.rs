fn main() {
    coda_codegen::epilogues(["src/programs.rs"]).compile("coda_tests_kernels");
}
