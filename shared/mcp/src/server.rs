//! One configured MCP server: its connection, catalog cache and instructions.
//!
//! [`McpServer`] is the per-server handle. It owns at most one live session and opens a new one whenever the
//! previous one is gone (never connected, server crashed, connection dropped), so a server that was down at
//! startup or died mid-session recovers on the next call without anyone supervising it. A supervisor (the
//! orchestrator's actor) can still drive it explicitly through [`McpServer::connect`], [`McpServer::refresh`] and
//! [`McpServer::close`].

use crate::child::ChildTransport;
use crate::http::{CappedClient, capped_config};
use crate::inbound::Inbound;
use crate::oversize::too_large;
use crate::result::{CallOutput, flatten_content};
use crate::stderr::StderrTail;
use crate::{McpError, Result};
use minibot_config::schema::{McpMode, McpServerSection, McpTransport};
use process_wrap::tokio::{CommandWrap, ProcessGroup};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransport;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex as StdMutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

type Session = RunningService<RoleClient, ClientConfig>;

/// A remote tool as the server describes it, after the server's filters.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteTool {
    pub name: String,
    pub description: String,
    /// The schema exactly as the server sent it; bindings normalise it.
    pub input_schema: Map<String, Value>,
}

/// A configured server and its (lazily opened) connection.
pub struct McpServer {
    config: McpServerSection,
    timeout: Duration,
    session: Mutex<Option<Arc<Session>>>,
    instructions: StdMutex<Option<String>>,
    catalog: Mutex<Option<(Instant, Vec<RemoteTool>)>>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer").field("name", &self.config.name).finish_non_exhaustive()
    }
}

impl McpServer {
    /// A handle for one `[[tools.mcp.servers]]` entry; nothing is started until the first request.
    pub fn new(config: McpServerSection, timeout: Duration) -> Self {
        Self {
            config,
            timeout,
            session: Mutex::new(None),
            instructions: StdMutex::new(None),
            catalog: Mutex::new(None),
        }
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    pub fn mode(&self) -> McpMode {
        self.config.mode
    }

    pub fn config(&self) -> &McpServerSection {
        &self.config
    }

    /// `inline_result_chars`: the spill limit its bindings declare.
    pub fn inline_result_chars(&self) -> usize {
        usize::try_from(self.config.inline_result_chars).unwrap_or(usize::MAX)
    }

    /// The `instructions` the server sent at its last successful initialize.
    pub fn instructions(&self) -> Option<String> {
        self.instructions.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Whether a remote tool passes `enabled_tools`/`disabled_tools` (disabled wins).
    pub fn allows(&self, remote: &str) -> bool {
        let enabled = self.config.enabled_tools.is_empty() || self.config.enabled_tools.iter().any(|t| t == remote);
        enabled && !self.config.disabled_tools.iter().any(|t| t == remote)
    }

    /// Opens a session unless a live one exists.
    pub async fn connect(&self) -> Result<()> {
        self.session().await.map(|_| ())
    }

    /// Whether a live session is open right now.
    pub async fn is_connected(&self) -> bool {
        self.session.lock().await.as_ref().is_some_and(|s| !s.is_closed())
    }

    /// Closes the session (and stops a stdio child); the next request reconnects.
    pub async fn close(&self) {
        let session = self.session.lock().await.take();
        if let Some(session) = session {
            shut(session).await;
        }
    }

    /// Lists the server's tools over the current session (connecting if needed), filtered, and refreshes the
    /// catalog cache.
    pub async fn list_tools(&self) -> Result<Vec<RemoteTool>> {
        let session = self.session().await?;
        let tools = self.list_on(&session).await;
        if let Err(err) = &tools {
            self.forget_if_dead(&session, err).await;
        }
        let tools = tools?;
        *self.catalog.lock().await = Some((Instant::now(), tools.clone()));
        Ok(tools)
    }

    /// The catalog, from cache while it is younger than `catalog_cache_ttl_seconds` (0 disables the cache).
    pub async fn catalog(&self) -> Result<Vec<RemoteTool>> {
        let ttl = Duration::from_secs(self.config.catalog_cache_ttl_seconds);
        if !ttl.is_zero()
            && let Some((at, tools)) = self.catalog.lock().await.as_ref()
            && at.elapsed() < ttl
        {
            return Ok(tools.clone());
        }
        self.list_tools().await
    }

    /// Opens a fresh session, lists tools on it and only then replaces the current session, so a failing server
    /// keeps serving on its old session. Returns the new tool list.
    pub async fn refresh(&self) -> Result<Vec<RemoteTool>> {
        let (session, instructions) = self.open().await?;
        let session = Arc::new(session);
        let tools = match self.config.mode {
            McpMode::Bridge => match self.list_on(&session).await {
                Ok(tools) => Some(tools),
                Err(err) => {
                    shut(session).await;
                    return Err(err);
                }
            },
            McpMode::Lazy => None,
        };
        *self.instructions.lock().unwrap_or_else(PoisonError::into_inner) = instructions;
        let previous = self.session.lock().await.replace(session);
        *self.catalog.lock().await = tools.clone().map(|t| (Instant::now(), t));
        if let Some(previous) = previous {
            shut(previous).await;
        }
        Ok(tools.unwrap_or_default())
    }

    /// Calls a remote tool with a per-call timeout. A call on a dead session reconnects first.
    pub async fn call_tool(&self, remote: &str, arguments: Map<String, Value>) -> Result<CallOutput> {
        let session = self.session().await?;
        let params = CallToolRequestParams::new(remote.to_string()).with_arguments(arguments);
        let outcome = match tokio::time::timeout(self.timeout, session.call_tool(params)).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(err)) => Err(self.request_error("tools/call", err)),
            Err(_) => Err(self.timeout_error("tools/call")),
        };
        let result = match outcome {
            Ok(result) => result,
            Err(err) => {
                self.forget_if_dead(&session, &err).await;
                return Err(err);
            }
        };
        let blocks: Vec<Value> = result.content.iter().filter_map(|b| serde_json::to_value(b).ok()).collect();
        let mut text = flatten_content(&blocks);
        if text.is_empty()
            && let Some(structured) = &result.structured_content
        {
            text = structured.to_string();
        }
        Ok(CallOutput { is_error: result.is_error.unwrap_or(false), text })
    }

