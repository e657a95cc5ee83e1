//! `minibot-worker`: runs specialist agents for tasks the orchestrator queues. This version checks its config and
//! says what it would serve; consuming tasks arrives with the task queue.

use clap::Parser;
use minibot_config::Config;
use std::path::PathBuf;
use std::process::ExitCode;

/// minibot task worker.
#[derive(Debug, Parser)]
#[command(name = "minibot-worker", version, about)]
struct Cli {
    /// Config file (default: $MINIBOT_CONFIG, then ./config.toml).
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match Config::load(cli.config.as_deref()) {
        Ok(config) => {
            println!(
                "minibot-worker: config {} is valid (tasks backend: {}). This version does not consume tasks yet; \
                 task processing arrives with the task queue.",
                config.origin(),
                config.tasks.backend.as_str()
            );
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("minibot-worker: {error}");
            ExitCode::from(2)
        }
    }
}
