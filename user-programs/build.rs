fn main() {
    coda_codegen::epilogues(["src/lib.rs"]).compile("coda_user_kernels");
}
