//! How node, relation and search text becomes an identifier: NFKD, combining marks dropped, lowercase, every run
//! of characters that are not letters or digits one `_`, no `_` at either end. "Arch-Linux", "arch linux" and
//! "Arch_Línux" are one node; a graph whose ids do not converge answers no question a key/value store could not.
//! Accents are dropped from Latin letters only: in other scripts a combining mark tells words apart (Thai ข้าว
//! "rice" and ข่าว "news" differ by a tone mark) and stays.
//!
//! MiniBot keeps only `a-z0-9`, so every name in another script vanishes: "Иван" is refused and "Иван 2" and
//! "Петр 2" are both `2`, one node for two people. Here letters and digits of every script stay (lowercased), so
//! they stay apart; for Latin text the ids are MiniBot's, and a MiniBot graph reads the same.

use crate::GraphError;
use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::canonical_combining_class;

/// The longest node id MiniBot's column holds (`VARCHAR(256)`).
pub const MAX_NODE_CHARS: usize = 256;
/// The longest relation (`VARCHAR(128)`).
pub const MAX_REL_CHARS: usize = 128;
/// The longest namespace (`VARCHAR(64)`).
pub const MAX_GRAPH_CHARS: usize = 64;

/// `value` as a slug; `field` names it in the error when nothing is left.
pub fn slug(value: &str, field: &str) -> Result<String, GraphError> {
    let slug = slug_or_empty(value);
    if slug.is_empty() {
        return Err(GraphError::invalid(format!("{field} must contain at least one letter or digit")));
    }
    Ok(slug)
}

fn slug_or_empty(value: &str) -> String {
    // Accents come off Latin letters (`José` is `jose`, as in MiniBot); in other scripts a combining mark is part
    // of the letter (Thai tone marks, Devanagari virama, kana voicing, Cyrillic breve) and stays, recomposed.
    let mut kept = String::with_capacity(value.len());
    let mut base_is_ascii = false;
    for c in value.nfkd() {
        if canonical_combining_class(c) == 0 && !is_mark(c) {
            base_is_ascii = c.is_ascii();
            kept.push(c);
        } else if !base_is_ascii {
            kept.push(c);
        }
    }
    let folded: String = kept.nfc().collect();
    let mut out = String::with_capacity(folded.len());
    let mut gap = false;
    for c in folded.to_lowercase().chars() {
        // A mark left here belongs to a non-Latin letter: it is part of the word.
        if c.is_alphanumeric() || (is_mark(c) && !out.is_empty() && !gap) {
            if gap && !out.is_empty() {
                out.push('_');
            }
            gap = false;
            out.push(c);
        } else {
            gap = true;
        }
    }
    out
}

/// A combining character of class 0 (Thai vowel signs, Devanagari vowel signs): marks by Unicode category, which
/// `canonical_combining_class` alone misses.
fn is_mark(c: char) -> bool {
    unicode_normalization::char::is_combining_mark(c)
}

/// A node id: `type:id` keeps its first `:` and slugs both halves (`person:Jo Doe` is `person:jo_doe`); an id
/// without a type is one slug.
pub fn node(value: &str) -> Result<String, GraphError> {
    let id = match value.split_once(':') {
        None => slug(value, "node id")?,
        Some((kind, rest)) => format!("{}:{}", slug(kind, "node type")?, slug(rest, "node id")?),
    };
    bounded(id, MAX_NODE_CHARS, "node id")
}

/// A relation, slugged (`Works On` is `works_on`).
pub fn rel(value: &str) -> Result<String, GraphError> {
    bounded(slug(value, "rel")?, MAX_REL_CHARS, "rel")
}

/// What `graph_search` looks for. MiniBot slugs the whole query, which turns `person:alex` into `person_alex`
/// and so never finds a typed id; here a `:` survives like in a node id, and either half may be empty
/// (`person:` finds every person).
pub fn search_fragment(query: &str) -> Result<String, GraphError> {
    match query.split_once(':') {
        None => slug(query, "query"),
        Some((kind, rest)) => {
            let (kind, rest) = (slug_or_empty(kind), slug_or_empty(rest));
            if kind.is_empty() && rest.is_empty() {
                return Err(GraphError::invalid("query must contain at least one letter or digit"));
            }
            Ok(format!("{kind}:{rest}"))
        }
    }
}

