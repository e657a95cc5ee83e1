//! All MCP servers of one agent, the tools they currently expose, and reloading them.

use crate::Result;
use crate::auth::resolve_auth_secret;
use crate::bridge::BridgeTool;
use crate::lazy::{LazyCallTool, LazyListTool};
use crate::names;
use crate::paths::resolve_launch_paths;
use crate::server::{McpServer, RemoteTool};
use crate::untrusted::fence_instructions;
use futures_util::future::{BoxFuture, join_all};
use minibot_agent::{DynTool, SpillStore, ToolContext, ToolRegistry, ToolResult};
use minibot_config::Config;
use minibot_config::schema::{McpMode, ToolOutputSpillSection};
use minibot_llm::ToolSpec;
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::{Arc, PoisonError, RwLock, Weak};
use std::time::Duration;

/// Used when `timeout_seconds` is not a usable positive number.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// What one server contributes to the current snapshot.
#[derive(Clone)]
struct Entry {
    server: Arc<McpServer>,
    tools: Vec<Arc<dyn DynTool>>,
    instructions: Option<String>,
    error: Option<String>,
}

impl Entry {
    fn tool_names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.name().to_string()).collect()
    }
}

/// A server's state for status pages (`/mcp`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerStatus {
    pub name: String,
    pub mode: &'static str,
    pub tools: Vec<String>,
    pub instructions: Option<String>,
    /// The last load error; the tools listed are then the ones kept from before (or none).
    pub error: Option<String>,
}

/// One server's outcome in a reload.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerReload {
    pub server: String,
    pub ok: bool,
    /// The tools it offers after the reload (kept from before when it failed).
    pub tools: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What `reload` changed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReloadReport {
    pub servers: Vec<ServerReload>,
    pub added: Vec<String>,
    pub removed: Vec<String>,
}

/// The MCP servers of one agent and their current bindings.
///
/// The main agent starts one hub for the process ([`McpHub::start`]); a worker starts one per task for the
/// specialist's `mcp_servers` ([`McpHub::start_subset`]) and shuts it down afterwards.
pub struct McpHub {
    prefix: String,
    servers: Vec<Arc<McpServer>>,
    /// Replaced whole, so readers see tools and instructions of the same generation.
    snapshot: RwLock<Arc<Vec<Entry>>>,
    reload_tool: Option<Arc<dyn DynTool>>,
    reloading: tokio::sync::Mutex<()>,
}

impl McpHub {
    /// Connects every server of `[tools.mcp]` concurrently and loads its tools. Servers that fail are logged and
    /// get no tools (bridge) or fallback descriptions (lazy); their bindings reconnect on use. Adds `reload_mcp`
    /// when `[tools.mcp].reload` is on. A disabled section gives an empty hub.
    ///
    /// Fails on a server whose `auth_secret` cannot be resolved from [`Config::secrets`] or that also sets an
    /// `Authorization` header.
    pub async fn start(config: &Config) -> Result<Arc<Self>> {
        let section = &config.tools.mcp;
        Self::build(config, None, section.enabled && section.reload).await
    }

    /// Like [`McpHub::start`], for only the named servers (a specialist's `mcp_servers`) and without
    /// `reload_mcp`. Unknown names are logged and ignored; only the named servers' `auth_secret`s are checked.
    pub async fn start_subset(config: &Config, names: &[String]) -> Result<Arc<Self>> {
        for name in names {
            if !config.tools.mcp.servers.iter().any(|s| &s.name == name) {
                tracing::warn!(server = %name, "mcp server requested but not configured");
            }
        }
        Self::build(config, Some(names), false).await
    }

    async fn build(config: &Config, only: Option<&[String]>, with_reload: bool) -> Result<Arc<Self>> {
        let section = &config.tools.mcp;
        let timeout = Duration::try_from_secs_f64(section.timeout_seconds)
            .ok()
            .filter(|t| !t.is_zero())
            .unwrap_or(DEFAULT_TIMEOUT);
        let mut servers: Vec<Arc<McpServer>> = Vec::new();
        if section.enabled {
            for server in &section.servers {
                if only.is_some_and(|names| !names.contains(&server.name)) {
                    continue;
                }
                if server.name.trim().is_empty() || server.name.contains("__") {
                    tracing::error!(server = %server.name, "mcp server name must be non-empty without `__`; skipped");
                    continue;
                }
                // Its tools' names start `<prefix>_<server>__`: if that part is already unusable, every tool would
                // be dropped one warning at a time.
                if !names::provider_safe(&crate::binding_name(&section.name_prefix, &server.name, "x")) {
                    tracing::error!(
                        server = %server.name,
                        prefix = %section.name_prefix,
                        "mcp server skipped: its tool names `<prefix>_<server>__<tool>` would not be valid for the \
                         providers (only A-Z, a-z, 0-9, `_` and `-`, at most {} characters)",
                        names::MAX_TOOL_NAME_CHARS
                    );
                    continue;
                }
                if servers.iter().any(|s| s.name() == server.name) {
                    tracing::error!(server = %server.name, "duplicate mcp server name; skipped");
                    continue;
                }
                let mut server = server.clone();
                resolve_launch_paths(&mut server, config);
                resolve_auth_secret(&mut server, config)?;
                servers.push(Arc::new(McpServer::new(server, timeout)));
            }
        }
        let hub = Arc::new_cyclic(|weak: &Weak<Self>| Self {
            prefix: section.name_prefix.clone(),
            servers,
            snapshot: RwLock::new(Arc::new(Vec::new())),
            reload_tool: with_reload.then(|| Arc::new(ReloadTool { hub: weak.clone() }) as Arc<dyn DynTool>),
            reloading: tokio::sync::Mutex::new(()),
        });
        hub.reload().await;
        Ok(hub)
    }

