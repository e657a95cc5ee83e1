//! The terminal channel: an interactive REPL (line editing via rustyline, [`run_repl`]) or a one-shot `--once`
//! run ([`run_once`]); [`Console`] is the channel actor both register.
//!
//! The REPL reads lines on its own thread so the user can type while a turn runs (the line is steered into the
//! turn); replies, "running tool X" notices and a status line are printed above the prompt. Slash commands are
//! the console's own and never reach the model. Ctrl-C during a turn stops the turn; Ctrl-C at an idle prompt
//! twice exits.

mod actor;
mod approvals;
mod awaiting;
mod banner;
mod commands;
mod input;
mod once;
mod repl;
mod screen;

pub use actor::{CAPABILITIES, CHANNEL, Console, OnceStatus};
pub use awaiting::Awaiting;
pub use once::run_once;
pub use repl::run_repl;
pub use screen::{PlainScreen, Screen, TurnStatus};
