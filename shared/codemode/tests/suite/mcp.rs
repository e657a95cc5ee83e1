//! MCP tools from scripts, against the real server-everything: a bridge tool and a lazy server's call tool both
//! return the result dict, and a server error comes back as data, not an exception.

use super::{Env, ok, run};
use minibot_agent::ToolRegistry;
use minibot_config::Config;
use std::path::PathBuf;
use std::sync::Arc;

fn everything_js() -> String {
    let peers = match std::env::var_os("MINIBOT_MCP_PEERS") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/minibot-rs/mcp-peers"),
    };
    let path = peers.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(path.is_file(), "server-everything missing at {}: run scripts/setup-mcp-peers.sh", path.display());
    path.to_string_lossy().into_owned()
}

async fn hub(mode: &str) -> (Arc<minibot_mcp::McpHub>, ToolRegistry) {
    let toml = format!(
        "[tools.mcp]\nenabled = true\ntimeout_seconds = 20\n[[tools.mcp.servers]]\nname = \"ev\"\n\
         transport = \"stdio\"\nmode = \"{mode}\"\ncommand = \"node\"\nargs = [\"{}\", \"stdio\"]\n",
        everything_js()
    );
    let config = Config::from_toml(&toml, "test.toml", std::env::temp_dir(), &|_| None).unwrap();
    let hub = minibot_mcp::McpHub::start(&config).await.unwrap();
    let mut tools = ToolRegistry::new();
    for tool in hub.tools() {
        tools.register(tool);
    }
    (hub, tools)
}

#[tokio::test]
async fn a_bridge_tool_returns_the_result_dict() {
    let (hub, tools) = hub("bridge").await;
    let env = Env::over(&tools, "");
    let code = "import asyncio\n\
                echo, total = await asyncio.gather(tools.mcp_ev__echo(message='hi'), tools.mcp_ev__get_sum(a=2, b=3))\n\
                bad = await tools.mcp_ev__get_sum(a='x', b=3)\n\
                {'echo': [echo['ok'], echo['server'], echo['tool'], echo['is_error'], 'hi' in echo['result']], \
                 'sum': '5' in total['result'], 'bad_ok': bad['ok']}";
    let turn = run(&env, code).await;
    let result = ok(&turn);
    assert_eq!(result["echo"], serde_json::json!([true, "ev", "echo", false, true]), "{result}");
    assert_eq!(result["sum"], true, "{result}");
    assert_eq!(result["bad_ok"], false, "a server error is data: {result}");
    hub.shutdown().await;
}

#[tokio::test]
async fn a_lazy_server_is_listed_and_called_through_its_call_tool() {
    let (hub, tools) = hub("lazy").await;
    let env = Env::over(&tools, "");
    let code = "listed = await tools.mcp_ev__list_tools()\n\
                names = [t['name'] for t in listed['tools']]\n\
                out = await tools.mcp_ev__call_tool(tool_name='echo', arguments={'message': 'lazy'})\n\
                {'has_echo': 'echo' in names, 'ok': out['ok'], 'echoed': 'lazy' in out['result']}";
    let turn = run(&env, code).await;
    assert_eq!(ok(&turn), &serde_json::json!({"has_echo": true, "ok": true, "echoed": true}));
    hub.shutdown().await;
}
