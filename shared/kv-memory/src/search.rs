//! FTS5 match expressions from what a caller typed. The caller's text never reaches FTS5's query syntax: it is
//! cut into words (runs of letters and digits, as FTS5's `unicode61` tokenizer sees them), and each word becomes
//! a quoted phrase with a prefix star, `"word"*`, so `OR`, `NEAR`, parentheses, quotes, `*` and `:` are only
//! ever text.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Joiner {
    And,
    Or,
}

/// The expression, or `None` when the text has no word (`*`, `"()"`): such a query can only match as a substring.
pub fn fts_expression(query: &str, joiner: Joiner) -> Option<String> {
    let words: Vec<String> = query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
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
}
