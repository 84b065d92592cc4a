//! `#[nki_kernel]`: turns a Rust function into an NKI kernel.
//!
//! The function body stays the per-instance program. Parameters declared `&mut Hbm<T>` are the
//! kernel's outputs: inside the body they become `&HbmOut<'_, T>` (writable, shared by all
//! program instances), while `&Hbm<T>` inputs stay read-only, so storing into an input is a
//! compile error. Beside the function the macro defines a type of the same name with the
//! launchers `launch`, `simulate`, `estimate` and `run`, which `launch!(kernel[gx, gy](...))`
//! calls. Nothing else happens here: all checks of tile shapes live in nki-core's types.
//!
//! The macro works in two steps: `model` reads the function into a kernel model (its
//! parameters with their roles: input, output, other) and checks the signature;
//! `expand` generates the per-instance function and `run` from the model. The other three
//! launchers are one-line calls of `nki_core::__private`, where they are written once.
//!
//! `#[nki_kernel(debug)]` prints the expansion to the compiler's standard error while the
//! kernel compiles (as one line of Rust tokens; pipe it through `rustfmt` to read it).

mod expand;
mod model;

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::quote_spanned;
use syn::spanned::Spanned;
use syn::{parse_macro_input, ItemFn};

/// Marks a function as an NKI kernel; `#[nki_kernel(debug)]` also prints the expansion at
/// compile time. See the crate docs.
#[proc_macro_attribute]
pub fn nki_kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    let attr: TokenStream2 = attr.into();
    let debug = match attr.to_string().as_str() {
        "" => false,
        "debug" => true,
        _ => {
            return quote_spanned!(attr.span()=>
                compile_error!("#[nki_kernel] takes no arguments except `debug`");
            )
            .into()
        }
    };
    let func = parse_macro_input!(item as ItemFn);
    let expansion = match model::Kernel::parse(func) {
        Ok(kernel) => {
            let tokens = expand::kernel(&kernel);
            if debug {
                eprintln!(
                    "#[nki_kernel(debug)] expansion of `{}`:\n{tokens}",
                    kernel.name
                );
            }
            tokens
        }
        Err(e) => e.to_compile_error(),
    };
    expansion.into()
}
