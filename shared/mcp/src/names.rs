//! Which remote tools become bindings: a name the providers accept, and one tool per name.
//!
//! The model sees `<prefix>_<server>__<remote>`, and the remote part is whatever the server sent. OpenAI-compatible
//! providers refuse a whole request whose tool list holds a name outside `[A-Za-z0-9_-]{1,64}`, so one odd name
//! from one server would break every turn of the agent: such a tool is dropped with a warning and the server's
//! other tools stay. Two tools that end up with one name would shadow each other (the registry keeps the last one
//! registered), which would let a server take over another server's tool: both are dropped, with a warning that
//! names them.

use crate::server::RemoteTool;
use std::collections::BTreeSet;

/// The longest tool name the providers accept.
pub const MAX_TOOL_NAME_CHARS: usize = 64;

/// Whether providers accept `name` as a tool name: 1 to 64 characters of `[A-Za-z0-9_-]`.
pub fn provider_safe(name: &str) -> bool {
    (1..=MAX_TOOL_NAME_CHARS).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The remote tools of one bridge server that may become bindings: their binding name is provider-safe and no
/// other tool of the server has the same one. The others are logged and left out.
pub fn admit<'a>(prefix: &str, server: &str, tools: &'a [RemoteTool]) -> Vec<&'a RemoteTool> {
    // In the server's order, which is the order the model sees them in.
    let named: Vec<(String, &RemoteTool)> = tools
        .iter()
        .filter_map(|tool| {
            let name = crate::binding_name(prefix, server, &tool.name);
            if !provider_safe(&name) {
                // `?` and the excerpt: the name is the server's text, and may be long or hold line breaks.
                tracing::warn!(
                    server = %server,
                    tool = ?minibot_agent::excerpt(&tool.name),
                    "mcp tool dropped: its name as the model would see it is not 1-{MAX_TOOL_NAME_CHARS} characters \
                     of [A-Za-z0-9_-], which providers refuse"
                );
                return None;
            }
            Some((name, tool))
        })
        .collect();
    let twins = shared(named.iter().map(|(name, _)| name.as_str()));
    for name in &twins {
        warn_shared(name, &[server]);
    }
    named.into_iter().filter(|(name, _)| !twins.contains(name)).map(|(_, tool)| tool).collect()
}

/// The names that occur more than once in `names` (one name per binding, any server).
pub fn shared<'a>(names: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut shared = BTreeSet::new();
    for name in names {
        if !seen.insert(name) {
            shared.insert(name.to_string());
        }
    }
    shared
}

/// Logs that the tools named `name` of `servers` were dropped because they share it.
pub fn warn_shared(name: &str, servers: &[&str]) {
    tracing::warn!(
        tool = %name,
        servers = %servers.join(", "),
        "mcp tools dropped: more than one tool has this name, so none of them is offered"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(name: &str) -> RemoteTool {
        RemoteTool { name: name.into(), description: String::new(), input_schema: serde_json::Map::new() }
    }

    #[test]
    fn provider_pattern() {
        assert!(provider_safe("mcp_s__get-sum"));
        assert!(provider_safe(&"a".repeat(64)));
        assert!(!provider_safe(&"a".repeat(65)));
        assert!(!provider_safe(""));
        for bad in ["mcp_s__has space", "mcp_s__dot.name", "mcp_s__café", "mcp_s__a/b", "mcp_s__x\n"] {
            assert!(!provider_safe(bad), "{bad:?}");
        }
    }

    #[test]
    fn admits_valid_unique_names_only() {
        let limit = MAX_TOOL_NAME_CHARS - "mcp_s__".len();
        let tools = [
            remote("ok"),
            remote("has space"),
            remote(&"x".repeat(limit)),
            remote(&"y".repeat(limit + 1)),
            remote("twin"),
            remote("twin"),
            remote("späť"),
        ];
        let names: Vec<&str> = admit("mcp", "s", &tools).iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, vec!["ok", &"x".repeat(limit)]);
    }

    #[test]
    fn shared_names() {
        let got = shared(["a", "b", "a", "c", "a", "b"]);
        assert_eq!(got.into_iter().collect::<Vec<_>>(), vec!["a", "b"]);
    }
}
