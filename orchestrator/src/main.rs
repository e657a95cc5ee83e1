//! `minibot`: the orchestrator binary. Parses the command line, loads the config and hands over to
//! [`minibot_orchestrator::boot`]; `minibot worker` runs a task worker in this process instead, and
//! `minibot vault` manages the secrets vault without loading the rest, and `minibot queue` looks after the task
//! queue.

mod queue_cli;
mod vault_cli;

use clap::Parser;
use minibot_config::Config;
use minibot_orchestrator::cli::{Cli, Command};
use minibot_orchestrator::{boot, doctor, logging, setup, terminal_text};
use std::process::ExitCode;

fn main() -> ExitCode {
    // First, before any thread: a process started as the sandbox helper becomes it here.
    minibot_sandbox::serve_if_asked();
    // Likewise a process started to run a codemode script (run_tools_script) runs it here.
    minibot_codemode::serve_if_asked();
    let mut cli = Cli::parse();
    if let Some(Command::Vault(args)) = cli.command.take_if(|c| matches!(c, Command::Vault(_))) {
        return vault_cli::run(cli.config.as_deref(), args);
    }
    if let Some(Command::Trust { path }) = &cli.command {
        return trust(path.as_deref().or(cli.config.as_deref()));
    }
    // Both work before (init) or despite (doctor) a config that does not load, so they load it themselves.
    let early = match cli.command.take_if(|c| matches!(c, Command::Init(_) | Command::Doctor(_))) {
        Some(Command::Init(args)) => Some(setup::run(cli.config.as_deref(), args)),
        Some(Command::Doctor(args)) => Some(doctor::run(cli.config.as_deref(), args)),
        _ => None,
    };
    if let Some(outcome) = early {
        return match outcome {
            Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
            Err(error) => {
                eprintln!("minibot: {}", terminal_text::for_terminal(&format!("{error:#}")));
                ExitCode::from(2)
            }
        };
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
    if !matches!(cli.command, Some(Command::Worker(_))) {
        say_which_config(&config, cli.config.is_some());
    }
    if !matches!(cli.command, Some(Command::Worker(_) | Command::Queue(_))) {
        ready_to_start(&config, matches!(cli.command, None | Some(Command::Run)))?;
    }
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
    let code = actix::System::new().block_on(boot::run(config, cli.command))?;
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}

/// `minibot trust [PATH]`: records the folder's config file, as it is now, as the user's choice.
fn trust(path: Option<&std::path::Path>) -> ExitCode {
    let file = path.map_or_else(|| std::path::PathBuf::from("config.toml"), std::path::Path::to_path_buf);
    let Some(dirs) = minibot_config::PlatformDirs::current() else {
        eprintln!("minibot: no home folder, so there is nowhere to record trust; pass --config or set MINIBOT_CONFIG");
        return ExitCode::from(2);
    };
    if !file.exists() {
        eprintln!(
            "minibot: {}",
            terminal_text::for_terminal(&minibot_config::trust::Untrusted::Missing(file.clone()).to_string())
        );
        return ExitCode::from(2);
    }
    // Read as the assistant reads it, without the vault: only the files it names are needed.
    let config = match Config::load_with(Some(&file), minibot_config::Unlock::Skip) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("minibot: {}", terminal_text::for_terminal(&format!("{error:#}")));
            return ExitCode::from(2);
        }
    };
    match minibot_config::trust::record(&dirs, &file, &config) {
        Ok(real) => {
            println!(
                "Trusted {} as it is now, with the files in its folder that it runs or reads as instructions \
                 (MCP servers' scripts, prompts, agents). After any of them changes, run `minibot trust` again.",
                terminal_text::for_terminal(&real.display().to_string())
            );
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("minibot: {}", terminal_text::for_terminal(&error.to_string()));
            ExitCode::from(2)
        }
    }
}

/// A `./config.toml` found in the working folder wins over the user's own config file, so a folder someone else
/// made (a cloned project) decides which assistant runs, with which vault and which server. When the user has a
/// config of their own, say on stderr which one this run uses, every time.
fn say_which_config(config: &Config, explicit: bool) {
    if explicit || std::env::var_os("MINIBOT_CONFIG").is_some_and(|v| !v.is_empty()) {
        return;
    }
    let (Some(source), Some(own)) = (&config.source, Config::default_config_file()) else { return };
    if own.exists() && !config.is_platform_file() {
        eprintln!(
            "minibot: using {} (found in this folder), not your own {}",
            terminal_text::for_terminal(&source.display().to_string()),
            own.display()
        );
    }
}

/// Refuses a start that cannot work, naming every reason at once (a missing key and, for the daemon, no
/// channel), so that fixing one does not just uncover the next. Nothing is written before: no log folder, no
/// database.
fn ready_to_start(config: &Config, daemon: bool) -> anyhow::Result<()> {
    let mut problems = Vec::new();
    if let Err(missing) = config.main_llm().require_key(&config.origin()) {
        problems.push(missing.to_string());
    }
    if daemon && let Err(error) = minibot_orchestrator::daemon::check_channels(config) {
        problems.push(format!("{error:#}"));
    }
    if problems.is_empty() {
        return Ok(());
    }
    if config.source.is_none() && !problems.iter().any(|p| p.contains("minibot init")) {
        problems.push("`minibot init` writes a config file step by step".into());
    }
    anyhow::bail!("{}", problems.join("\nminibot: "))
}
