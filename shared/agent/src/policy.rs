//! Allow/deny tool policy with fnmatch-style patterns (`*`, `?`, `[...]`, case-sensitive), as MiniBot's
//! `tools_allow` / `tools_deny` lists are written.

use globset::{Glob, GlobMatcher};

#[derive(Debug, thiserror::Error)]
#[error("invalid tool pattern `{pattern}`: {reason}")]
pub struct PatternError {
    pub pattern: String,
    pub reason: String,
}

/// A list of name patterns.
#[derive(Debug, Clone, Default)]
pub struct Patterns(Vec<GlobMatcher>);

impl Patterns {
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<Self, PatternError> {
        let mut matchers = Vec::new();
        for pattern in patterns {
            let pattern = pattern.as_ref().trim();
            if pattern.is_empty() {
                continue;
            }
            let glob = Glob::new(pattern)
                .map_err(|e| PatternError { pattern: pattern.to_string(), reason: e.kind().to_string() })?;
            matchers.push(glob.compile_matcher());
        }
        Ok(Self(matchers))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn matches(&self, name: &str) -> bool {
        self.0.iter().any(|m| m.is_match(name))
    }
}

/// Which tools an agent may use.
#[derive(Debug, Clone, Default)]
pub enum ToolPolicy {
    /// Every tool.
    #[default]
    All,
    /// Only tools matching one of the patterns.
    Allow(Patterns),
    /// Every tool except those matching one of the patterns.
    Deny(Patterns),
}

impl ToolPolicy {
    /// From allow and deny lists; at most one may be non-empty (config validation says which key).
    pub fn from_lists<S: AsRef<str>>(allow: &[S], deny: &[S]) -> Result<Self, PatternError> {
        let allow_written = !allow.is_empty();
        let allow = Patterns::new(allow)?;
        let deny = Patterns::new(deny)?;
        // An allow list of blank entries allows nothing: it must never widen to every tool.
        Ok(if allow_written {
            Self::Allow(allow)
        } else if !deny.is_empty() {
            Self::Deny(deny)
        } else {
            Self::All
        })
    }

    pub fn permits(&self, name: &str) -> bool {
        match self {
            Self::All => true,
            Self::Allow(patterns) => patterns.matches(name),
            Self::Deny(patterns) => !patterns.matches(name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnmatch_patterns() {
        let policy = ToolPolicy::from_lists(&["memory_*", "get_?ettings", "[cb]ash"], &[]).expect("valid");
        assert!(policy.permits("memory_search"));
        assert!(policy.permits("get_settings"));
        assert!(policy.permits("bash"));
        assert!(!policy.permits("Memory_search"), "case-sensitive");
        assert!(!policy.permits("python_execute"));
        let deny = ToolPolicy::from_lists(&[] as &[&str], &["mcp_*"]).expect("valid");
        assert!(!deny.permits("mcp_files__read"));
        assert!(deny.permits("bash"));
    }

    #[test]
    fn an_allow_list_of_blank_entries_allows_nothing() {
        let policy = ToolPolicy::from_lists(&["", "  "], &[]).expect("valid");
        assert!(!policy.permits("bash"));
        assert!(!policy.permits("write_file"));
    }
}
