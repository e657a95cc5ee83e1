//! `minibot`: the orchestrator binary. Parses the command line, loads the config and hands over to
//! [`minibot_orchestrator::boot`]; `minibot worker` runs a task worker in this process instead, and
//! `minibot vault` manages the secrets vault without loading the rest, and `minibot queue` looks after the task
//! queue.

mod queue_cli;
mod vault_cli;

use clap::Parser;
use minibot_config::Config;
use minibot_orchestrator::cli::{Cli, Command};
use minibot_orchestrator::{boot, logging, terminal_text};
use std::process::ExitCode;

fn main() -> ExitCode {
    // First, before any thread: a process started as the sandbox helper becomes it here.
    minibot_sandbox::serve_if_asked();
    let mut cli = Cli::parse();
    if let Some(Command::Vault(args)) = cli.command.take_if(|c| matches!(c, Command::Vault(_))) {
        return vault_cli::run(cli.config.as_deref(), args);
    }
    match run(cli) {
        Ok(code) => code,
        Err(error) => {
            // An error can quote what a server or a file said; it reaches the terminal as text only.
            eprintln!("minibot: {}", terminal_text::for_terminal(&format!("{error:#}")));
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let config = match &cli.command {
        Some(Command::Worker(args)) => minibot_worker::load_config(cli.config.as_deref(), args.secrets_from_stdin)?,
        _ => Config::load(cli.config.as_deref())?,
    };
    logging::init(&config, cli.verbose)?;
    if let Some(Command::Queue(args)) = &cli.command {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        return runtime.block_on(queue_cli::run(&config, &args.action));
    }
    if matches!(cli.command, Some(Command::Worker(_))) {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
        runtime.block_on(minibot_worker::run(config))?;
        return Ok(ExitCode::SUCCESS);
    }
    config.main_llm().require_key(&config.origin())?;
    let code = actix::System::new().block_on(boot::run(config, cli.command))?;
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}
