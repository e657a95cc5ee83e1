//! The long-running daemon (`minibot`, `minibot run`): every enabled channel until SIGINT or SIGTERM. Each
//! channel starts (checks and registers), then the one HTTP server serves every channel's routes, turns a
//! restart interrupted are replayed, and the channels open. On a signal it stops taking input, gives running
//! turns `[runtime] shutdown_grace_seconds` to finish and sends what they answered; a turn still running then
//! stays pending and is answered after the next start.

use crate::channels::telegram::TelegramChannel;
use crate::messages::{Intake, ReplayPending};
use crate::runtime::Runtime;
use minibot_channel::Channel;
use minibot_channel::http::{self, RunningServer};
use minibot_config::Config;
use std::sync::Arc;
use std::time::Duration;

/// How long queued messages get to reach their channels after the last turn ended.
const FLUSH_LIMIT: Duration = Duration::from_secs(10);

/// Refuses to start a daemon that would serve nobody, or a web UI that would be reachable without credentials.
pub fn check_channels(config: &Config) -> anyhow::Result<()> {
    let telegram = &config.channels.telegram;
    let telegram_on = telegram.enabled && !telegram.bot_token.trim().is_empty();
    if !telegram_on && !config.http.enabled {
        anyhow::bail!(
            "{}: no channel is enabled: set [channels.telegram] bot_token to run the Telegram bot, set [http] \
             enabled = true for the web UI, or run `minibot console` to chat in the terminal",
            config.origin()
        );
    }
    if config.http.enabled {
        let web = minibot_web::WebChannel::check(config)?;
        let same_address = telegram.webhook_listen.parse::<std::net::SocketAddr>().is_ok_and(|hook| hook == web);
        let path = crate::channels::telegram::webhook::path_of(telegram.webhook_url.as_deref().unwrap_or_default());
        if telegram_on && telegram.mode == "webhook" && same_address && minibot_web::serves_path(&path) {
            anyhow::bail!(
                "channels.telegram.webhook_url: its path `{path}` is a page of the web UI, which listens on the same \
                 address ({web}); give the webhook a path of its own (for example /telegram) or another \
                 webhook_listen port"
            );
        }
    }
    Ok(())
}

/// The channels the config enables, in the order they start: the web UI last, since its routes catch all
/// paths on its address.
pub fn channels(runtime: &Arc<Runtime>) -> anyhow::Result<Vec<Box<dyn Channel>>> {
    let config = &runtime.config;
    check_channels(config)?;
    let mut channels: Vec<Box<dyn Channel>> = Vec::new();
    let telegram = &config.channels.telegram;
    if telegram.enabled && !telegram.bot_token.trim().is_empty() {
        channels.push(Box::new(TelegramChannel::new(config.clone())));
    }
    if config.http.enabled {
        let backstage = Arc::new(crate::backstage::RuntimeBackstage::new(runtime.clone()));
        let metrics = crate::metrics::install()?;
        channels.push(Box::new(minibot_web::WebChannel::new(
            config,
            backstage,
            Some(metrics),
            Some(runtime.store.clone()),
        )?));
    }
    Ok(channels)
}

pub async fn run(runtime: &Runtime, intake: &Intake, mut channels: Vec<Box<dyn Channel>>) -> anyhow::Result<i32> {
    let config = runtime.config.clone();
    // Before any peer is reached (that can take a while, or retry): where this run keeps its state.
    eprintln!("minibot: {}", config.locations());
    let names: Vec<String> = channels.iter().map(|c| c.name().to_string()).collect();
    eprintln!("minibot: starting {}…", names.join(", "));
    let mut mounts = Vec::new();
    for channel in &mut channels {
        mounts.extend(channel.start(intake).await?);
    }
    runtime.set_channels(names.clone());
    let server = if mounts.is_empty() { None } else { Some(http::serve(mounts)?) };
    // Turns a crash or a shutdown left pending are back in their conversations before any new input comes in,
    // so a just-recorded update cannot be read as pending and run twice.
    let replayed = intake.replay.send(ReplayPending).await.map(|turns| turns.len()).unwrap_or(0);
    let mut reached = Vec::new();
    for channel in &mut channels {
        match channel.open(server.as_ref()).await {
            Ok(description) => reached.push(description),
            Err(error) => {
                close(&mut channels, server.as_ref()).await;
                return Err(error.into());
            }
        }
    }
    tracing::info!(channels = %names.join(","), replayed, "minibot daemon running");
    // What the channels said of themselves (a bot's name comes from the Bot API): text only on the terminal.
    eprintln!(
        "minibot: running; {}. Stop with Ctrl+C or SIGTERM.",
        crate::terminal_text::for_terminal(&reached.join("; "))
    );
    let signal = shutdown_signal().await?;
    let grace = Duration::from_secs(config.runtime.shutdown_grace_seconds);
    tracing::info!(
        signal,
        running_turns = runtime.active_turns(),
        grace_s = grace.as_secs(),
        "stopping: no new messages are taken"
    );
    close(&mut channels, server.as_ref()).await;
    // Before the flush, so that what the finished turns answered is sent; `Runtime::close` does not wait again.
    runtime.finish_turns().await;
    for channel in &channels {
        if !channel.flush(FLUSH_LIMIT).await {
            tracing::warn!(channel = channel.name(), "some messages were not sent before exit");
        }
    }
    tracing::info!("minibot daemon stopped");
    Ok(0)
}

/// Stops every channel's intake and the HTTP server.
async fn close(channels: &mut [Box<dyn Channel>], server: Option<&RunningServer>) {
    for channel in channels.iter_mut() {
        channel.stop().await;
    }
    if let Some(server) = server {
        server.stop().await;
    }
}

/// Waits for SIGINT or SIGTERM; answers which.
async fn shutdown_signal() -> std::io::Result<&'static str> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    Ok(tokio::select! {
        _ = terminate.recv() => "SIGTERM",
        _ = interrupt.recv() => "SIGINT",
    })
}
