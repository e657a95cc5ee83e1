#![allow(clippy::expect_used, clippy::unwrap_used)]
//! Integration tests against real MCP servers (server-everything, a FastMCP fixture).
//! Install them with `scripts/setup-mcp-peers.sh`.

mod suite;
