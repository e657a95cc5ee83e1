//! Byte sizes written as an integer, a whole float or a string with a unit (`"64KB"` = 64 000,
//! `"1MiB"` = 1 048 576), as MiniBot's pydantic `ByteSize` reads them.

use serde::de::{self, Deserializer, Visitor};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl ByteSize {
    pub fn bytes(self) -> u64 {
        self.0
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        let trimmed = text.trim();
        let split = trimmed
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(trimmed.len());
        let (number, unit) = trimmed.split_at(split);
        let number: f64 = number
            .parse()
            .map_err(|_| format!("`{text}` is not a byte size (examples: 65536, \"64KB\", \"1MiB\")"))?;
        let multiplier: f64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1.0,
            "k" | "kb" => 1e3,
            "m" | "mb" => 1e6,
            "g" | "gb" => 1e9,
            "t" | "tb" => 1e12,
            "kib" => 1024.0,
            "mib" => 1024.0 * 1024.0,
            "gib" => 1024.0 * 1024.0 * 1024.0,
            "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
            other => return Err(format!("unknown byte unit `{other}` in `{text}`")),
        };
        let bytes = number * multiplier;
        if bytes.fract() != 0.0 {
            return Err(format!("`{text}` is not a whole number of bytes"));
        }
        Self::positive(bytes as u64)
    }

    fn positive(bytes: u64) -> Result<Self, String> {
        if bytes == 0 {
            Err("a byte size must be greater than 0".into())
        } else {
            Ok(Self(bytes))
        }
    }
}

impl<'de> serde::Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ByteSizeVisitor;
        impl Visitor<'_> for ByteSizeVisitor {
            type Value = ByteSize;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a byte size: a positive integer or a string such as \"64KB\" or \"1MiB\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ByteSize, E> {
                u64::try_from(v)
                    .map_err(|_| E::custom("a byte size must be greater than 0"))
                    .and_then(|v| ByteSize::positive(v).map_err(E::custom))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ByteSize, E> {
                ByteSize::positive(v).map_err(E::custom)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<ByteSize, E> {
                if v.fract() != 0.0 || v < 0.0 {
                    return Err(E::custom("a byte size must be a whole positive number"));
                }
                ByteSize::positive(v as u64).map_err(E::custom)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ByteSize, E> {
                ByteSize::parse(v).map_err(E::custom)
            }
        }
        deserializer.deserialize_any(ByteSizeVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::ByteSize;

    #[test]
    fn decimal_and_binary_units() {
        assert_eq!(ByteSize::parse("64KB"), Ok(ByteSize(64_000)));
        assert_eq!(ByteSize::parse("1MiB"), Ok(ByteSize(1_048_576)));
        assert_eq!(ByteSize::parse("100"), Ok(ByteSize(100)));
        assert!(ByteSize::parse("0").is_err());
        assert!(ByteSize::parse("12 parsecs").is_err());
    }
}
