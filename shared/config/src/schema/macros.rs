/// Declares a config section: a struct that rejects unknown keys, with MiniBot's default for every field
/// written next to the field. It serializes too, so [`crate::support`] can compare what a file sets with the
/// defaults key by key.
macro_rules! section {
    ($(#[$meta:meta])* pub struct $name:ident { $( $(#[$field_meta:meta])* pub $field:ident : $ty:ty = $default:expr ),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
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
        #[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
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

/// `""` reads as not set, as MiniBot's falsy check treats it: MiniBot's example writes `python_path = ""`.
pub(crate) fn empty_as_none<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    let value: Option<String> = serde::Deserialize::deserialize(deserializer)?;
    Ok(value.filter(|text| !text.is_empty()))
}
