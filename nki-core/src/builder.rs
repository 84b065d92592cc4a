//! Declarations written once for the crate's option structs and operand enums: the chainable
//! setters of the option and argument structs (`Opts::new().engine(e).negate()`, ...; each
//! setter takes `self` by value, writes its fields and returns `self`), and the conversions of
//! tiles into an operand enum.

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

/// Implements `From<&Tile>` (the tile's whole view) and `From<TileRef>` for the operand enum
/// `$operand<'a>`, whose variant `Tile` holds a [`TileRef`](crate::tile::TileRef).
macro_rules! tile_operand {
    ($operand:ident) => {
        impl<'a> From<&'a $crate::tile::Tile> for $operand<'a> {
            fn from(t: &'a $crate::tile::Tile) -> Self {
                $operand::Tile(t.view())
            }
        }
        impl<'a> From<$crate::tile::TileRef<'a>> for $operand<'a> {
            fn from(t: $crate::tile::TileRef<'a>) -> Self {
                $operand::Tile(t)
            }
        }
    };
}

pub(crate) use {setters, tile_operand};