    /// The per-server handles, for a supervisor that drives connections itself.
    pub fn servers(&self) -> &[Arc<McpServer>] {
        &self.servers
    }

    /// The current bindings (plus `reload_mcp` when enabled), in configuration order.
    /// The tools `keep` lets through, wrapped in the generic output spill like every other tool's results: a
    /// binding hands over its whole result and declares `inline_result_chars`, so a long one spills to a managed
    /// file or, with spill off, is cut. The read-back tools of `base` come along only so the spill notice can
    /// name them; callers add what `base` lacks ([`ToolRegistry::register_missing`]).
    pub fn spilled_tools(
        &self,
        keep: impl Fn(&str) -> bool,
        base: &ToolRegistry,
        spill: &ToolOutputSpillSection,
        root: Option<&Arc<dyn SpillStore>>,
    ) -> ToolRegistry {
        let mut remote = ToolRegistry::new();
        for tool in self.tools() {
            if keep(tool.name()) {
                remote.register(tool);
            }
        }
        for name in ["code_read", "grep", "read_file", "bash"] {
            if let Some(tool) = base.get(name) {
                remote.register(Arc::clone(tool));
            }
        }
        minibot_agent::wrap_with_spill(&remote, spill, root)
    }

    /// The servers that serve at least one of `tools` (what `get_settings` reports as running).
    pub fn servers_serving(&self, tools: &[String]) -> Vec<String> {
        self.status().into_iter().filter(|s| s.tools.iter().any(|t| tools.contains(t))).map(|s| s.name).collect()
    }

    pub fn tools(&self) -> Vec<Arc<dyn DynTool>> {
        let snapshot = self.current();
        let mut tools: Vec<Arc<dyn DynTool>> = snapshot.iter().flat_map(|e| e.tools.iter().cloned()).collect();
        if let Some(reload) = &self.reload_tool {
            tools.push(Arc::clone(reload));
        }
        tools
    }

    /// System-prompt fragments: the instructions of each server that has at least one tool in `visible` (the
    /// tool names left after policy), so a server hidden from the agent does not steer it. Each is fenced as
    /// untrusted text (capped when it arrived), ready to append to the system prompt as it is.
    pub fn instructions_for(&self, visible: &[String]) -> Vec<String> {
        self.current()
            .iter()
            .filter(|e| e.tools.iter().any(|t| visible.iter().any(|v| v == t.name())))
            .filter_map(|e| {
                // A server that was down at the last load but has connected since contributes what it sent.
                let live = e.instructions.clone().or_else(|| e.server.instructions())?;
                Some(fence_instructions(e.server.name(), &live))
            })
            .collect()
    }

    pub fn status(&self) -> Vec<ServerStatus> {
        self.current()
            .iter()
            .map(|e| ServerStatus {
                name: e.server.name().to_string(),
                mode: e.server.mode().as_str(),
                tools: e.tool_names(),
                instructions: e.instructions.clone(),
                error: e.error.clone(),
            })
            .collect()
    }

    /// Re-queries every server concurrently and swaps tools and instructions in one step. A server that fails
    /// keeps the tools and instructions it had.
    pub async fn reload(&self) -> ReloadReport {
        let _guard = self.reloading.lock().await;
        let previous = self.current();
        let loads = self.servers.iter().map(|server| self.load(Arc::clone(server)));
        let loaded = join_all(loads).await;

        let mut entries: Vec<Entry> = loaded
            .into_iter()
            .map(|entry| {
                let kept = previous.iter().find(|p| Arc::ptr_eq(&p.server, &entry.server));
                match (&entry.error, kept) {
                    (Some(error), Some(kept)) => Entry { error: Some(error.clone()), ..kept.clone() },
                    _ => entry,
                }
            })
            .collect();
        drop_shared_names(&mut entries);
        let servers = entries
            .iter()
            .map(|entry| ServerReload {
                server: entry.server.name().to_string(),
                ok: entry.error.is_none(),
                tools: entry.tool_names(),
                error: entry.error.clone(),
            })
            .collect();
        let before: BTreeSet<String> = previous.iter().flat_map(Entry::tool_names).collect();
        let after: BTreeSet<String> = entries.iter().flat_map(Entry::tool_names).collect();
        *self.snapshot.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(entries);
        ReloadReport {
            servers,
            added: after.difference(&before).cloned().collect(),
            removed: before.difference(&after).cloned().collect(),
        }
    }

