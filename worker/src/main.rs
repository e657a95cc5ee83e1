//! `minibot-worker`: consumes tasks from the configured queue and runs them. Start any number of them.

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

/// minibot task worker.
#[derive(Debug, Parser)]
#[command(name = "minibot-worker", version, about)]
struct Cli {
    /// Config file (default: $MINIBOT_CONFIG, then ./config.toml, then ~/.config/minibot/config.toml).
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
    /// Also log to stderr.
    #[arg(long, short)]
    verbose: bool,
    /// Read the unlocked vault's secrets from stdin instead of opening the vault (how an orchestrator hands
    /// them to a worker it starts; see docs/secrets.md).
    #[arg(long, hide = true)]
    secrets_from_stdin: bool,
}

fn main() -> ExitCode {
    // First, before any thread: a process started as the sandbox helper becomes it here.
    minibot_sandbox::serve_if_asked();
    // Likewise a process started to run a codemode script (run_tools_script) runs it here.
    minibot_codemode::serve_if_asked();
    let cli = Cli::parse();
    let config = match minibot_worker::load_config(cli.config.as_deref(), cli.secrets_from_stdin) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("minibot-worker: {error:#}");
            return ExitCode::from(2);
        }
    };
    init_logging(cli.verbose, config.redactor());
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("minibot-worker: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(minibot_worker::run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("minibot-worker: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Logs to stderr through the config's redactor (the same set as the orchestrator's), so no known secret value
/// reaches the output.
fn init_logging(verbose: bool, redactor: minibot_vault::Redactor) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(if verbose { "info,sqlx=warn" } else { "warn" }));
    let layer = tracing_subscriber::fmt::layer()
        .event_format(tracing_logfmt::EventsFormatter::default())
        .fmt_fields(tracing_logfmt::FieldsFormatter::default())
        .with_writer(move || redactor.writer(std::io::stderr()));
    tracing_subscriber::registry().with(filter).with(layer).try_init().ok();
}
