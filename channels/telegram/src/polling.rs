//! Long polling: `getUpdates` in a loop. The first poll after a start asks for every update Telegram still holds
//! and drops those already recorded; it does not resume from the highest id recorded, because ids recorded in
//! webhook mode, or ids Telegram restarts at random after a week without updates, would confirm (lose) updates
//! never seen. The offset that confirms a
//! batch to Telegram is sent only with the next poll, after [`UpdateSink::handle`] recorded the batch, so an
//! update is never confirmed before it is on disk. A poll loop that fails (Telegram answers nonsense, the
//! database refuses the write, a bug panics) is restarted with backoff, and each restart is logged. Both waits
//! are backon's, reset once things work again.

use super::api::{ApiError, BotApi};
use super::updates::{Incoming, UpdateSink};
use actix::Recipient;
use backon::{BackoffBuilder, ExponentialBuilder};
use frankenstein::AsyncTelegramApi;
use frankenstein::methods::GetUpdatesParams;
use frankenstein::response::MethodResponse;
use frankenstein::types::AllowedUpdate;
use futures_util::FutureExt;
use minibot_channel::messages::LastUpdate;
use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};
use tokio::sync::watch;

const FIRST_RESTART_DELAY: Duration = Duration::from_secs(1);
const MAX_RESTART_DELAY: Duration = Duration::from_secs(60);
/// A loop that ran this long before failing starts again from the shortest delay.
const HEALTHY_RUN: Duration = Duration::from_secs(120);
/// The waits after failed polls in a row: they do not end while Telegram is down.
const FIRST_POLL_DELAY: Duration = Duration::from_secs(1);
const MAX_POLL_DELAY: Duration = Duration::from_secs(30);

/// Waits that double from `first` up to `max`, for as long as the failures go on.
fn endless_backoff(first: Duration, max: Duration) -> ExponentialBuilder {
    ExponentialBuilder::default().with_min_delay(first).with_max_delay(max).with_factor(2.0).without_max_times()
}

/// The running poll loop.
pub struct Poller {
    stop: watch::Sender<bool>,
    done: tokio::sync::Mutex<Option<tokio::sync::oneshot::Receiver<()>>>,
}

impl Poller {
    pub fn spawn(api: BotApi, sink: UpdateSink, last: Recipient<LastUpdate>, allowed: Vec<AllowedUpdate>) -> Self {
        let (stop, stopped) = watch::channel(false);
        let (done_tx, done) = tokio::sync::oneshot::channel();
        actix::spawn(async move {
            supervise(&api, &sink, &last, &allowed, stopped).await;
            let _ = done_tx.send(());
        });
        Self { stop, done: tokio::sync::Mutex::new(Some(done)) }
    }

    /// Stops polling. A batch being recorded is finished first; nothing after it is taken.
    pub async fn stop(&self) {
        let _ = self.stop.send(true);
        if let Some(done) = self.done.lock().await.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), done).await;
        }
    }
}

async fn supervise(
    api: &BotApi,
    sink: &UpdateSink,
    last: &Recipient<LastUpdate>,
    allowed: &[AllowedUpdate],
    mut stopped: watch::Receiver<bool>,
) {
    let restarts = endless_backoff(FIRST_RESTART_DELAY, MAX_RESTART_DELAY);
    let mut delays = restarts.build();
    loop {
        let started = Instant::now();
        let run = AssertUnwindSafe(poll(api, sink, last, allowed, stopped.clone())).catch_unwind().await;
        let why = match run {
            Ok(Ok(())) => return,
            Ok(Err(why)) => why,
            Err(_panic) => "the poll loop panicked".to_string(),
        };
        if started.elapsed() > HEALTHY_RUN {
            delays = restarts.build();
        }
        let delay = delays.next().unwrap_or(MAX_RESTART_DELAY);
        tracing::error!(error = %why, restart_in_ms = delay.as_millis() as u64, "Telegram polling failed; restarting it");
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            _ = stopped.changed() => return,
        }
    }
}

