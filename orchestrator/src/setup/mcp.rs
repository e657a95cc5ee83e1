//! Step 4: MCP servers, each a program to start (stdio) or a URL to reach (streamable HTTP). A server given again
//! by name is replaced; the others stay as they are.

use super::context::Context;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Command { command: String, args: Vec<String> },
    Url(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    pub name: String,
    pub target: Target,
}

/// A server name as `[tools.mcp]` accepts it: it becomes part of tool names.
pub fn parse_name(text: &str) -> Result<String, String> {
    let name = text.trim();
    let valid = !name.is_empty()
        && !name.contains("__")
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if valid {
        Ok(name.to_string())
    } else {
        Err(format!("`{name}` is not a server name: use letters, digits, `_` and `-` (no `__`), such as files"))
    }
}

/// A command line (split at spaces; no quoting) or an http(s) URL.
pub fn parse_target(text: &str) -> Result<Target, String> {
    let text = text.trim();
    if text.starts_with("http://") || text.starts_with("https://") {
        return super::provider::parse_url(text).map(Target::Url);
    }
    let mut words = text.split_whitespace().map(str::to_string);
    match words.next() {
        Some(command) => Ok(Target::Command { command, args: words.collect() }),
        None => {
            Err("give the command that starts the server (such as `npx -y @modelcontextprotocol/server-everything`) \
                     or its http(s) URL"
                .into())
        }
    }
}

/// `NAME=COMMAND ARGS…` or `NAME=URL`, as `--mcp` takes it.
pub fn parse_flag(text: &str) -> Result<Server, String> {
    let Some((name, rest)) = text.split_once('=') else {
        return Err(format!("`{text}` is not NAME=COMMAND ARGS… or NAME=URL"));
    };
    Ok(Server { name: parse_name(name)?, target: parse_target(rest)? })
}

pub fn step(cx: &mut Context<'_>) -> anyhow::Result<()> {
    cx.ui.say("\nStep 4/4: MCP servers (tools from other programs)");
    let mut servers = Vec::new();
    for flag in &cx.args.mcp {
        servers.push(parse_flag(flag).map_err(|e| anyhow::anyhow!("--mcp: {e}"))?);
    }
    let existing = names(cx);
    if !existing.is_empty() {
        cx.ui.say(&format!("  Set up already: {}.", existing.join(", ")));
    }
    if cx.ui.interactive() {
        loop {
            let name = cx.ui.until("Add an MCP server: its name (Enter when done)", None, |answer| {
                if answer.is_empty() { Ok(None) } else { parse_name(answer).map(Some) }
            })?;
            let Some(name) = name else { break };
            let target = cx.ui.until("Its command line, or its URL", None, parse_target)?;
            servers.push(Server { name, target });
        }
    }
    if servers.is_empty() {
        if existing.is_empty() {
            cx.ui.say("  None.");
        }
        return Ok(());
    }
    for server in &servers {
        add(cx, server)?;
    }
    cx.doc.set(&["tools", "mcp", "enabled"], true)?;
    Ok(())
}

fn names(cx: &Context<'_>) -> Vec<String> {
    let Some(servers) = cx.doc.get(&["tools", "mcp", "servers"]).and_then(|i| i.as_array_of_tables()) else {
        return Vec::new();
    };
    servers.iter().filter_map(|t| t.get("name").and_then(|n| n.as_str()).map(str::to_string)).collect()
}

fn add(cx: &mut Context<'_>, server: &Server) -> anyhow::Result<()> {
    let list = cx.doc.mcp_servers()?;
    let index = list.iter().position(|t| t.get("name").and_then(|n| n.as_str()) == Some(server.name.as_str()));
    let index = match index {
        Some(index) => index,
        None => {
            let mut fresh = toml_edit::Table::new();
            fresh.insert("name", toml_edit::value(server.name.as_str()));
            list.push(fresh);
            list.len() - 1
        }
    };
    let Some(table) = list.get_mut(index) else { anyhow::bail!("internal: MCP server {} vanished", server.name) };
    match &server.target {
        Target::Command { command, args } => {
            table.insert("transport", toml_edit::value("stdio"));
            table.insert("command", toml_edit::value(command.as_str()));
            let mut list = toml_edit::Array::new();
            for arg in args {
                list.push(arg.as_str());
            }
            table.insert("args", toml_edit::value(list));
            table.remove("url");
        }
        Target::Url(url) => {
            table.insert("transport", toml_edit::value("http"));
            table.insert("url", toml_edit::value(url.as_str()));
            table.remove("command");
            table.remove("args");
        }
    }
    cx.ui.say(&format!("  MCP server {} added.", server.name));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_is_a_command_line_or_a_url() {
        assert_eq!(
            parse_flag("files=npx -y @modelcontextprotocol/server-filesystem /tmp"),
            Ok(Server {
                name: "files".into(),
                target: Target::Command {
                    command: "npx".into(),
                    args: vec!["-y".into(), "@modelcontextprotocol/server-filesystem".into(), "/tmp".into()],
                },
            })
        );
        assert_eq!(
            parse_flag("docs=https://mcp.example.com/mcp/"),
            Ok(Server { name: "docs".into(), target: Target::Url("https://mcp.example.com/mcp".into()) })
        );
        assert!(parse_flag("no equals sign").is_err());
        assert!(parse_flag("a__b=npx").unwrap_err().contains("`a__b` is not a server name"));
        assert!(parse_flag("files=  ").is_err());
    }
}
