//! Names the user wrote: every `let NAME = <value>;` in the kernel body whose value is a call of
//! `nl` / `nisa` (`let y = nl::ndarray(..)`, `let x = nl::load(..)`,
//! `let z = nisa::classic::tensor_copy(..)`) or an arithmetic expression (`let z = &x + &y;`)
//! is followed by `(&Binding(&NAME)).__nki_bind("NAME");`, which names a tensor or tile after
//! its binding in errors, profiles and traces and leaves any other value alone
//! (`nki_core::__private::Binding`; the choice is made by the value's type). The value is not
//! moved: the statement borrows it where the `let` put it.
//!
//! Only these values are named: their types are settled where they are written (a call of
//! `nl`/`nisa` never needs the binding's later uses to infer its type, which the borrow needs).

use proc_macro2::Span;
use quote::quote_spanned;
use syn::spanned::Spanned;
use syn::visit_mut::{self, VisitMut};
use syn::{BinOp, Block, Expr, Local, Pat, Stmt, UnOp};

/// Rewrites the `let` bindings of `body` (nested blocks, loops and closures included).
pub(crate) fn name_bindings(body: &mut Block) {
    Namer.visit_block_mut(body);
}

struct Namer;

impl VisitMut for Namer {
    fn visit_block_mut(&mut self, block: &mut Block) {
        // The nested blocks, closures and values first: bindings inside them are named too.
        visit_mut::visit_block_mut(self, block);
        let stmts = std::mem::take(&mut block.stmts);
        for stmt in stmts {
            let naming = match &stmt {
                Stmt::Local(local) => naming_statement(local),
                _ => None,
            };
            block.stmts.push(stmt);
            block.stmts.extend(naming);
        }
    }

    // Items nested in the body are other functions, and macro calls keep their tokens.
    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}

/// The statement naming what `local` binds, if it binds one name to a value that may be a
/// tensor (see the module doc).
fn naming_statement(local: &Local) -> Option<Stmt> {
    let name = bound_name(&local.pat)?;
    let init = local.init.as_ref()?;
    if init.diverge.is_some() || !names_a_tensor(&init.expr) {
        return None;
    }
    let span = init.expr.span();
    let text = syn::LitStr::new(&name.to_string(), Span::call_site());
    Some(Stmt::Expr(
        Expr::Verbatim(quote_spanned! {span=> {
            #[allow(unused_imports)]
            use ::nki_core::__private::{NameByBinding as _, PassBinding as _};
            (&::nki_core::__private::Binding(&#name)).__nki_bind(#text);
        }}),
        None,
    ))
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
