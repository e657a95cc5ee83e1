/// Whether `name` may name a secret: `[A-Za-z_][A-Za-z0-9_.-]*`, as in MiniBot.
pub fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

#[cfg(test)]
mod tests {
    use super::is_valid_name;

    #[test]
    fn names_follow_minibot_rule() {
        for good in ["A", "_x", "openai.key", "gh-token_2", "a.b-c"] {
            assert!(is_valid_name(good), "{good}");
        }
        for bad in ["", "1abc", ".x", "-x", "a b", "a:b", "ключ", "a$"] {
            assert!(!is_valid_name(bad), "{bad}");
        }
    }
}
