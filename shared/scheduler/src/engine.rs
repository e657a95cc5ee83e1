//! The loop that fires jobs: it sleeps until the earliest due time of the channels this process serves, fires
//! what is due (one transaction per batch, [`SchedulerStore::fire_due`]) and hands each fire to a [`Deliver`],
//! which puts the turn into the chat's store. A new job wakes it at once ([`Wake`]); `poll` bounds the sleep so
//! that jobs another process wrote into the same file are seen too.

use crate::clock::Clock;
use crate::job::Fire;
use crate::store::{AfterFailure, SchedulerStore};
use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};

/// Where fires go. `deliver` must be idempotent per fire id: after a crash a fire may be delivered again, and
/// the second delivery must not start a second turn.
pub trait Deliver: Send + Sync + 'static {
    fn deliver<'a>(&'a self, fire: &'a Fire, late_by: Option<Duration>) -> BoxFuture<'a, Result<(), String>>;
    /// A job gave up after `max_attempts` failed deliveries: tell its chat.
    fn gave_up<'a>(&'a self, fire: &'a Fire, error: &'a str) -> BoxFuture<'a, ()>;
}

/// `at` plus `wait`, saturating instead of overflowing.
fn later(at: DateTime<Utc>, wait: Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(wait)
        .ok()
        .and_then(|wait| at.checked_add_signed(wait))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// Wakes the loop: a job was added or changed.
#[derive(Clone, Default)]
pub struct Wake(Arc<Notify>);

impl Wake {
    pub fn wake(&self) {
        self.0.notify_one();
    }
}

/// A fire this much after its slot says so in the prompt.
pub const LATE_NOTICE_AFTER: Duration = Duration::from_secs(60);

pub struct Engine {
    pub store: SchedulerStore,
    pub clock: Arc<dyn Clock>,
    pub deliver: Arc<dyn Deliver>,
    /// The channels this process runs; only their jobs fire here.
    pub channels: Vec<String>,
    /// This process, as fire rows name it (`host:pid:nonce`).
    pub claimant: String,
    /// Whether another claimant is known to be dead (a process of this host that no longer runs).
    pub is_gone: Arc<dyn Fn(&str) -> bool + Send + Sync>,
    pub wake: Wake,
    pub poll: Duration,
}

impl Engine {
    /// Runs until `stop` turns true.
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut failures = 0u32;
        loop {
            if *stop.borrow() {
                return;
            }
            let next = match self.step().await {
                Ok(next) => {
                    failures = 0;
                    next
                }
                Err(error) => {
                    failures = failures.saturating_add(1);
                    tracing::error!(error = %error, "scheduler: cannot read or fire jobs; trying again");
                    let wait = Duration::from_millis(500u64.saturating_mul(1 << failures.min(6)));
                    Some(later(self.clock.now(), wait))
                }
            };
            let now = self.clock.now();
            let poll = later(now, self.poll);
            let until = next.map_or(poll, |next| next.min(poll));
            tokio::select! {
                () = self.clock.sleep_until(until) => {}
                () = self.wake.0.notified() => {}
                _ = stop.changed() => {}
            }
        }
    }

    /// Fires everything due now and delivers what is waiting; returns when to look again.
    pub async fn step(&self) -> crate::store::Result<Option<DateTime<Utc>>> {
        self.store.tidy().await?;
        let now = self.clock.now();
        loop {
            let fires = self.store.fire_due(now, &self.channels, &self.claimant).await?;
            let full = fires.len() >= self.store.settings().batch_size.max(1) as usize;
            for fire in &fires {
                self.hand_over(fire).await?;
            }
            if !full {
                break;
            }
        }
        let stale = self.store.claim_stale_fires(now, &self.channels, &self.claimant, &*self.is_gone).await?;
        for fire in &stale {
            self.hand_over(fire).await?;
        }
        self.store.next_wake(&self.channels).await
    }

    async fn hand_over(&self, fire: &Fire) -> crate::store::Result<()> {
        let now = self.clock.now();
        let late = (now - fire.due_at).to_std().ok().filter(|late| *late >= LATE_NOTICE_AFTER);
        match self.deliver.deliver(fire, late).await {
            Ok(()) => {
                let lateness_ms = (now - fire.due_at).num_milliseconds();
                tracing::info!(job_id = %fire.job_id, fire = fire.id, lateness_ms, "scheduled prompt fired");
                self.store.delivered(fire, self.clock.now()).await
            }
            Err(error) => {
                tracing::warn!(job_id = %fire.job_id, fire = fire.id, error = %error, "scheduled prompt not delivered");
                if self.store.delivery_failed(fire, &error, self.clock.now()).await? == AfterFailure::GaveUp {
                    self.deliver.gave_up(fire, &error).await;
                }
                Ok(())
            }
        }
    }
}