    async fn list_on(&self, session: &Session) -> Result<Vec<RemoteTool>> {
        let tools = match tokio::time::timeout(self.timeout, session.list_all_tools()).await {
            Ok(Ok(tools)) => tools,
            Ok(Err(err)) => return Err(self.request_error("tools/list", err)),
            Err(_) => return Err(self.timeout_error("tools/list")),
        };
        Ok(tools
            .into_iter()
            .filter(|t| self.allows(&t.name))
            .map(|t| RemoteTool {
                name: t.name.to_string(),
                description: t.description.map(|d| d.to_string()).unwrap_or_default(),
                input_schema: (*t.input_schema).clone(),
            })
            .collect())
    }

    /// The live session, opening one if there is none or the last one died.
    async fn session(&self) -> Result<Arc<Session>> {
        let mut slot = self.session.lock().await;
        if let Some(session) = slot.as_ref() {
            if !session.is_closed() && !session.peer().is_transport_closed() {
                return Ok(Arc::clone(session));
            }
            tracing::info!(server = %self.config.name, "mcp session closed, reconnecting");
        }
        if let Some(dead) = slot.take() {
            shut(dead).await;
        }
        let (session, instructions) = self.open().await?;
        *self.instructions.lock().unwrap_or_else(PoisonError::into_inner) = instructions;
        let session = Arc::new(session);
        *slot = Some(Arc::clone(&session));
        Ok(session)
    }

    /// Drops the session after a failure that means the connection is gone, so the next call reconnects.
    async fn forget_if_dead(&self, session: &Arc<Session>, err: &McpError) {
        let dead =
            matches!(err, McpError::Closed { .. }) || session.is_closed() || session.peer().is_transport_closed();
        if !dead {
            return;
        }
        let mut slot = self.session.lock().await;
        if slot.as_ref().is_some_and(|current| Arc::ptr_eq(current, session)) {
            slot.take();
        }
    }

    async fn open(&self) -> Result<(Session, Option<String>)> {
        let session = match self.config.transport {
            McpTransport::Stdio => self.open_stdio().await?,
            McpTransport::Http => self.open_http().await?,
        };
        let instructions = session
            .peer()
            .peer_info()
            .and_then(|info| info.instructions.clone())
            .filter(|text| !text.trim().is_empty());
        tracing::debug!(server = %self.config.name, "mcp session opened");
        Ok((session, instructions))
    }

    async fn open_stdio(&self) -> Result<Session> {
        let server = self.config.name.clone();
        let Some(command) = self.config.command.as_deref().filter(|c| !c.trim().is_empty()) else {
            return Err(McpError::Config { server, message: "stdio transport needs `command`".into() });
        };
        // A program anyone can change runs what anyone wants, with the user's rights (red-team report, #22).
        if command.contains('/') {
            let work = self.config.cwd.as_deref().map(std::path::Path::new);
            let candidates = [Some(std::path::PathBuf::from(command)), work.map(|w| w.join(command))];
            for path in candidates.into_iter().flatten().filter(|p| p.is_file()) {
                if let Some(problem) = minibot_config::writable_by_anyone(&path) {
                    return Err(McpError::Config { server, message: format!("`command`: {problem}") });
                }
            }
        }
        let mut cmd = tokio::process::Command::new(command);
        cmd.args(&self.config.args);
        // A transport dropped without a graceful close kills the child's group; this lets tokio reap the child.
        cmd.kill_on_drop(true);
        // A non-empty `env` replaces the child's whole environment, as in 0.36: it keeps secrets of the daemon
        // away from third-party servers.
        if !self.config.env.is_empty() {
            cmd.env_clear();
            cmd.envs(&self.config.env);
        } else {
            // The inherited environment, without secrets: the assistant's own (its provider keys, the vault
            // password, `MINIBOT__…` overrides) and every variable that looks like a credential by name (`*_TOKEN`,
            // `*KEY*`, `*PASS*`, `*_PAT`, DSNs, …) or by value (`postgres://u:p@…`), which a config may read as
            // `${NAME}`. A third-party server (`npx …`) gets none of
            // them unless its `env` names them (red-team reports, #22 F4 and B4).
            for (name, value) in std::env::vars_os() {
                let secret = match (name.to_str(), value.to_str()) {
                    (Some(name), Some(value)) => minibot_config::is_secret_variable(name, value),
                    _ => true,
                };
                if secret {
                    cmd.env_remove(&name);
                }
            }
        }
        if let Some(cwd) = &self.config.cwd {
            cmd.current_dir(cwd);
        }
        // Its own process group, so closing the session also stops grandchildren (`npx`, `uv run`, shell
        // wrappers), which would otherwise outlive the server they launched.
        let mut wrapped = CommandWrap::from(cmd);
        wrapped.wrap(ProcessGroup::leader());
        let (transport, stderr) = ChildTransport::spawn(wrapped, &server).map_err(|source| {
            if source.kind() == std::io::ErrorKind::NotFound {
                McpError::CommandNotFound { server: server.clone(), command: command.to_string() }
            } else {
                McpError::Spawn { server: server.clone(), command: command.to_string(), source }
            }
        })?;
        let stderr = stderr.map(|stderr| StderrTail::start(stderr, server.clone()));
        self.initialize(client_config().serve(Inbound::new(transport, &server)), stderr).await
    }

