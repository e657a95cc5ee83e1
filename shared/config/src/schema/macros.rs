/// Declares a config section: a struct that rejects unknown keys, with MiniBot's default for every field
/// written next to the field.
macro_rules! section {
    ($(#[$meta:meta])* pub struct $name:ident { $( $(#[$field_meta:meta])* pub $field:ident : $ty:ty = $default:expr ),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, serde::Deserialize)]
        #[serde(default, deny_unknown_fields)]
        pub struct $name { $( $(#[$field_meta])* pub $field: $ty ),* }

        impl Default for $name {
            fn default() -> Self {
                Self { $( $field: $default ),* }
            }
        }
    };
}

/// A string enum read from config, with the accepted spellings in the error message.
macro_rules! choice {
    ($(#[$meta:meta])* pub enum $name:ident { $( $variant:ident = $text:literal ),+ $(,)? } default $default:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
        pub enum $name { $( #[serde(rename = $text)] $variant ),+ }

        impl Default for $name {
            fn default() -> Self {
                Self::$default
            }
        }

        impl $name {
            pub fn as_str(self) -> &'static str {
                match self { $( Self::$variant => $text ),+ }
            }
        }
    };
}

pub(crate) fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| (*item).to_string()).collect()
}
