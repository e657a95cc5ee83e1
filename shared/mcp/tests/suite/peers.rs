//! Finding and starting the peer servers.

use minibot_agent::{DynTool, ToolContext};
use minibot_config::Config;
use minibot_config::schema::{McpMode, McpSection, McpServerSection, McpTransport};
use minibot_mcp::McpHub;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

const SETUP: &str = "run scripts/setup-mcp-peers.sh (MINIBOT_MCP_PEERS overrides the install dir)";

pub fn peers_dir() -> PathBuf {
    match std::env::var_os("MINIBOT_MCP_PEERS") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/minibot-rs/mcp-peers"),
    }
}

pub fn everything_js() -> String {
    let path = peers_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(path.is_file(), "server-everything missing at {}: {SETUP}", path.display());
    path.to_string_lossy().into_owned()
}

pub fn python() -> String {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let ok = std::process::Command::new(&python)
        .args(["-c", "import mcp.server.fastmcp"])
        .output()
        .is_ok_and(|out| out.status.success());
    assert!(ok, "python package `mcp<2` (FastMCP) missing for {python}: {SETUP}");
    python
}

pub fn fixture() -> String {
    format!("{}/tests/fixtures/fastmcp_server.py", env!("CARGO_MANIFEST_DIR"))
}

pub fn everything_stdio(name: &str, mode: McpMode) -> McpServerSection {
    McpServerSection {
        name: name.into(),
        mode,
        transport: McpTransport::Stdio,
        command: Some("node".into()),
        args: vec![everything_js(), "stdio".into()],
        ..Default::default()
    }
}

/// The FastMCP fixture, steered by `state` (see the fixture's docstring).
pub fn fixture_server(name: &str, mode: McpMode, state: &std::path::Path) -> McpServerSection {
    let mut env = std::collections::BTreeMap::new();
    env.insert("FIXTURE_STATE".to_string(), state.to_string_lossy().into_owned());
    // A non-empty env replaces the child's environment; the interpreter still needs these.
    for key in ["PATH", "HOME", "PYENV_ROOT", "PYENV_VERSION"] {
        if let Ok(value) = std::env::var(key) {
            env.insert(key.to_string(), value);
        }
    }
    McpServerSection {
        name: name.into(),
        mode,
        command: Some(python()),
        args: vec![fixture()],
        env,
        ..Default::default()
    }
}

pub fn hostile_fixture() -> String {
    format!("{}/tests/fixtures/hostile_server.py", env!("CARGO_MANIFEST_DIR"))
}

/// The hostile fixture (see its docstring), with `env` added to what the interpreter needs.
pub fn hostile_server(name: &str, mode: McpMode, env: &[(&str, String)]) -> McpServerSection {
    let mut server = fixture_server(name, mode, std::path::Path::new(""));
    server.env.remove("FIXTURE_STATE");
    server.env.extend(env.iter().map(|(key, value)| (key.to_string(), value.clone())));
    server.args = vec![hostile_fixture()];
    server
}

pub fn section(servers: Vec<McpServerSection>) -> McpSection {
    McpSection { enabled: true, timeout_seconds: 20.0, servers, ..Default::default() }
}

/// A config holding `mcp`, with relative paths under the crate folder.
pub fn config(mcp: &McpSection) -> Config {
    let mut config = Config::defaults(env!("CARGO_MANIFEST_DIR"));
    config.tools.mcp = mcp.clone();
    config
}

pub async fn start(mcp: &McpSection) -> Arc<McpHub> {
    McpHub::start(&config(mcp)).await.expect("hub starts")
}

pub async fn start_subset(mcp: &McpSection, names: &[String]) -> Arc<McpHub> {
    McpHub::start_subset(&config(mcp), names).await.expect("hub starts")
}

pub fn tool(hub: &McpHub, name: &str) -> Arc<dyn DynTool> {
    hub.tools()
        .into_iter()
        .find(|t| t.name() == name)
        .unwrap_or_else(|| panic!("no tool {name}; have {:?}", names(hub)))
}

pub fn names(hub: &McpHub) -> Vec<String> {
    hub.tools().iter().map(|t| t.name().to_string()).collect()
}

pub async fn call(tool: &Arc<dyn DynTool>, args: Value) -> Value {
    tool.call_json(args, &ToolContext::default()).await.expect("tool result")
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// server-everything over streamable HTTP on `port`; killed when dropped.
pub struct HttpEverything {
    _child: tokio::process::Child,
    pub url: String,
}

impl HttpEverything {
    pub async fn spawn(port: u16) -> Self {
        let child = tokio::process::Command::new("node")
            .arg(everything_js())
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn node");
        let deadline = Instant::now() + Duration::from_secs(30);
        while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
            assert!(Instant::now() < deadline, "server-everything did not listen on {port}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Self { _child: child, url: format!("http://127.0.0.1:{port}/mcp") }
    }
}

pub fn http_server(name: &str, mode: McpMode, url: &str) -> McpServerSection {
    McpServerSection {
        name: name.into(),
        mode,
        transport: McpTransport::Http,
        url: Some(url.into()),
        headers: [("X-Minibot-Test".to_string(), "1".to_string())].into_iter().collect(),
        ..Default::default()
    }
}

/// The FastMCP fixture over streamable HTTP on `port`, with its `request_headers` tool; killed when dropped.
pub struct HttpFixture {
    _child: tokio::process::Child,
    pub url: String,
}

impl HttpFixture {
    pub async fn spawn(port: u16) -> Self {
        Self::spawn_script(port, &fixture(), &[("FIXTURE_HTTP_PORT", port.to_string())]).await
    }

    /// The hostile fixture over HTTP; `json` makes it answer with plain JSON bodies instead of SSE streams.
    pub async fn hostile(port: u16, json: bool) -> Self {
        let env = [("HOSTILE_HTTP_PORT", port.to_string()), ("HOSTILE_JSON_RESPONSE", u8::from(json).to_string())];
        Self::spawn_script(port, &hostile_fixture(), &env).await
    }

    async fn spawn_script(port: u16, script: &str, env: &[(&str, String)]) -> Self {
        let child = tokio::process::Command::new(python())
            .arg(script)
            .envs(env.iter().map(|(key, value)| (key, value)))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn the fixture");
        let deadline = Instant::now() + Duration::from_secs(30);
        while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
            assert!(Instant::now() < deadline, "the fixture did not listen on {port}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Self { _child: child, url: format!("http://127.0.0.1:{port}/mcp") }
    }
}

/// The headers the fixture's `request_headers` tool saw on the call, through the bridge binding.
pub async fn headers_seen(hub: &McpHub, server: &str) -> serde_json::Map<String, Value> {
    let out = call(&tool(hub, &format!("mcp_{server}__request_headers")), serde_json::json!({})).await;
    assert_eq!(out["ok"], true, "{out}");
    serde_json::from_str(out["result"].as_str().expect("text result")).expect("headers as JSON")
}
