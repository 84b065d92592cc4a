//! One declaration of the chainable setters of the option and argument structs
//! (`Opts::new().engine(e).negate()`, ...): each setter takes `self` by value, writes its
//! fields and returns `self`.

/// Declares chainable setters, each with its doc comment, arguments and the fields it
/// writes:
///
/// ```ignore
/// setters! {
///     /// Reverses the operands of the first operator.
///     reverse0() => reverse0 = true;
///     /// Sets the output dtype.
///     dtype(dtype: DType) => dtype = Some(dtype);
/// }
/// ```
///
/// expands, inside an `impl` block, to `pub fn reverse0(mut self) -> Self { self.reverse0 =
/// true; self }` and `pub fn dtype(mut self, dtype: DType) -> Self { ... }`.
macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),*) => $($field:ident = $value:expr),+;)*) => {$(
        $(#[$doc])*
        pub fn $name(mut self, $($arg: $ty),*) -> Self {
            $(self.$field = $value;)+
            self
        }
    )*};
}

pub(crate) use setters;
