//! Names the user wrote: every `let NAME = <value>;` in the kernel body whose value is a call of
//! `nl` / `nisa` (`let y = nl::ndarray(..)`, `let x = nl::load(..)`,
//! `let z = nisa::classic::tensor_copy(..)`) or an arithmetic expression (`let z = &x + &y;`)
//! becomes `let NAME = Binding::new(<value>).__nki_bind("NAME");`, which names a tensor or tile
//! after its binding in errors, profiles and traces and passes any other value through
//! untouched (`nki_core::__private::Binding`; the choice is made by the value's type).
//!
//! Only these values are wrapped: their types are settled where they are written (a call of
//! `nl`/`nisa` never needs the binding's later uses to infer its type), and wrapping leaves the
//! lifetime of temporaries alone (`let r = &f();` extends a temporary's life; a call or an
//! operator does not).

use proc_macro2::Span;
use quote::quote_spanned;
use syn::spanned::Spanned;
use syn::visit_mut::{self, VisitMut};
use syn::{BinOp, Block, Expr, Local, Pat, UnOp};

/// Rewrites the `let` bindings of `body` (nested blocks, loops and closures included).
pub(crate) fn name_bindings(body: &mut Block) {
    Namer.visit_block_mut(body);
}

struct Namer;

impl VisitMut for Namer {
    fn visit_local_mut(&mut self, local: &mut Local) {
        // The value first: bindings inside it (a block, a closure) are named too.
        visit_mut::visit_local_mut(self, local);
        let Some(name) = bound_name(&local.pat) else {
            return;
        };
        let Some(init) = &mut local.init else { return };
        if init.diverge.is_some() || !names_a_tensor(&init.expr) {
            return;
        }
        let value = &init.expr;
        let span = value.span();
        let text = syn::LitStr::new(&name.to_string(), Span::call_site());
        let wrapped = quote_spanned! {span=> {
            #[allow(unused_imports)]
            use ::nki_core::__private::{NameByBinding as _, PassBinding as _};
            ::nki_core::__private::Binding::new(#value).__nki_bind(#text)
        }};
        *init.expr = Expr::Verbatim(wrapped);
    }

    // Items nested in the body are other functions, and macro calls keep their tokens.
    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}

/// The name a `let` binds: `x`, `mut x`, `x: T` (not `ref x`, tuples or other patterns).
fn bound_name(pat: &Pat) -> Option<&syn::Ident> {
    match pat {
        Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => Some(&p.ident),
        Pat::Type(t) => bound_name(&t.pat),
        _ => None,
    }
}

/// Whether `e` is a value the binding may name: a call of a function under `nl` or `nisa`,
/// or an arithmetic operator.
fn names_a_tensor(e: &Expr) -> bool {
    match e {
        Expr::Call(c) => match &*c.func {
            Expr::Path(p) => p
                .path
                .segments
                .iter()
                .any(|s| s.ident == "nl" || s.ident == "nisa"),
            _ => false,
        },
        Expr::Binary(b) => matches!(
            b.op,
            BinOp::Add(_) | BinOp::Sub(_) | BinOp::Mul(_) | BinOp::Div(_) | BinOp::Rem(_)
        ),
        Expr::Unary(u) => matches!(u.op, UnOp::Neg(_)),
        Expr::Paren(p) => names_a_tensor(&p.expr),
        _ => false,
    }
}
