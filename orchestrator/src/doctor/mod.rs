//! `minibot doctor`: checks a setup and says how to fix what is broken, one line per check. It loads the config
//! itself, so a config that does not load is reported like any other problem and the checks that do not need
//! it still run. The exit code is 1 when something a user needs is broken (the config or its vault, the
//! provider, an enabled channel, a configured broker or MCP server, a command sandbox the config asks for);
//! warnings do not change it. Secrets are never printed: only where they come from.

mod host;
mod local;
mod network;
mod report;
mod services;

use clap::Args;
use local::Loaded;
use report::Report;
use std::io::Write;
use std::path::Path;

#[derive(Debug, Args)]
pub struct DoctorArgs {}

/// Runs every check; returns the exit code.
pub fn run(config: Option<&Path>, _args: DoctorArgs) -> anyhow::Result<i32> {
    let mut report = Report::new(std::io::stdout().lock());
    // Before the runtime: loading may ask for the vault password on the terminal.
    let loaded = local::load(config, &mut report);
    if let Loaded::Full(config) | Loaded::WithoutSecrets(config) = &loaded {
        report.set_redactor(config.redactor());
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(check(&loaded, &mut report));
    Ok(report.finish())
}

async fn check(loaded: &Loaded, report: &mut Report<impl Write>) {
    let (config, with_secrets) = match loaded {
        Loaded::Full(config) => (Some(config), Some(config)),
        Loaded::WithoutSecrets(config) => (Some(config), None),
        Loaded::Broken { .. } => (None, None),
    };
    let skipped =
        if config.is_some() { "not checked: the vault did not open" } else { "not checked: the config did not load" };
    match config {
        Some(config) => local::state_folders(config, report),
        None => report.skip("data", skipped),
    }
    match with_secrets {
        Some(config) => {
            network::provider(config, report).await;
            network::telegram(config, report).await;
        }
        None => ["provider", "telegram"].into_iter().for_each(|topic| report.skip(topic, skipped)),
    }
    host::host_layers(report);
    match config {
        Some(config) => host::modes(config, report).await,
        None => report.skip("commands", skipped),
    }
    match with_secrets {
        Some(config) => {
            services::tasks(config, report).await;
            services::mcp(config, report).await;
        }
        None => ["tasks", "mcp"].into_iter().for_each(|topic| report.skip(topic, skipped)),
    }
    let data = match loaded {
        Loaded::Full(config) | Loaded::WithoutSecrets(config) => local::data_folder(config),
        Loaded::Broken { folder } => folder.clone(),
    };
    local::disk(&data, report);
}
