//! Declarations written once for the crate's instructions and option structs: the frame of
//! every instruction function (`#[track_caller]`, the `impl Into<..>` operands and their
//! conversions, `Op::begin`), the chainable setters of the option and argument structs
//! (`Opts::new().engine(e).negate()`, ...; each setter takes `self` by value, writes its
//! fields and returns `self`).

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

/// Declares instruction functions, each with its doc comment, signature, API name and body:
///
/// ```ignore
/// instruction! {
///     /// Element-wise `data1 op data2` into `dst`.
///     pub fn tensor_tensor<'d, 'a>(dst: into TileRef<'d>, data1: into TileRef<'a>, op: AluOp)
///     as ins = "nisa.tensor_tensor" {
///         tensor_tensor_to(&ins, Dst::Into(dst), data1, op);
///     }
/// }
/// ```
///
/// expands to `#[track_caller] pub fn tensor_tensor<'d, 'a>(dst: impl Into<TileRef<'d>>, data1:
/// impl Into<TileRef<'a>>, op: AluOp) { let ins = Op::begin("nisa.tensor_tensor"); let dst:
/// TileRef<'d> = dst.into(); let data1: TileRef<'a> = data1.into(); { body } }`: a parameter
/// written `name: into T` takes `impl Into<T>` and is converted, in parameter order, right after
/// the op begins (so a conversion's error names the op and the caller's line); any other
/// parameter is passed as written. The body sees the converted values and `ins`, the [`Op`]
/// (named by the entry, `as ins`). An entry without `as ins = "api"` begins no op (a wrapper
/// over another instruction).
///
/// [`Op`]: crate::isa::op::Op
macro_rules! instruction {
    ($($(#[$attr:meta])* $vis:vis fn $name:ident $(<$($lt:lifetime),*>)? ($($params:tt)*)
        $(-> $ret:ty)? $(as $ins:ident = $api:literal)? $body:block)*) => {$(
        $crate::builder::instruction!(@param
            [$(#[$attr])* #[track_caller] $vis fn $name $(<$($lt),*>)?]
            [$(-> $ret)?] [$(let $ins = $crate::isa::op::Op::begin($api);)?] $body [] []
            $($params)*);
    )*};
    (@param $head:tt $ret:tt $begin:tt $body:tt [$($sig:tt)*] [$($conv:tt)*]
        $p:ident: into $t:ty $(, $($params:tt)*)?) => {
        $crate::builder::instruction!(@param $head $ret $begin $body
            [$($sig)* $p: impl Into<$t>,] [$($conv)* let $p: $t = $p.into();] $($($params)*)?);
    };
    (@param $head:tt $ret:tt $begin:tt $body:tt [$($sig:tt)*] [$($conv:tt)*]
        $p:ident: $t:ty $(, $($params:tt)*)?) => {
        $crate::builder::instruction!(@param $head $ret $begin $body
            [$($sig)* $p: $t,] [$($conv)*] $($($params)*)?);
    };
    (@param [$($head:tt)*] [$($ret:tt)*] [$($begin:tt)*] $body:tt [$($sig:tt)*]
        [$($conv:tt)*]) => {
        $($head)*($($sig)*) $($ret)* {
            $($begin)*
            $($conv)*
            $body
        }
    };
}

pub(crate) use {instruction, setters};
