//! Logs go as logfmt lines to `logs/minibot.log` (next to the config file) and, with `--verbose`, to stderr.
//! `RUST_LOG` wins over `[runtime].log_level` / `[logging].log_level`. Both outputs pass through a
//! [`Redactor`] of the vault's values and the configured provider keys, so no known secret value is ever written
//! to either.

use anyhow::Context;
use minibot_config::Config;
use minibot_vault::Redactor;
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
    let dir = config.resolve_path("logs");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create log folder {}", dir.display()))?;
    let path = dir.join("minibot.log");
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .with_context(|| format!("cannot open log file {}", path.display()))?;
    let redactor = log_redactor(config);
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
            .with_writer(move || redactor.writer(std::io::stderr()))
            .with_filter(filter())
    });
    tracing_subscriber::registry().with(file_layer).with(stderr_layer).try_init().ok();
    Ok(())
}

/// The vault's values and every provider key: `[llm] api_key`, each `[providers.*] api_key`, and the main
/// endpoint's key, which may come from the environment. A key written in plain text is as secret as one in the
/// vault.
fn log_redactor(config: &Config) -> Redactor {
    let main_key = config.main_llm().api_key;
    let keys = std::iter::once(config.llm.api_key.as_str())
        .chain(config.providers.values().map(|provider| provider.api_key.as_str()))
        .chain(std::iter::once(main_key.as_str()));
    Redactor::from_values(config.secrets.values().chain(keys))
}

#[cfg(test)]
mod tests {
    #[test]
    fn plain_text_provider_keys_are_masked_in_logs() {
        let toml =
            "[llm]\napi_key = \"sk-llm-key-1\"\n[providers.gw]\napi_format = \"openai\"\napi_key = \"sk-gw-key-2\"\n";
        let config = minibot_config::Config::from_toml(toml, "test.toml", std::env::temp_dir(), &|_| None).unwrap();
        let line = super::log_redactor(&config).redact("rejected sk-llm-key-1 and sk-gw-key-2").into_owned();
        assert_eq!(line, "rejected *** and ***");
    }
}
