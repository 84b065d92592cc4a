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
//! `#[nki_kernel(nki = "0.7")]` marks a kernel written in NKI 0.7, whose launch grid is only
//! the logical NeuronCore's degree (`k[1]`, `k[2]`), `nki = "0.8"` one written in NKI 0.8
//! (launched the same way); the default, Beta 1, keeps the SPMD grid.
//! The generated type carries the dialect as `k::DIALECT`, and `k::run` hands it to the launch.
//! `#[nki_kernel(compile_config = expr)]` gives the kernel NKI 0.8's `CompileConfig`
//! (`expr` is an `nki_core::CompileConfig`), which `k::run` hands to the launch as the
//! kernel's own (`Launch::kernel_compile_config`; a launch's `compile_config` overrides it).

mod bindings;
mod expand;
mod model;

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{parse_macro_input, ItemFn, Meta, Token};

/// Marks a function as an NKI kernel. Arguments, comma-separated, each optional:
/// `debug` prints the expansion at compile time; `nki = "0.7"` marks an NKI 0.7 kernel,
/// launched on a logical NeuronCore (`launch!(k[2](..))` is LNC=2, `nl::program_id(0)` the core
/// index), `nki = "0.8"` an NKI 0.8 kernel (launched as 0.7), where the default
/// (`nki = "beta1"`) keeps Beta 1's SPMD grid; `compile_config = expr` sets the kernel's
/// `nki_core::CompileConfig`. See the crate docs and `nki_core::Dialect`.
#[proc_macro_attribute]
pub fn nki_kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    let args = match Args::parse(attr.into()) {
        Ok(a) => a,
        Err(e) => return e.to_compile_error().into(),
    };
    let mut func = parse_macro_input!(item as ItemFn);
    bindings::name_bindings(&mut func.block);
    let expansion = match model::Kernel::parse(func, args.dialect) {
        Ok(mut kernel) => {
            kernel.compile_config = args.compile_config;
            let tokens = expand::kernel(&kernel);
            if args.debug {
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

/// The arguments of `#[nki_kernel(..)]`.
struct Args {
    debug: bool,
    dialect: model::Dialect,
    compile_config: Option<syn::Expr>,
}

impl Args {
    /// Reads `debug` and `nki = "0.8" | "0.7" | "beta1"`, in any order, each at most once.
    fn parse(attr: TokenStream2) -> syn::Result<Args> {
        let rule = "#[nki_kernel] takes the arguments `debug`, `nki = \"0.7\"` (the NKI \
                    dialect of the kernel; default `nki = \"beta1\"`) and \
                    `compile_config = <an nki_core::CompileConfig>`";
        let metas = Punctuated::<Meta, Token![,]>::parse_terminated
            .parse2(attr.clone())
            .map_err(|_| syn::Error::new(attr.span(), rule))?;
        let mut args = Args {
            debug: false,
            dialect: model::Dialect::Beta1,
            compile_config: None,
        };
        let (mut seen_debug, mut seen_nki) = (false, false);
        for m in &metas {
            match m {
                Meta::Path(p) if p.is_ident("debug") && !seen_debug => {
                    seen_debug = true;
                    args.debug = true;
                }
                Meta::NameValue(nv) if nv.path.is_ident("nki") && !seen_nki => {
                    seen_nki = true;
                    let version = match &nv.value {
                        syn::Expr::Lit(syn::ExprLit {
                            lit: syn::Lit::Str(s),
                            ..
                        }) => s.value(),
                        _ => String::new(),
                    };
                    args.dialect = match version.as_str() {
                        "0.7" => model::Dialect::Nki07,
                        "0.8" => model::Dialect::Nki08,
                        "beta1" => model::Dialect::Beta1,
                        _ => {
                            return Err(syn::Error::new(
                                nv.value.span(),
                                "the NKI dialect of a kernel is `nki = \"0.8\"`, \
                                 `nki = \"0.7\"` or `nki = \"beta1\"` (the default)",
                            ))
                        }
                    };
                }
                Meta::NameValue(nv)
                    if nv.path.is_ident("compile_config") && args.compile_config.is_none() =>
                {
                    args.compile_config = Some(nv.value.clone());
                }
                _ => return Err(syn::Error::new(m.span(), rule)),
            }
        }
        Ok(args)
    }
}