    /// Closes every connection (and stops stdio children).
    pub async fn shutdown(&self) {
        join_all(self.servers.iter().map(|s| s.close())).await;
    }

    fn current(&self) -> Arc<Vec<Entry>> {
        Arc::clone(&self.snapshot.read().unwrap_or_else(PoisonError::into_inner))
    }

    async fn load(&self, server: Arc<McpServer>) -> Entry {
        let loaded = server.refresh().await;
        let error = loaded.as_ref().err().map(|err| {
            tracing::error!(server = %server.name(), error = %err, "failed to load mcp tools");
            err.to_string()
        });
        let tools = bindings(&self.prefix, &server, loaded.as_deref().unwrap_or_default());
        let instructions = server.instructions();
        Entry { server, tools, instructions, error }
    }
}

/// The bindings of one server: one per remote tool (bridge) or `list_tools`/`call_tool` (lazy; `tools` is
/// ignored). For callers that drive [`McpServer`]s themselves rather than through a hub. A remote tool whose
/// binding name providers would refuse, or that another of the server's tools also gets, has no binding.
pub fn bindings(prefix: &str, server: &Arc<McpServer>, tools: &[RemoteTool]) -> Vec<Arc<dyn DynTool>> {
    match server.mode() {
        // `admit` has checked the names.
        McpMode::Bridge => names::admit(prefix, server.name(), tools)
            .into_iter()
            .map(|remote| Arc::new(BridgeTool::new(prefix, Arc::clone(server), remote)) as Arc<dyn DynTool>)
            .collect(),
        // Lazy bindings exist even when the server is down: they retry the connection when called. Only the prefix
        // and server name can make their names unusable; the hub refuses such a server.
        McpMode::Lazy => [
            Arc::new(LazyListTool::new(prefix, Arc::clone(server))) as Arc<dyn DynTool>,
            Arc::new(LazyCallTool::new(prefix, Arc::clone(server))),
        ]
        .into_iter()
        .filter(|tool| {
            let safe = names::provider_safe(tool.name());
            if !safe {
                tracing::warn!(server = %server.name(), tool = %tool.name(), "mcp tool dropped: invalid name");
            }
            safe
        })
        .collect(),
    }
}

/// Drops the bindings whose name a binding of another server has too: server `a` with tool `_x` and server `a_`
/// with tool `x` both give `mcp_a___x`, and neither may shadow the other (see [`names`]).
fn drop_shared_names(entries: &mut [Entry]) {
    let shared = names::shared(entries.iter().flat_map(|e| e.tools.iter().map(|t| t.name())));
    if shared.is_empty() {
        return;
    }
    for name in &shared {
        let servers: Vec<&str> =
            entries.iter().filter(|e| e.tools.iter().any(|t| t.name() == name)).map(|e| e.server.name()).collect();
        names::warn_shared(name, &servers);
    }
    for entry in entries {
        entry.tools.retain(|t| !shared.contains(t.name()));
    }
}

/// `reload_mcp`: reloads every server of the hub that created it.
struct ReloadTool {
    hub: Weak<McpHub>,
}

impl DynTool for ReloadTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: crate::RELOAD_TOOL_NAME.into(),
            description: "Reconnect every configured MCP server and refresh its tools and instructions. Reports per \
                          server the tools it now offers or its error, and the tool names added and removed. A \
                          server that fails keeps its previous tools."
                .into(),
            parameters: std::sync::Arc::new(json!({"type": "object", "properties": {}, "additionalProperties": false})),
        }
    }

    fn name(&self) -> &str {
        crate::RELOAD_TOOL_NAME
    }

    fn call_json<'a>(&'a self, _args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            let Some(hub) = self.hub.upgrade() else {
                return Ok(json!({"ok": false, "error_code": "mcp_unavailable", "error": "MCP hub was shut down"}));
            };
            let report = hub.reload().await;
            let mut value = serde_json::to_value(&report).unwrap_or(Value::Null);
            if let Value::Object(map) = &mut value {
                map.insert("ok".into(), Value::Bool(true));
            }
            Ok(value)
        })
    }
}