/// Polls until told to stop (`Ok`) or until something is wrong that a retry of the same call cannot fix.
async fn poll(
    api: &BotApi,
    sink: &UpdateSink,
    last: &Recipient<LastUpdate>,
    allowed: &[AllowedUpdate],
    mut stopped: watch::Receiver<bool>,
) -> Result<(), String> {
    // Asked for the log (and so the store prunes old ids); not the offset, see the module note.
    let recorded = last
        .send(LastUpdate { source: sink.source.clone() })
        .await
        .map_err(|e| format!("the router is not running: {e}"))??;
    tracing::debug!(last_recorded = ?recorded, "Telegram polling starts");
    let mut offset: Option<i64> = None;
    let timeout = u32::try_from(api.poll_timeout().as_secs()).unwrap_or(25);
    let retries = endless_backoff(FIRST_POLL_DELAY, MAX_POLL_DELAY);
    let mut delays = retries.build();
    loop {
        if *stopped.borrow() {
            return Ok(());
        }
        let params = GetUpdatesParams::builder()
            .maybe_offset(offset)
            .limit(100)
            .timeout(timeout)
            .allowed_updates(allowed.to_vec())
            .build();
        // Each update is read on its own: one this version cannot parse (a newer Bot API) is skipped, not a
        // batch that fails again at every poll.
        let answer = tokio::select! {
            answer = api.request::<_, MethodResponse<Vec<serde_json::Value>>>("getUpdates", Some(params)) => answer,
            _ = stopped.changed() => return Ok(()),
        };
        let updates = match answer {
            Ok(response) => response.result,
            Err(error @ (ApiError::Decode { .. } | ApiError::File { .. } | ApiError::TooLarge { .. })) => {
                return Err(error.to_string());
            }
            Err(error) if error.is_unauthorized() => return Err(error.to_string()),
            Err(error) => {
                let backoff = delays.next().unwrap_or(MAX_POLL_DELAY);
                // Flood control: polling before `retry_after` is refused again.
                let wait = error.asked_wait().map_or(backoff, |asked| asked.max(backoff));
                tracing::warn!(error = %error, wait_ms = wait.as_millis() as u64, "getUpdates failed; polling again");
                tokio::select! {
                    () = tokio::time::sleep(wait) => continue,
                    _ = stopped.changed() => return Ok(()),
                }
            }
        };
        delays = retries.build();
        let Some(highest) = updates.iter().filter_map(|u| u.get("update_id")?.as_i64()).max() else { continue };
        sink.handle(updates.into_iter().map(parse_update).collect()).await?;
        offset = Some(highest + 1);
    }
}

/// An update as this version reads it, or its id alone when it cannot be read (it is recorded and skipped).
pub fn parse_update(raw: serde_json::Value) -> Incoming {
    let update_id = raw.get("update_id").and_then(serde_json::Value::as_i64).unwrap_or_default();
    match serde_json::from_value::<frankenstein::updates::Update>(raw) {
        Ok(update) => Incoming::Update(Box::new(update)),
        Err(error) => {
            tracing::warn!(update_id, error = %error, "an update this version cannot read; skipped");
            Incoming::Unreadable { update_id }
        }
    }
}

#[cfg(test)]
mod tests {
    // By its full path: the module layout test reads `super::` as the telegram module.
    use crate::polling::{FIRST_POLL_DELAY, FIRST_RESTART_DELAY, MAX_POLL_DELAY, MAX_RESTART_DELAY, endless_backoff};
    use backon::BackoffBuilder;
    use std::time::Duration;

    /// During a long outage polls go on every 30 s and restarts every minute; neither ever gives up.
    #[test]
    fn the_waits_double_to_their_cap_and_never_run_out() {
        let seconds = |first, max| -> Vec<u64> {
            endless_backoff(first, max).build().take(10).map(|wait: Duration| wait.as_secs()).collect()
        };
        assert_eq!(seconds(FIRST_POLL_DELAY, MAX_POLL_DELAY), [1, 2, 4, 8, 16, 30, 30, 30, 30, 30]);
        assert_eq!(seconds(FIRST_RESTART_DELAY, MAX_RESTART_DELAY), [1, 2, 4, 8, 16, 32, 60, 60, 60, 60]);
    }
}
