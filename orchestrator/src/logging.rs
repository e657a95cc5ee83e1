//! Logs go as logfmt lines to `logs/minibot.log` (next to the config file) and, with `--verbose`, to stderr.
//! `RUST_LOG` wins over `[runtime].log_level` / `[logging].log_level`. Both outputs pass through a redactor
//! ([`Config::redactor`]) of the vault's values and every configured credential, so no known secret value is
//! ever written to either. The stderr copy also loses its control characters ([`TerminalSafe`]): log values
//! quote what the model and tools said, and stderr is the user's terminal.

use crate::terminal_text::TerminalSafe;
use anyhow::Context;
use minibot_config::Config;
use std::fs::OpenOptions;
use std::sync::Arc;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

pub fn init(config: &Config, verbose: bool) -> anyhow::Result<()> {
    let level = config.runtime.log_level.clone().unwrap_or_else(|| config.logging.log_level.clone());
    let default_directive = match level.to_ascii_lowercase().as_str() {
        "critical" | "error" => "error",
        "warning" | "warn" => "warn",
        "debug" => "debug",
        "trace" => "trace",
        _ => "info",
    };
    let filter = || {
        EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| EnvFilter::new(format!("{default_directive},sqlx=warn,hyper=warn,reqwest=warn")))
    };
    let dir = config.log_dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create log folder {}", dir.display()))?;
    let path = dir.join("minibot.log");
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .with_context(|| format!("cannot open log file {}", path.display()))?;
    let redactor = config.redactor();
    // Each event is formatted whole and written with one append, so lines of concurrent events never mix.
    let file = Arc::new(file);
    let file_writer = {
        let redactor = redactor.clone();
        move || redactor.writer(Arc::clone(&file))
    };
    let file_layer = tracing_subscriber::fmt::layer()
        .event_format(tracing_logfmt::EventsFormatter::default())
        .fmt_fields(tracing_logfmt::FieldsFormatter::default())
        .with_writer(file_writer)
        .with_filter(filter());
    let stderr_layer = verbose.then(|| {
        tracing_subscriber::fmt::layer()
            .event_format(tracing_logfmt::EventsFormatter::default())
            .fmt_fields(tracing_logfmt::FieldsFormatter::default())
            .with_writer(move || redactor.writer(TerminalSafe(std::io::stderr())))
            .with_filter(filter())
    });
    tracing_subscriber::registry().with(file_layer).with(stderr_layer).try_init().ok();
    Ok(())
}
