//! `#[coda::epilogue]`: checks an epilogue program with `coda-dsl` (errors at
//! the user's span) and replaces the `fn` with a module holding the program's
//! typed launch API. The kernel itself is generated and compiled by
//! `coda-codegen` from the crate's `build.rs`.

use proc_macro::TokenStream;

mod expand;

#[proc_macro_attribute]
pub fn epilogue(attr: TokenStream, item: TokenStream) -> TokenStream {
    let item = syn::parse_macro_input!(item as syn::ItemFn);
    let expanded = coda_dsl::parse_config(attr.into())
        .and_then(|config| coda_dsl::lower_fn(&item, config))
        .map(|program| expand::module(&program, &item.vis, item.sig.ident.span()));
    match expanded {
        Ok(tokens) => tokens.into(),
        Err(e) => e.to_compile_error().into(),
    }
}
