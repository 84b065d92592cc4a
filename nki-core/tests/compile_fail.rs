//! Compile-time shape checks: typed tiles whose shape breaks a hardware limit, element-wise
//! operands of different shapes, matmul operand limits and stores into kernel inputs must not
//! compile, with a message naming the rule; so must `#[nki_kernel]` signatures and arguments it
//! rejects. The `pass_*` cases (`#[nki_kernel(debug)]` among them) must build and run.
//!
//! The shape limits of `Sbuf`/`Psum` and of `typed::matmul` are post-monomorphization const
//! errors: only a full build reports them, `cargo check` does not. trybuild builds (rather
//! than checks) the cases because this suite contains `pass` cases, so keep at least one
//! `pass` case in the same `TestCases`.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass_*.rs");
    t.compile_fail("tests/ui/fail_*.rs");
}
