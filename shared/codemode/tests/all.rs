//! run_tools_script end to end: a scripted model calls it through the real agent loop, over real tools (bash in
//! its sandbox, wait, current_datetime, a real MCP server).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
