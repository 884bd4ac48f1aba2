fn main() {
    let mut files = vec!["src/lib.rs"];
    if std::env::var_os("CARGO_FEATURE_HELDOUT").is_some() {
        files.push("src/heldout.rs");
    }
    coda_codegen::epilogues(files).compile("coda_user_kernels");
}
