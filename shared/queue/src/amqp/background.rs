//! Acknowledgements sent off the caller's path: a settled task's ack, sent once its terminal event is
//! confirmed (or its requeue when the broker refused that event), and the acks of events the orchestrator
//! applied.

use super::{CONFIRM_TIMEOUT, Shared, lock};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use lapin::options::{BasicAckOptions, BasicRejectOptions};
use lapin::{Acker, Confirmation, PublisherConfirm};
use std::sync::Arc;
use tokio::sync::mpsc;

/// A delivery held unacknowledged, with the connection it came on.
pub(super) struct Held {
    pub(super) generation: u64,
    pub(super) acker: Acker,
}

/// Acknowledgements sent in the background, off the caller's path.
pub(super) enum Background {
    /// Acknowledge a settled task once one of its terminal events is confirmed.
    Settle { task_id: String, generation: u64, acker: Acker, terminal: Vec<PublisherConfirm> },
    /// Acknowledge an event the orchestrator applied.
    AckEvent(Held),
}

impl Shared {
    /// Queues an acknowledgement for [`run_background`]. Unbounded, but each job holds an unacked delivery, so
    /// the prefetch counts bound it.
    pub(super) fn in_background(&self, job: Background) {
        self.in_background.send_modify(|n| *n += 1);
        if self.background.send(job).is_err() {
            // Only after `close`: nothing is acknowledged, the broker redelivers.
            self.in_background.send_modify(|n| *n = n.saturating_sub(1));
        }
    }

    async fn run_job(&self, job: Background) {
        match job {
            Background::AckEvent(held) => {
                if let Err(error) = held.acker.ack(BasicAckOptions::default()).await {
                    tracing::debug!(error = %error, "event ack failed; it will be redelivered");
                    self.report_broken(held.generation);
                }
            }
            Background::Settle { task_id, generation, acker, terminal } => {
                let deadline = tokio::time::Instant::now() + CONFIRM_TIMEOUT;
                let mut stored = false;
                let mut connection_lost = false;
                let mut refused = None;
                for confirm in terminal {
                    match tokio::time::timeout_at(deadline, confirm).await {
                        Ok(Ok(Confirmation::Ack(None))) => stored = true,
                        Ok(Ok(Confirmation::Ack(Some(returned)))) => {
                            refused = Some(format!("the broker returned the message: {}", returned.reply_text));
                        }
                        Ok(Ok(Confirmation::Nack(_))) => refused = Some("the broker refused the message (nack)".into()),
                        Ok(Ok(Confirmation::NotRequested)) => {
                            refused = Some("publisher confirms are off on this channel".into());
                        }
                        Ok(Err(_)) | Err(_) => connection_lost = true,
                    }
                }
                if stored {
                    // The answer is stored: a redelivery reaching this worker is a duplicate, even if this ack
                    // is lost with the connection.
                    lock(&self.settled).insert(&task_id);
                    if let Err(error) = acker.ack(BasicAckOptions::default()).await {
                        tracing::warn!(task_id = %task_id, error = %error, "ack failed; the task will be redelivered");
                        self.report_broken(generation);
                    }
                } else if connection_lost {
                    tracing::warn!(task_id = %task_id, "terminal event not confirmed; the task will be redelivered");
                    self.report_broken(generation);
                } else {
                    let reason = refused.unwrap_or_default();
                    tracing::warn!(task_id = %task_id, reason = %reason, "terminal event refused; task requeued");
                    if let Err(error) = acker.reject(BasicRejectOptions { requeue: true }).await {
                        tracing::warn!(error = %error, "requeue failed");
                        self.report_broken(generation);
                    }
                }
            }
        }
    }
}

/// Runs the acknowledgements handed over by `settle` and `ack_event`, many at a time.
pub(super) async fn run_background(shared: Arc<Shared>, mut jobs: mpsc::UnboundedReceiver<Background>) {
    let mut running = FuturesUnordered::new();
    loop {
        tokio::select! {
            job = jobs.recv() => match job {
                Some(job) => running.push(shared.run_job(job)),
                None => return,
            },
            Some(()) = running.next(), if !running.is_empty() => {
                shared.in_background.send_modify(|n| *n = n.saturating_sub(1));
            }
        }
    }
}
