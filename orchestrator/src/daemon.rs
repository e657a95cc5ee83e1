//! The long-running daemon (`minibot`, `minibot run`): every enabled channel until SIGINT or SIGTERM. On a
//! signal it stops taking input, gives running turns `[runtime] shutdown_grace_seconds` to finish and sends
//! what they answered; a turn still running then stays pending and is answered after the next start.

use crate::channels::telegram;
use crate::messages::Intake;
use crate::runtime::Runtime;
use minibot_config::Config;
use std::time::Duration;

/// How long queued messages get to reach Telegram after the last turn ended.
const FLUSH_LIMIT: Duration = Duration::from_secs(10);

/// Refuses to start a daemon that would serve nobody.
pub fn check_channels(config: &Config) -> anyhow::Result<()> {
    let section = &config.channels.telegram;
    if !section.enabled || section.bot_token.trim().is_empty() {
        anyhow::bail!(
            "{}: no channel is enabled: set [channels.telegram] bot_token to run the Telegram bot, or run \
             `minibot console` to chat in the terminal",
            config.origin()
        );
    }
    Ok(())
}

pub async fn run(runtime: &Runtime, intake: &Intake) -> anyhow::Result<i32> {
    let config = runtime.config.clone();
    // Before Telegram is reached (that can take a while, or retry): where this run keeps its state.
    eprintln!("minibot: {}", config.locations());
    eprintln!("minibot: connecting to Telegram…");
    let telegram = telegram::start(&config, intake.clone()).await?;
    runtime.set_channels(vec![telegram::CHANNEL.into()]);
    tracing::info!(
        channels = "telegram",
        telegram = %telegram.description,
        replayed = telegram.replayed,
        "minibot daemon running"
    );
    // The bot's name is what the Bot API said: text only on the terminal.
    eprintln!(
        "minibot: running; Telegram bot {}. Stop with Ctrl+C or SIGTERM.",
        crate::terminal_text::for_terminal(&telegram.description)
    );
    let signal = shutdown_signal().await?;
    let grace = Duration::from_secs(config.runtime.shutdown_grace_seconds);
    tracing::info!(
        signal,
        running_turns = runtime.active_turns(),
        grace_s = grace.as_secs(),
        "stopping: no new messages are taken"
    );
    telegram.stop_intake().await;
    // Before the flush, so that what the finished turns answered is sent; `Runtime::close` does not wait again.
    runtime.finish_turns().await;
    if !telegram.flush(FLUSH_LIMIT).await {
        tracing::warn!("some messages were not sent to Telegram before exit");
    }
    tracing::info!("minibot daemon stopped");
    Ok(0)
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
