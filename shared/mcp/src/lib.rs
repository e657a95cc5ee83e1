//! MCP client for minibot: connections to configured servers and the tools that expose them to agents.
//!
//! - [`McpServer`]: one configured server. Owns its session (stdio child or streamable HTTP), reconnects when the
//!   session is gone, applies the per-request timeout and the server's tool filters.
//! - Bindings, all [`DynTool`](minibot_agent::DynTool)s: bridge mode exposes one tool per remote tool
//!   (`<prefix>_<server>__<remote>`); lazy mode exposes `<prefix>_<server>__list_tools` and
//!   `<prefix>_<server>__call_tool`. They return results whole and declare the server's `inline_result_chars` as
//!   [`spill_after_chars`](minibot_agent::DynTool::spill_after_chars): register them through
//!   [`wrap_with_spill`](minibot_agent::wrap_with_spill), which spills a longer result to a file or cuts it.
//! - [`McpHub`]: every server of one agent. Connects them concurrently, holds the current tool snapshot and
//!   server instructions, and reloads them (`reload_mcp`).
//! - A server is untrusted input. A tool whose name providers would refuse, or that two tools share, is dropped
//!   (`names`); `instructions` are capped and fenced as untrusted in the prompt (`untrusted`); stderr is cut and
//!   rate-limited on its way to the log (`stderr`); an answer over [`MAX_MESSAGE_BYTES`] fails its request as too
//!   large instead of timing out or losing the connection (`oversize`, `child`, `http`); notifications are
//!   dropped and logged at debug level only (`inbound`).
//!
//! ```no_run
//! # async fn demo(config: &minibot_config::Config) -> minibot_mcp::Result<()> {
//! let hub = minibot_mcp::McpHub::start(config).await?;
//! let tools = hub.tools(); // register these with the agent
//! let names: Vec<String> = tools.iter().map(|t| t.name().to_string()).collect();
//! let fragments = hub.instructions_for(&names); // system-prompt fragments
//! hub.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! This is the only crate that depends on `rmcp`; its types stay out of the public API.

mod auth;
mod bridge;
mod child;
mod http;
mod hub;
mod inbound;
mod lazy;
mod names;
mod oversize;
mod paths;
mod result;
mod schema;
mod server;
mod stderr;
mod untrusted;

pub use bridge::BridgeTool;
pub use hub::{McpHub, ReloadReport, ServerReload, ServerStatus, bindings};
pub use lazy::{LazyCallTool, LazyListTool};
pub use names::MAX_TOOL_NAME_CHARS;
pub use oversize::MAX_MESSAGE_BYTES;
pub use result::CallOutput;
pub use schema::{drop_nulls, normalize_input_schema};
pub use server::{McpServer, RemoteTool};
pub use stderr::{
    BURST_LINES as STDERR_BURST_LINES, LINES_PER_SECOND as STDERR_LINES_PER_SECOND,
    MAX_LINE_BYTES as MAX_STDERR_LINE_BYTES,
};
pub use untrusted::{MAX_INSTRUCTIONS_BYTES, fence_instructions};

/// Name of the tool that reloads every server.
pub const RELOAD_TOOL_NAME: &str = "reload_mcp";

#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("MCP server `{server}`: {message}")]
    Config { server: String, message: String },
    #[error("MCP server `{server}`: command `{command}` not found (is it installed and on PATH?)")]
    CommandNotFound { server: String, command: String },
    #[error("MCP server `{server}`: cannot start `{command}`: {source}")]
    Spawn {
        server: String,
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("MCP server `{server}`: initialize failed: {message}")]
    Connect { server: String, message: String },
    #[error("MCP server `{server}`: {operation} got no answer within {seconds}s")]
    Timeout { server: String, operation: &'static str, seconds: f64 },
    #[error("MCP server `{server}`: connection lost during {operation}: {message}")]
    Closed { server: String, operation: &'static str, message: String },
    #[error("MCP server `{server}`: {operation} failed: {message}")]
    Request { server: String, operation: &'static str, message: String },
    /// The server answered, but its answer was over [`MAX_MESSAGE_BYTES`] and was dropped unread.
    #[error("MCP server `{server}`: the {operation} result is too large: it exceeded {limit} bytes; ask for less")]
    TooLarge { server: String, operation: &'static str, limit: usize },
}

pub type Result<T> = std::result::Result<T, McpError>;

/// Name of a binding: `<prefix>_<server>__<suffix>`.
pub fn binding_name(prefix: &str, server: &str, suffix: &str) -> String {
    format!("{prefix}_{server}__{suffix}")
}
