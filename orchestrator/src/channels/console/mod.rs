//! The terminal channel: an interactive REPL (line editing via rustyline, [`run_repl`]) or a one-shot `--once`
//! run ([`run_once`]); [`Console`] is the channel actor both register.
//!
//! The REPL reads lines on its own thread so the user can type while a turn runs (the line is steered into the
//! turn); replies and "running tool X" notices are printed above the prompt. Ctrl-C during a turn stops the
//! turn; Ctrl-C at an idle prompt twice exits.

mod actor;
mod approvals;
mod once;
mod repl;

pub use actor::{Awaiting, CAPABILITIES, CHANNEL, Console, OnceStatus, PlainScreen, Screen};
pub use once::run_once;
pub use repl::run_repl;
