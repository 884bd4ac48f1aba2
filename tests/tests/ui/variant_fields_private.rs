// Safe code cannot build a Variant: a config with a larger tile than its
// launcher was compiled for would size partials too small.
fn retile(v: coda_runtime::Variant, config: coda_runtime::dsl::ir::Config) -> coda_runtime::Variant {
    coda_runtime::Variant { config, ..v }
}

fn main() {}