    async fn open_http(&self) -> Result<Session> {
        let server = self.config.name.clone();
        let Some(url) = self.config.url.as_deref().filter(|u| !u.trim().is_empty()) else {
            return Err(McpError::Config { server, message: "http transport needs `url`".into() });
        };
        minibot_llm::install_crypto_provider();
        // The same cap as over stdio; `CappedClient` turns an answer over it into a too-large error.
        let config = capped_config(url);
        let mut headers = HashMap::new();
        // Every header goes out as written, `Authorization` included: rmcp's own `auth_header` would prefix
        // `Bearer ` to a `Basic …` credential. `auth_secret` has already become a `Bearer` header here.
        for (name, value) in &self.config.headers {
            let header_name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| McpError::Config { server: server.clone(), message: format!("header `{name}`: {e}") })?;
            let mut header_value = reqwest::header::HeaderValue::from_str(value)
                .map_err(|e| McpError::Config { server: server.clone(), message: format!("header `{name}`: {e}") })?;
            // Kept out of any Debug output of the request (an `auth_secret` is a vault value).
            header_value.set_sensitive(header_name == reqwest::header::AUTHORIZATION);
            headers.insert(header_name, header_value);
        }
        let client = CappedClient::new()
            .map_err(|e| McpError::Config { server: server.clone(), message: format!("HTTP client: {e}") })?;
        let transport = StreamableHttpClientTransport::with_client(client, config.custom_headers(headers));
        self.initialize(client_config().serve(Inbound::new(transport, &server)), None).await
    }

    async fn initialize<F, E>(&self, serve: F, stderr: Option<StderrTail>) -> Result<Session>
    where
        F: Future<Output = std::result::Result<Session, E>>,
        E: std::fmt::Display,
    {
        match tokio::time::timeout(self.timeout, serve).await {
            Ok(Ok(session)) => Ok(session),
            Ok(Err(err)) => {
                let mut message = err.to_string();
                if let Some(stderr) = stderr {
                    let lines = stderr.collect().await;
                    if !lines.is_empty() {
                        message.push_str("; stderr: ");
                        message.push_str(&lines.join(" | "));
                    }
                }
                Err(McpError::Connect { server: self.config.name.clone(), message })
            }
            Err(_) => Err(self.timeout_error("initialize")),
        }
    }

    fn request_error(&self, operation: &'static str, err: ServiceError) -> McpError {
        let server = self.config.name.clone();
        if let ServiceError::McpError(data) = &err
            && let Some(limit) = too_large(data)
        {
            return McpError::TooLarge { server, operation, limit };
        }
        match err {
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                McpError::Closed { server, operation, message: err.to_string() }
            }
            ServiceError::Timeout { .. } => self.timeout_error(operation),
            other => McpError::Request { server, operation, message: other.to_string() },
        }
    }

    fn timeout_error(&self, operation: &'static str) -> McpError {
        McpError::Timeout { server: self.config.name.clone(), operation, seconds: self.timeout.as_secs_f64() }
    }
}

/// `initialize` offers the newest protocol version that still has that handshake. rmcp's default, `LATEST`
/// (2026-07-28), is a revision without it, so offering it inside `initialize` names a version no server that
/// answers `initialize` speaks.
fn client_config() -> ClientConfig {
    ClientConfig::new(ClientCapabilities::default(), Implementation::new("minibot", env!("CARGO_PKG_VERSION")))
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
}

/// Ends a session: cancelling it drops the transport, which stops a stdio child.
async fn shut(session: Arc<Session>) {
    match Arc::try_unwrap(session) {
        Ok(session) => {
            let _ = session.cancel().await;
        }
        // Still in use by a running call: the session closes when that call drops its handle.
        Err(shared) => drop(shared),
    }
}