/// A namespace as written (MiniBot does not slug it), `memory` when empty.
pub fn namespace(value: Option<&str>) -> Result<String, GraphError> {
    let value = value.map(str::trim).filter(|v| !v.is_empty()).unwrap_or(crate::DEFAULT_NAMESPACE);
    bounded(value.to_string(), MAX_GRAPH_CHARS, "graph")
}

fn bounded(value: String, max: usize, field: &str) -> Result<String, GraphError> {
    let chars = value.chars().count();
    if chars > max {
        return Err(GraphError::invalid(format!("{field} is {chars} characters long; the most is {max}")));
    }
    Ok(value)
}

/// A `LIKE` pattern that finds `fragment` anywhere, its `%`, `_` and `\` taken literally (with `ESCAPE '\'`):
/// slugs are full of `_`, which LIKE would read as "any character".
pub fn like_pattern(fragment: &str) -> String {
    let escaped = fragment.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_");
    format!("%{escaped}%")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_converge_whatever_their_spelling() {
        assert_eq!(node("person:Jo Doe").unwrap(), "person:jo_doe");
        assert_eq!(node("Person: José  Núñez!").unwrap(), "person:jose_nunez");
        assert_eq!(node("tech:Arch-Linux").unwrap(), node("TECH:arch_linux").unwrap());
        assert_eq!(node("a:b:c").unwrap(), "a:b_c", "one prefix only");
        assert_eq!(node("ﬁle").unwrap(), "file", "compatibility forms fold");
        assert_eq!(node("plain id").unwrap(), "plain_id");
        assert_eq!(rel("Works On").unwrap(), "works_on");
        assert_eq!(rel("--depends--on--").unwrap(), "depends_on");
    }

    /// Names in other scripts keep their letters, so two people are never folded into one node.
    #[test]
    fn names_in_other_scripts_stay_apart() {
        assert_eq!(node("person:Иван 2").unwrap(), "person:иван_2");
        assert_ne!(node("person:Иван 2").unwrap(), node("person:Петр 2").unwrap());
        assert_eq!(node("place:日本").unwrap(), "place:日本");
        assert_eq!(node("Straße").unwrap(), "straße");
        assert_ne!(node("Straße").unwrap(), node("stra e").unwrap());
        assert_ne!(node("ข้าว").unwrap(), node("ข่าว").unwrap(), "rice is not news");
        assert_ne!(node("ぶた").unwrap(), node("ふた").unwrap(), "a pig is not a lid");
        assert_eq!(node("person:Мой").unwrap(), "person:мой");
        assert_eq!(node("पक्का").unwrap(), "पक्का");
    }

    #[test]
    fn empty_slugs_are_refused_with_the_field_named() {
        assert_eq!(rel("!!!").unwrap_err().to_string(), "rel must contain at least one letter or digit");
        assert!(node("person:").unwrap_err().to_string().starts_with("node id must"));
        assert!(node(":alex").unwrap_err().to_string().starts_with("node type must"));
        assert!(node(&"x".repeat(300)).unwrap_err().to_string().contains("300 characters"));
    }

    #[test]
    fn search_keeps_the_type_separator_and_escapes_wildcards() {
        assert_eq!(search_fragment("Person:Alex").unwrap(), "person:alex");
        assert_eq!(search_fragment("person:").unwrap(), "person:");
        assert_eq!(search_fragment("Works On").unwrap(), "works_on");
        assert!(search_fragment(":").is_err());
        assert_eq!(like_pattern("a_b%c\\"), "%a\\_b\\%c\\\\%");
    }

    #[test]
    fn namespaces_default_to_memory() {
        assert_eq!(namespace(None).unwrap(), "memory");
        assert_eq!(namespace(Some("  ")).unwrap(), "memory");
        assert_eq!(namespace(Some("work")).unwrap(), "work");
        assert!(namespace(Some(&"n".repeat(65))).is_err());
    }
}
