//! `#[nki_kernel]`: turns a Rust function into an NKI kernel.
//!
//! The function body stays the per-instance program. Parameters declared `&mut Hbm<T>` are the
//! kernel's outputs: inside the body they become `&HbmOut<'_, T>` (writable, shared by all
//! program instances), while `&Hbm<T>` inputs stay read-only, so storing into an input is a
//! compile error. Beside the function the macro defines a type of the same name with the
//! launchers `launch`, `simulate`, `estimate` and `run`, which `launch!(kernel[gx, gy](...))`
//! calls. Nothing else happens here: all checks of tile shapes live in nki-core's types.

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{parse_macro_input, FnArg, ItemFn, Pat, PathArguments, ReturnType, Type};

/// Marks a function as an NKI kernel. See the crate docs.
#[proc_macro_attribute]
pub fn nki_kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    if !attr.is_empty() {
        let a: TokenStream2 = attr.into();
        return quote_spanned!(a.span()=> compile_error!("#[nki_kernel] takes no arguments");)
            .into();
    }
    let func = parse_macro_input!(item as ItemFn);
    match expand(func) {
        Ok(t) => t.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// True when `ty` is `Hbm<...>` (any path ending in `Hbm`); returns its generic arguments.
fn hbm_args(ty: &Type) -> Option<&PathArguments> {
    if let Type::Path(p) = ty {
        let last = p.path.segments.last()?;
        if last.ident == "Hbm" {
            return Some(&last.arguments);
        }
    }
    None
}

fn expand(func: ItemFn) -> syn::Result<TokenStream2> {
    let sig = &func.sig;
    if let ReturnType::Type(_, t) = &sig.output {
        return Err(syn::Error::new(
            t.span(),
            "an NKI kernel returns nothing: write its results into `&mut Hbm<T>` output parameters",
        ));
    }
    if sig.asyncness.is_some() {
        return Err(syn::Error::new(sig.span(), "an NKI kernel cannot be async"));
    }
    let name = &sig.ident;
    let vis = &func.vis;
    let attrs = &func.attrs;
    let (impl_generics, _ty_generics, where_clause) = sig.generics.split_for_impl();
    let generics_params = &sig.generics.params;

    let mut body_params = Vec::new(); // parameters of the per-instance function
    let mut launch_params = Vec::new(); // parameters of the launchers
    let mut prelude = Vec::new(); // output borrows inside the launcher
    let mut call_args = Vec::new(); // arguments passed to the instance function
    let mut call_args_outer = Vec::new(); // launcher parameters forwarded to `run`
    for (i, arg) in sig.inputs.iter().enumerate() {
        let FnArg::Typed(pt) = arg else {
            return Err(syn::Error::new(
                arg.span(),
                "an NKI kernel cannot take `self`",
            ));
        };
        let ident = match &*pt.pat {
            Pat::Ident(pi) => pi.ident.clone(),
            other => {
                return Err(syn::Error::new(
                    other.span(),
                    "kernel parameters must be plain names",
                ))
            }
        };
        let ty = &pt.ty;
        launch_params.push(quote!(#ident: #ty));
        call_args_outer.push(quote!(#ident));
        match &**ty {
            Type::Reference(r) if r.mutability.is_some() => {
                let Some(args) = hbm_args(&r.elem) else {
                    return Err(syn::Error::new(
                        ty.span(),
                        "a `&mut` kernel parameter must be an HBM output: `&mut Hbm<T>`",
                    ));
                };
                let elem = match args {
                    PathArguments::AngleBracketed(a) => {
                        let a = &a.args;
                        quote!(#a)
                    }
                    _ => {
                        return Err(syn::Error::new(
                            ty.span(),
                            "write the output's element type: `&mut Hbm<T>`",
                        ))
                    }
                };
                body_params.push(quote!(#ident: &::nki_core::hbm::HbmOut<'_, #elem>));
                let out = format_ident!("__nki_out{}", i);
                prelude.push(quote!(let #out = #ident.as_output();));
                call_args.push(quote!(&#out));
            }
            _ => {
                body_params.push(quote!(#ident: #ty));
                call_args.push(quote!(#ident));
            }
        }
    }
    let block = &func.block;
    let doc_launch = format!(
        "Launchers of the `{name}` NKI kernel: `{name}::launch(grid, ...)`, `simulate`, `estimate`, `run`."
    );
    let turbofish = if sig.generics.params.is_empty() {
        quote!()
    } else {
        let names = sig.generics.params.iter().filter_map(|p| match p {
            syn::GenericParam::Type(t) => Some(t.ident.clone()),
            syn::GenericParam::Const(c) => Some(c.ident.clone()),
            syn::GenericParam::Lifetime(_) => None,
        });
        quote!(::<#(#names),*>)
    };
    Ok(quote! {
        #(#attrs)*
        #[allow(clippy::too_many_arguments)]
        #vis fn #name #impl_generics (#(#body_params),*) #where_clause #block

        #[doc = #doc_launch]
        #[allow(non_camel_case_types, dead_code)]
        #vis struct #name {
            _private: (),
        }

        #[allow(dead_code, clippy::too_many_arguments)]
        impl #name {
            /// Runs the kernel on `grid` (execute mode, default target) and returns the report.
            pub fn launch<#generics_params>(
                grid: impl ::core::convert::Into<::nki_core::spmd::Grid>,
                #(#launch_params),*
            ) -> ::core::result::Result<::nki_core::spmd::LaunchReport, ::nki_core::error::NkiError> #where_clause {
                Self::run(::nki_core::spmd::Launch::new(grid), #(#call_args_outer),*)
            }

            /// Runs the kernel computing values and the modelled timeline on `target`.
            pub fn simulate<#generics_params>(
                grid: impl ::core::convert::Into<::nki_core::spmd::Grid>,
                target: ::nki_core::target::Target,
                #(#launch_params),*
            ) -> ::core::result::Result<::nki_core::profile::Profile, ::nki_core::error::NkiError> #where_clause {
                let launch = ::nki_core::spmd::Launch::new(grid)
                    .target(target)
                    .mode(::nki_core::context::Mode::Simulate);
                Self::run(launch, #(#call_args_outer),*).map(|r| r.profile.expect("simulate records a profile"))
            }

            /// Models the kernel's timeline on `target` without computing values (inputs may be
            /// `Hbm::shape_only`).
            pub fn estimate<#generics_params>(
                grid: impl ::core::convert::Into<::nki_core::spmd::Grid>,
                target: ::nki_core::target::Target,
                #(#launch_params),*
            ) -> ::core::result::Result<::nki_core::profile::Profile, ::nki_core::error::NkiError> #where_clause {
                let launch = ::nki_core::spmd::Launch::new(grid)
                    .target(target)
                    .mode(::nki_core::context::Mode::Estimate);
                Self::run(launch, #(#call_args_outer),*).map(|r| r.profile.expect("estimate records a profile"))
            }

            /// Runs the kernel with a configured [`::nki_core::spmd::Launch`].
            pub fn run<#generics_params>(
                launch: ::nki_core::spmd::Launch,
                #(#launch_params),*
            ) -> ::core::result::Result<::nki_core::spmd::LaunchReport, ::nki_core::error::NkiError> #where_clause {
                #(#prelude)*
                launch.run(|| #name #turbofish (#(#call_args),*))
            }
        }
    })
}
