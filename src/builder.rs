//! How a config writes its by-value setters ([`setters!`]), and [`Opaque`], the field type of a
//! setting that cannot print itself, so that every config derives `Debug`. Owns nothing else:
//! what a setting means, its default and its checks stay with the config that has it.

/// Writes by-value setters, `fn name(mut self, field: Type) -> Self`, each storing its argument
/// in the field of the same name: as given, or after `=> into` (`field.into()`), `=> some`
/// (`Some(field)`, for a setting that is off by default) or `=> some into`. A setter that checks
/// or clamps its argument is written by hand beside them.
///
/// ```text
/// impl LockConfig {
///     setters! {
///         /// Exclusive, read or write.
///         with_kind(kind: LockKind);
///         /// How this lock retries a failed request.
///         with_retry(retry: RetryPolicy) => some;
///     }
/// }
/// ```
macro_rules! setters {
    ($( $(#[$attr:meta])* $name:ident($field:ident: $ty:ty) $(=> $($how:ident)+)?; )*) => {
        $(
            $(#[$attr])*
            pub fn $name(mut self, $field: $ty) -> Self {
                self.$field = $crate::builder::setters!(@value $field $($($how)+)?);
                self
            }
        )*
    };
    (@value $value:ident) => { $value };
    (@value $value:ident into) => { $value.into() };
    (@value $value:ident some) => { Some($value) };
    (@value $value:ident some into) => { Some($value.into()) };
}

pub(crate) use setters;

/// A setting that cannot print itself (a factory, a closure) or must not (a secret): `Debug`
/// shows `..`, so that the config holding it derives `Debug` and prints every other field.
#[derive(Clone)]
pub(crate) struct Opaque<T>(pub(crate) T);

impl<T> std::fmt::Debug for Opaque<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("..")
    }
}
