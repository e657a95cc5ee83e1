//! Codemode: `run_tools_script`, a tool that runs a short Python script calling the agent's other tools and
//! returns only what the script printed and its final value (reference 3.15, agent-tools "Codemode scripts").
//!
//! Scripts run in [Monty](https://github.com/pydantic/monty), a Python interpreter in Rust, inside this process:
//! each on a thread of its own (`engine`), with no file system, network or environment (OS calls are refused),
//! so every effect is a tool call. A call goes to the async side (`host`), which runs the calls a script
//! gathers at the same time, each through the agent's approval gate and reported with the script's call id as
//! `parent_call_id` ([`minibot_agent::NestedCalls`]). The limits: wall-clock time that stops while an approval is
//! pending ([`clock`]), tool calls per script, memory (`alloc`, with [`ScriptAllocator`] installed in the
//! binary) and output size (`output`).
//!
//! ```ignore
//! let tools = minibot_codemode::with_codemode(&tools, &config.tools.codemode)?;
//! ```

mod alloc;
pub mod catalog;
pub mod clock;
mod convert;
mod engine;
mod helpers;
mod host;
mod output;
mod protocol;
mod tool;
mod wiring;

pub use alloc::ScriptAllocator;
pub use catalog::{Catalog, NEVER_EXPOSED, TOOL_NAME, python_ident};
pub use tool::RunToolsScript;
pub use wiring::{ExcludeError, with_codemode};
