//! The kernel model: what `#[nki_kernel]` reads from the annotated function, checked once.
//!
//! A [`Kernel`] is the function's attributes, visibility, name, generics and body, plus its
//! parameters, each with a [`Role`]: `&Hbm<T>` is an input, `&mut Hbm<T>` an output (of
//! element type `T`), anything else (scalars, options, ...) passes through as it is. Every
//! rule on the signature (no return value, not async, no `self`, plain parameter names,
//! `&mut` only for HBM outputs; a return type only of `Hbm<T>` or a tuple of them) is checked
//! here, so generation cannot fail.

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::spanned::Spanned;
use syn::{
    Attribute, Block, FnArg, Generics, Ident, ItemFn, Pat, PathArguments, ReturnType, Type,
    Visibility,
};

/// What a kernel parameter is to the launch.
pub(crate) enum Role {
    /// `&Hbm<T>`: read by every program instance.
    Input,
    /// `&mut Hbm<T>`: written by the program instances; inside the body it is an
    /// `&HbmOut<'_, T>` of element type `elem`.
    Output { elem: TokenStream },
    /// Any other parameter: handed to every instance as it is.
    Other,
}

/// One kernel parameter.
pub(crate) struct Param {
    pub(crate) name: Ident,
    pub(crate) ty: Type,
    pub(crate) role: Role,
}

/// The NKI dialect a kernel is written in (`#[nki_kernel(nki = "0.7")]`); it becomes
/// `nki_core::Dialect` in the expansion.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// NKI Beta 1, the default: the launch grid is an SPMD grid.
    Beta1,
    /// NKI 0.7: the launch grid is the logical NeuronCore's degree.
    Nki07,
    /// NKI 0.8: launched as 0.7.
    Nki08,
}

/// The kernel: the function `#[nki_kernel]` annotates, with its parameters' roles.
pub(crate) struct Kernel {
    pub(crate) attrs: Vec<Attribute>,
    pub(crate) vis: Visibility,
    pub(crate) name: Ident,
    pub(crate) generics: Generics,
    pub(crate) params: Vec<Param>,
    /// The outputs the kernel returns (NKI 0.7: allocated in `nl::shared_hbm` and returned),
    /// if it returns any.
    pub(crate) ret: Option<Returns>,
    pub(crate) body: Box<Block>,
    /// The dialect the attribute named.
    pub(crate) dialect: Dialect,
    /// The kernel's compile configuration (`#[nki_kernel(compile_config = expr)]`), if any.
    pub(crate) compile_config: Option<syn::Expr>,
}

/// A kernel's return type: `Hbm<T>` or a tuple of `Hbm<T>`s.
pub(crate) struct Returns {
    /// The declared type (what the launchers hand back).
    pub(crate) ty: Type,
    /// How many tensors (1 for `Hbm<T>`, the tuple's length otherwise).
    pub(crate) count: usize,
}

impl Kernel {
    /// Reads and checks the annotated function, written in `dialect`.
    pub(crate) fn parse(func: ItemFn, dialect: Dialect) -> syn::Result<Kernel> {
        let sig = &func.sig;
        let ret = match &sig.output {
            ReturnType::Default => None,
            ReturnType::Type(_, t) => Some(Returns::parse(t)?),
        };
        if sig.asyncness.is_some() {
            return Err(syn::Error::new(sig.span(), "an NKI kernel cannot be async"));
        }
        let params = sig
            .inputs
            .iter()
            .map(Param::parse)
            .collect::<syn::Result<Vec<_>>>()?;
        Ok(Kernel {
            name: sig.ident.clone(),
            generics: sig.generics.clone(),
            attrs: func.attrs,
            vis: func.vis,
            params,
            ret,
            body: func.block,
            dialect,
            compile_config: None,
        })
    }

    /// The names of the parameters of role `pick`, in order.
    pub(crate) fn names_of(&self, pick: fn(&Role) -> bool) -> Vec<&Ident> {
        self.params
            .iter()
            .filter(|p| pick(&p.role))
            .map(|p| &p.name)
            .collect()
    }
}

impl Returns {
    fn parse(ty: &Type) -> syn::Result<Returns> {
        let bad = || {
            syn::Error::new(
                ty.span(),
                "an NKI kernel returns its outputs as `Hbm<T>` or a tuple of `Hbm<T>` (tensors \
                 allocated with `nl::ndarray(.., nl::shared_hbm)`), or nothing (writing into \
                 `&mut Hbm<T>` output parameters)",
            )
        };
        let count = match ty {
            Type::Tuple(t) if (2..=4).contains(&t.elems.len()) => {
                if !t.elems.iter().all(|e| hbm_args(e).is_some()) {
                    return Err(bad());
                }
                t.elems.len()
            }
            Type::Paren(p) if hbm_args(&p.elem).is_some() => 1,
            _ if hbm_args(ty).is_some() => 1,
            _ => return Err(bad()),
        };
        Ok(Returns {
            ty: ty.clone(),
            count,
        })
    }
}

impl Param {
    fn parse(arg: &FnArg) -> syn::Result<Param> {
        let FnArg::Typed(pt) = arg else {
            return Err(syn::Error::new(
                arg.span(),
                "an NKI kernel cannot take `self`",
            ));
        };
        let Pat::Ident(pi) = &*pt.pat else {
            return Err(syn::Error::new(
                pt.pat.span(),
                "kernel parameters must be plain names",
            ));
        };
        let ty = (*pt.ty).clone();
        let role = match &ty {
            Type::Reference(r) if r.mutability.is_some() => {
                let Some(args) = hbm_args(&r.elem) else {
                    return Err(syn::Error::new(
                        ty.span(),
                        "a `&mut` kernel parameter must be an HBM output: `&mut Hbm<T>`",
                    ));
                };
                let PathArguments::AngleBracketed(a) = args else {
                    return Err(syn::Error::new(
                        ty.span(),
                        "write the output's element type: `&mut Hbm<T>`",
                    ));
                };
                Role::Output {
                    elem: a.args.to_token_stream(),
                }
            }
            Type::Reference(r) if hbm_args(&r.elem).is_some() => Role::Input,
            _ => Role::Other,
        };
        Ok(Param {
            name: pi.ident.clone(),
            ty,
            role,
        })
    }
}

/// When `ty` is `Hbm<...>` (any path ending in `Hbm`): its generic arguments.
fn hbm_args(ty: &Type) -> Option<&PathArguments> {
    let Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?;
    (last.ident == "Hbm").then_some(&last.arguments)
}
