//! /mcp: the MCP servers (`[tools.mcp]`), their state and how many tools each gives the assistant.

use super::browse::{self, count};
use super::layout::page;
use crate::backstage::McpServerRow;
use crate::state::WebState;
use actix_web::{HttpResponse, http::StatusCode, web};
use maud::{Markup, html};

const TITLE: &str = "MCP servers";
const PATH: &str = "/mcp";

pub async fn handler(state: web::Data<WebState>) -> HttpResponse {
    let servers = state.backstage.overview().await.mcp;
    browse::html_response(StatusCode::OK, page(TITLE, PATH, !state.credentials.is_open(), render(&servers)))
}

pub fn render(servers: &[McpServerRow]) -> Markup {
    let tools: usize = servers.iter().map(|s| s.tools).sum();
    html! {
        h1 { (TITLE) }
        @if servers.is_empty() {
            p #empty { "No MCP servers are running: none is configured, or " code { "[tools.mcp] enabled = false" } "." }
        } @else {
            p #total {
                (count(u64::try_from(servers.len()).unwrap_or(0), "server", "servers")) ", "
                (count(u64::try_from(tools).unwrap_or(0), "tool", "tools"))
            }
            table #mcp {
                thead { tr { th { "Server" } th { "State" } th { "Tools" } } }
                tbody {
                    @for server in servers {
                        tr.failed[server.state.starts_with("failed")] {
                            td { (server.name) } td { (server.state) } td { (server.tools) }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_are_listed_with_their_state_escaped() {
        let servers = [
            McpServerRow { name: "files".into(), state: "running".into(), tools: 4 },
            McpServerRow { name: "<script>x</script>".into(), state: "failed: <b>exit 1</b>".into(), tools: 0 },
        ];
        let page = render(&servers).into_string();
        assert!(page.contains("2 servers, 4 tools") && page.contains("<td>files</td>"), "{page}");
        assert!(page.contains(r#"<tr class="failed">"#), "{page}");
        assert!(!page.contains("<script>") && !page.contains("<b>") && page.contains("&lt;b&gt;exit 1"), "{page}");
        assert!(render(&[]).into_string().contains("No MCP servers are running"));
    }
}
