//! Generation from the [`Kernel`] model: the per-instance function and the thin launcher glue.
//!
//! For `fn k(params) body` the expansion is
//! - `fn k(...) body`, the program one instance runs, with each output `&mut Hbm<T>` turned
//!   into `&HbmOut<'_, T>` (writable, shared by all instances; inputs stay read-only), and a
//!   returned `Hbm<T>` (or tuple of them) into the `Tensor`s the body returns;
//! - a type `k` whose `run(launch, params)` borrows the outputs (`Hbm::as_output`) and runs
//!   the instance function under the `Launch`, and whose `launch`, `simulate` and `estimate`
//!   each forward to `nki_core::__private` (`launch`, `modelled`), written once in the
//!   runtime, with a closure that calls `run`.

use crate::model::{Dialect, Kernel, Role};
use proc_macro2::TokenStream;
use quote::{format_ident, quote};

/// The whole expansion of `kernel`.
pub(crate) fn kernel(kernel: &Kernel) -> TokenStream {
    let instance = instance_fn(kernel);
    let launchers = launchers(kernel);
    quote!(#instance #launchers)
}

/// The per-instance function: the kernel's own body, outputs as `&HbmOut<'_, T>`.
fn instance_fn(k: &Kernel) -> TokenStream {
    let Kernel {
        attrs,
        vis,
        name,
        generics,
        body,
        ..
    } = k;
    let (impl_generics, _, where_clause) = generics.split_for_impl();
    let ret = k.ret.as_ref().map(|r| {
        let t = quote!(::nki_core::Tensor);
        if r.count == 1 {
            quote!(-> #t)
        } else {
            let ts = (0..r.count).map(|_| t.clone());
            quote!(-> (#(#ts),*))
        }
    });
    let params = k.params.iter().map(|p| {
        let (n, ty) = (&p.name, &p.ty);
        match &p.role {
            Role::Output { elem } => quote!(#n: &::nki_core::HbmOut<'_, #elem>),
            Role::Input | Role::Other => quote!(#n: #ty),
        }
    });
    quote! {
        #(#attrs)*
        #[allow(clippy::too_many_arguments)]
        #vis fn #name #impl_generics (#(#params),*) #ret #where_clause #body
    }
}

/// The launcher type of the kernel: `run` plus the three forwarding launchers.
fn launchers(k: &Kernel) -> TokenStream {
    let Kernel {
        vis,
        name,
        generics,
        ..
    } = k;
    let generic_params = &generics.params;
    let where_clause = &generics.where_clause;
    let params: Vec<TokenStream> = k
        .params
        .iter()
        .map(|p| {
            let (n, ty) = (&p.name, &p.ty);
            quote!(#n: #ty)
        })
        .collect();
    let names: Vec<_> = k.params.iter().map(|p| &p.name).collect();
    let turbofish = turbofish(k);
    let outputs = k.names_of(|r| matches!(r, Role::Output { .. }));
    let borrowed: Vec<_> = outputs
        .iter()
        .map(|o| format_ident!("__nki_out_{}", o))
        .collect();
    let instance_args = k.params.iter().map(|p| {
        let n = &p.name;
        match p.role {
            Role::Output { .. } => {
                let b = format_ident!("__nki_out_{}", n);
                quote!(&#b)
            }
            Role::Input | Role::Other => quote!(#n),
        }
    });
    let doc = launcher_doc(k);
    let nki = quote!(::nki_core);
    let result = |t: TokenStream| quote!(::core::result::Result<#t, #nki::NkiError>);
    let (report, profile) = (
        result(quote!(#nki::LaunchReport)),
        result(quote!(#nki::Profile)),
    );
    let grid = quote!(grid: impl ::core::convert::Into<#nki::Grid>);
    let target = quote!(target: #nki::Target);
    let run = quote!(|launch| Self::run #turbofish (launch, #(#names),*));
    let dialect = match k.dialect {
        Dialect::Beta1 => quote!(#nki::Dialect::Beta1),
        Dialect::Nki07 => quote!(#nki::Dialect::Nki07),
        Dialect::Nki08 => quote!(#nki::Dialect::Nki08),
    };
    let dialect_const = quote! {
        /// The NKI dialect the kernel is written in (`#[nki_kernel(nki = "0.7")]` or the
        /// default Beta 1): it decides what the launch grid means.
        pub const DIALECT: #nki::Dialect = #dialect;
    };
    // The kernel's own compile configuration, handed to the launch.
    let config = k
        .compile_config
        .as_ref()
        .map(|c| quote!(.kernel_compile_config(#c)));
    // Each HBM argument is named after its parameter for the launch's errors.
    let hbm_params = k.names_of(|r| !matches!(r, Role::Other));
    let naming = quote!(#(#hbm_params.set_name(stringify!(#hbm_params));)*);
    if let Some(ret) = &k.ret {
        let out = &ret.ty;
        let execute = execute_fn(k, out);
        let (report, profile) = (
            result(quote!((#out, #nki::LaunchReport))),
            result(quote!((#out, #nki::Profile))),
        );
        return quote! {
            #[doc = #doc]
            #[allow(non_camel_case_types, dead_code)]
            #vis struct #name {
                _private: (),
            }

            #[allow(dead_code, clippy::too_many_arguments)]
            impl #name {
                #dialect_const

                /// Runs the kernel on `grid` (execute mode, default target): its returned
                /// outputs and the report.
                #[track_caller]
                pub fn launch<#generic_params>(#grid, #(#params),*) -> #report #where_clause {
                    #nki::__private::launch_returning(grid, #run)
                }

                /// Runs the kernel computing values and the modelled timeline on `target`:
                /// its returned outputs and the profile.
                #[track_caller]
                pub fn simulate<#generic_params>(#grid, #target, #(#params),*) -> #profile #where_clause {
                    #nki::__private::modelled_returning(grid, target, #nki::Mode::Simulate, #run)
                }

                /// Models the kernel's timeline on `target` without computing values (inputs
                /// may be `Hbm::shape_only`; the returned outputs are shape-only).
                #[track_caller]
                pub fn estimate<#generic_params>(#grid, #target, #(#params),*) -> #profile #where_clause {
                    #nki::__private::modelled_returning(grid, target, #nki::Mode::Estimate, #run)
                }

                #execute

                /// Runs the kernel with a configured [`::nki_core::Launch`] (its dialect set to
                /// the kernel's, [`Self::DIALECT`]).
                #[track_caller]
                pub fn run<#generic_params>(launch: #nki::Launch, #(#params),*) -> #report #where_clause {
                    #naming
                    #(let #borrowed = #outputs.as_output();)*
                    let __nki_returned = #nki::__private::ReturnSlot::new();
                    let report = launch.dialect(Self::DIALECT)#config.run(|| __nki_returned.set(#name #turbofish (#(#instance_args),*)))?;
                    ::core::result::Result::Ok((__nki_returned.take()?, report))
                }
            }
        };
    }
    quote! {
        #[doc = #doc]
        #[allow(non_camel_case_types, dead_code)]
        #vis struct #name {
            _private: (),
        }

        #[allow(dead_code, clippy::too_many_arguments)]
        impl #name {
            #dialect_const

            /// Runs the kernel on `grid` (execute mode, default target) and returns the report.
            #[track_caller]
            pub fn launch<#generic_params>(#grid, #(#params),*) -> #report #where_clause {
                #nki::__private::launch(grid, #run)
            }

            /// Runs the kernel computing values and the modelled timeline on `target`.
            #[track_caller]
            pub fn simulate<#generic_params>(#grid, #target, #(#params),*) -> #profile #where_clause {
                #nki::__private::modelled(grid, target, #nki::Mode::Simulate, #run)
            }

            /// Models the kernel's timeline on `target` without computing values (inputs may be
            /// `Hbm::shape_only`).
            #[track_caller]
            pub fn estimate<#generic_params>(#grid, #target, #(#params),*) -> #profile #where_clause {
                #nki::__private::modelled(grid, target, #nki::Mode::Estimate, #run)
            }

            /// Runs the kernel with a configured [`::nki_core::Launch`] (its dialect set to the
            /// kernel's, [`Self::DIALECT`]).
            #[track_caller]
            pub fn run<#generic_params>(launch: #nki::Launch, #(#params),*) -> #report #where_clause {
                #naming
                #(let #borrowed = #outputs.as_output();)*
                launch.dialect(Self::DIALECT)#config.run(|| #name #turbofish (#(#instance_args),*))
            }
        }
    }
}

/// NKI 0.8's `nki.execute` for a kernel returning `out` and taking no `&mut Hbm` output:
/// `execute(arrays and other parameters) -> arrays` (empty for a kernel with one).
fn execute_fn(k: &Kernel, out: &syn::Type) -> TokenStream {
    if k.params
        .iter()
        .any(|p| matches!(p.role, Role::Output { .. }))
    {
        return quote!();
    }
    let nki = quote!(::nki_core);
    let private = quote!(#nki::__private);
    let generic_params = &k.generics.params;
    let where_clause = &k.generics.where_clause;
    let mut params = Vec::new();
    let mut convert = Vec::new();
    for p in &k.params {
        let (n, ty) = (&p.name, &p.ty);
        match (&p.role, ty) {
            (Role::Input, syn::Type::Reference(r)) => {
                let inner = &r.elem;
                params.push(quote!(#n: &impl #private::ArrayArg<#inner>));
                convert.push(quote!(let #n = &#private::ArrayArg::<#inner>::to_input(#n)?;));
            }
            _ => params.push(quote!(#n: #ty)),
        }
    }
    let names = k.params.iter().map(|p| &p.name);
    let turbofish = turbofish(k);
    quote! {
        /// Runs the kernel with arrays in and arrays out (NKI 0.8 `nki.execute(kernel,
        /// *inputs)`): each `&Hbm` input given as an ndarray, the kernel run once
        /// (`kernel[1]`, execute mode, default target), its returned outputs as `ArrayD`s.
        #[track_caller]
        pub fn execute<#generic_params>(#(#params),*) -> ::core::result::Result<
            <#out as #private::OutputArrays>::Arrays, #nki::NkiError
        > #where_clause {
            #(#convert)*
            let (out, _) = Self::launch #turbofish (1, #(#names),*)?;
            #private::OutputArrays::to_arrays(out)
        }
    }
}

/// `::<T, N>` naming the kernel's type and const generics (empty without generics).
fn turbofish(k: &Kernel) -> TokenStream {
    let names: Vec<_> = k
        .generics
        .params
        .iter()
        .filter_map(|p| match p {
            syn::GenericParam::Type(t) => Some(&t.ident),
            syn::GenericParam::Const(c) => Some(&c.ident),
            syn::GenericParam::Lifetime(_) => None,
        })
        .collect();
    if names.is_empty() {
        quote!()
    } else {
        quote!(::<#(#names),*>)
    }
}

/// The doc comment of the launcher type: its launchers and the parameters' roles.
fn launcher_doc(k: &Kernel) -> String {
    let list = |pick: fn(&Role) -> bool| {
        let names: Vec<String> = k.names_of(pick).iter().map(|n| format!("`{n}`")).collect();
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    };
    let returned = match &k.ret {
        Some(r) => format!(" Returns {} output(s).", r.count),
        None => String::new(),
    };
    format!(
        "Launchers of the `{name}` NKI kernel: `{name}::launch(grid, ...)`, `simulate`, \
         `estimate`, `run`. Inputs: {}; outputs: {}; other parameters: {}.{returned}",
        list(|r| matches!(r, Role::Input)),
        list(|r| matches!(r, Role::Output { .. })),
        list(|r| matches!(r, Role::Other)),
        name = k.name
    )
}
