use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// minibot: a self-hosted personal AI assistant.
#[derive(Debug, Parser)]
#[command(name = "minibot", version, about)]
pub struct Cli {
    /// Config file (default: $MINIBOT_CONFIG, then ./config.toml; no file means defaults).
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Also write logs to stderr.
    #[arg(long, short, global = true)]
    pub verbose: bool,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Chat in the terminal.
    Console(ConsoleArgs),
    /// Run a task worker (what `minibot-worker` runs; the orchestrator starts local ones itself).
    Worker,
}

#[derive(Debug, Args)]
pub struct ConsoleArgs {
    /// Send one message, print the answer and exit (`-` reads the message from stdin).
    #[arg(long, value_name = "TEXT")]
    pub once: Option<String>,
    /// Plain prompt loop (no line editing).
    #[arg(long)]
    pub plain: bool,
    #[arg(long, default_value_t = 1)]
    pub chat_id: i64,
    #[arg(long, default_value_t = 1)]
    pub user_id: i64,
    /// With --once: how long to wait for the answer.
    #[arg(long, default_value_t = 120.0)]
    pub timeout_seconds: f64,
}
