//! Codemode: `run_tools_script`, a tool that runs a short Python script calling the agent's other tools and
//! returns only what the script printed and its final value (reference 3.15, agent-tools "Codemode scripts").
//!
//! Scripts run in [Monty](https://github.com/pydantic/monty), a Python interpreter in Rust, each in a child
//! process of its own (`child`, started from this same binary: call [`serve_if_asked`] first in `main`), with no
//! file system, network or environment (OS calls are refused), so every effect is a tool call. The child's side
//! (`engine`) hands a call over a pipe to the parent (`host`), which runs the calls a script gathers at the same
//! time, each through the agent's approval gate and reported with the script's call id as `parent_call_id`
//! ([`minibot_agent::NestedCalls`]). The limits: wall-clock time that stops while an approval is pending
//! ([`clock`]), after which the child is killed; tool calls per script; memory (`limits`: an address-space cap
//! on the child, and `max_memory_mb` between interpreter steps); output size (`output`).
//!
//! ```ignore
//! fn main() {
//!     minibot_sandbox::serve_if_asked();
//!     minibot_codemode::serve_if_asked();
//!     // …
//!     let tools = minibot_codemode::with_codemode(&tools, &config.tools.codemode)?;
//! }
//! ```

pub mod catalog;
mod child;
pub mod clock;
mod convert;
mod engine;
mod helpers;
mod host;
mod limits;
mod locate;
mod output;
mod protocol;
mod tool;
mod wiring;

pub use catalog::{Catalog, NEVER_EXPOSED, TOOL_NAME, python_ident};
pub use child::serve_if_asked;
pub use tool::RunToolsScript;
pub use wiring::{ExcludeError, with_codemode};
