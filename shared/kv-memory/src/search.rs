//! FTS5 match expressions from what a caller typed. The caller's text never reaches FTS5's query syntax: it is
//! cut into words (runs of letters and digits, as FTS5's `unicode61` tokenizer sees them), and each word becomes
//! a quoted phrase with a prefix star, `"word"*`, so `OR`, `NEAR`, parentheses, quotes, `*` and `:` are only
//! ever text.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Joiner {
    And,
    Or,
}

/// The most distinct words an expression takes: FTS5's cost grows with the square of the terms, and a query of a
/// thousand repeated words took seconds.
pub const MAX_WORDS: usize = 16;

/// The expression, or `None` when the text has no word (`*`, `"()"`): such a query can only match as a substring.
/// Repeated words count once (case-insensitively); past [`MAX_WORDS`] the rest are left out.
pub fn fts_expression(query: &str, joiner: Joiner) -> Option<String> {
    let mut seen = std::collections::HashSet::new();
    let words: Vec<String> = query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty() && seen.insert(word.to_lowercase()))
        .take(MAX_WORDS)
        // Inside a phrase a quote is written twice; words hold none, but the rule costs nothing to keep.
        .map(|word| format!("\"{}\"*", word.replace('"', "\"\"")))
        .collect();
    if words.is_empty() {
        return None;
    }
    let separator = match joiner {
        Joiner::And => " AND ",
        Joiner::Or => " OR ",
    };
    Some(words.join(separator))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_is_a_quoted_prefix() {
        assert_eq!(fts_expression("car insurance", Joiner::And).as_deref(), Some("\"car\"* AND \"insurance\"*"));
        assert_eq!(fts_expression("car insurance", Joiner::Or).as_deref(), Some("\"car\"* OR \"insurance\"*"));
        assert_eq!(fts_expression("a\"b OR (", Joiner::And).as_deref(), Some("\"a\"* AND \"b\"* AND \"OR\"*"));
        assert_eq!(fts_expression("Vehículos ÜBER", Joiner::And).as_deref(), Some("\"Vehículos\"* AND \"ÜBER\"*"));
        assert_eq!(fts_expression("*", Joiner::And), None);
        assert_eq!(fts_expression(" \"() ", Joiner::Or), None);
    }

    #[test]
    fn repeated_words_count_once_and_long_queries_are_cut() {
        assert_eq!(fts_expression(&"car ".repeat(2000), Joiner::And).as_deref(), Some("\"car\"*"));
        let many: String = (0..100).map(|i| format!("w{i} ")).collect();
        assert_eq!(fts_expression(&many, Joiner::Or).unwrap().matches(" OR ").count(), MAX_WORDS - 1);
    }
}
