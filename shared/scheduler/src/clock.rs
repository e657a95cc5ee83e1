//! Where the scheduler reads the time and how it waits for it. The daemon uses the system clock; tests drive a
//! [`ManualClock`] so that a job due "next minute" fires when the test moves the clock, not a minute later.

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> DateTime<Utc>;
    /// Resolves at `at` (at once when it has passed).
    fn sleep_until(&self, at: DateTime<Utc>) -> BoxFuture<'static, ()>;
}

/// The wall clock, waited on with tokio's timer.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    fn sleep_until(&self, at: DateTime<Utc>) -> BoxFuture<'static, ()> {
        let wait = (at - Utc::now()).to_std().unwrap_or_default();
        Box::pin(tokio::time::sleep(wait))
    }
}

/// A clock that moves only when told to ([`ManualClock::set`]).
pub struct ManualClock {
    now: Mutex<DateTime<Utc>>,
    moved: watch::Sender<DateTime<Utc>>,
}

impl ManualClock {
    pub fn new(at: DateTime<Utc>) -> Arc<Self> {
        Arc::new(Self { now: Mutex::new(at), moved: watch::channel(at).0 })
    }

    pub fn set(&self, at: DateTime<Utc>) {
        *self.now.lock().unwrap_or_else(|p| p.into_inner()) = at;
        self.moved.send_replace(at);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn sleep_until(&self, at: DateTime<Utc>) -> BoxFuture<'static, ()> {
        let mut moved = self.moved.subscribe();
        Box::pin(async move {
            let _ = moved.wait_for(|now| *now >= at).await;
        })
    }
}
