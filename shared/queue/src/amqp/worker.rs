//! A worker's side: claims tasks (reporting and acknowledging those it will not run: undecodable, cancelled
//! before the claim, past their attempts, already settled here), emits events on the connection the claim came
//! on, and settles a claim once its terminal event is confirmed.

use super::background::Background;
use super::link::{Consuming, Link, LinkState};
use super::publisher::{Outgoing, Published, Target};
use super::{AmqpQueue, Shared, lock};
use crate::{ClaimedTask, QueueError, Result, WorkQueue, dead_task_error};
use futures_util::future::BoxFuture;
use lapin::options::{BasicAckOptions, BasicRejectOptions};
use lapin::types::AMQPValue;
use lapin::{Acker, BasicProperties, PublisherConfirm};
use minibot_protocol::{
    ControlMessage, SealKind, TaskEnvelope, TaskOutcome, WorkerEvent, WorkerEventKind, WorkerStatus,
};
use std::sync::Arc;

/// A task a worker claimed, with the confirms of terminal events emitted for it and not yet awaited.
pub(super) struct Claim {
    generation: u64,
    acker: Acker,
    terminal: Vec<PublisherConfirm>,
}

/// Deliveries of this message before this one, as counted by the quorum queue (absent on the first).
fn delivery_count(properties: &BasicProperties) -> u32 {
    let Some(headers) = properties.headers() else {
        return 0;
    };
    let count: i128 = match headers.inner().get("x-delivery-count") {
        Some(AMQPValue::ShortShortInt(v)) => (*v).into(),
        Some(AMQPValue::ShortShortUInt(v)) => (*v).into(),
        Some(AMQPValue::ShortInt(v)) => (*v).into(),
        Some(AMQPValue::ShortUInt(v)) => (*v).into(),
        Some(AMQPValue::LongInt(v)) => (*v).into(),
        Some(AMQPValue::LongUInt(v)) => (*v).into(),
        Some(AMQPValue::LongLongInt(v)) => (*v).into(),
        _ => return 0,
    };
    // Leaves room for the `+ 1` of the attempt number.
    u32::try_from(count.clamp(0, i128::from(u32::MAX - 1))).unwrap_or(0)
}

impl Shared {
    /// Hands a delivery back after its report was refused, so it is not held unacknowledged forever. When
    /// the connection is gone there is nothing to do: the broker already took it back.
    async fn give_back(&self, link: &Link, acker: &Acker, published: &Published) {
        if let Published::Refused(_) = published
            && let Err(error) = acker.reject(BasicRejectOptions { requeue: true }).await
        {
            tracing::warn!(error = %error, "requeue failed");
            self.report_broken(link.generation);
        }
    }

    fn finished_event(&self, task_id: &str, attempt: u32, outcome: TaskOutcome) -> WorkerEvent {
        let (stop_reason, error) = match outcome {
            TaskOutcome::Cancelled => ("cancelled", None),
            _ => ("worker_error", Some(dead_task_error(attempt.saturating_sub(1)))),
        };
        WorkerEvent::new(
            task_id,
            attempt,
            &self.worker_id,
            WorkerEventKind::Finished {
                outcome,
                stop_reason: stop_reason.into(),
                text: None,
                error,
                steps: 0,
                tool_calls: 0,
                total_tokens: 0,
                attachments: Vec::new(),
            },
        )
    }

    /// Reports a delivery the worker will not run, then acknowledges it, or with `dead` rejects it into the
    /// dead-letter queue `<queue_name>.dead`, where an operator can look at it. On failure the broker
    /// redelivers it and the decision is taken again.
    async fn finish_unrun(&self, link: &Link, acker: &Acker, event: WorkerEvent, dead: bool) -> Result<()> {
        let published = self.publish_event_on(link, &event).await?;
        let settled = if published != Published::Confirmed {
            self.give_back(link, acker, &published).await;
            return Ok(());
        } else if dead {
            acker.reject(BasicRejectOptions { requeue: false }).await
        } else {
            acker.ack(BasicAckOptions::default()).await
        };
        if let Err(error) = settled {
            tracing::warn!(error = %error, "ack failed; the task will be redelivered");
            self.report_broken(link.generation);
        }
        Ok(())
    }

    /// Looks at one delivered task; `Some` when the worker should run it.
    async fn admit(&self, link: &Link, delivery: lapin::message::Delivery) -> Result<Option<ClaimedTask>> {
        let Ok(body) = self.unseal(SealKind::Task, &delivery) else {
            // Not from our orchestrator: never run, never reported (a report would let a forger fail a genuine
            // task by naming its id), kept in the dead-letter queue for an operator.
            if let Err(error) = delivery.acker.reject(BasicRejectOptions { requeue: false }).await {
                tracing::warn!(error = %error, "reject failed");
                self.report_broken(link.generation);
            }
            return Ok(None);
        };
        let envelope = match TaskEnvelope::decode(body) {
            Ok(envelope) => envelope,
            Err(error) => {
                let id = delivery.properties.message_id().as_ref().map(ToString::to_string);
                tracing::error!(task_id = ?id, error = %error, "queued task does not decode; dead-lettered");
                if let Some(id) = id {
                    let mut event = self.finished_event(&id, 1, TaskOutcome::Failed);
                    if let WorkerEventKind::Finished { error: slot, .. } = &mut event.kind {
                        *slot = Some(format!("the queued task does not decode: {error}"));
                    }
                    let published = self.publish_event_on(link, &event).await?;
                    if published != Published::Confirmed {
                        // Without the report, let the broker redeliver rather than lose the failure.
                        self.give_back(link, &delivery.acker, &published).await;
                        return Ok(None);
                    }
                }
                if let Err(error) = delivery.acker.reject(BasicRejectOptions { requeue: false }).await {
                    tracing::warn!(error = %error, "reject failed");
                    self.report_broken(link.generation);
                }
                return Ok(None);
            }
        };
        // The count is the broker's only on a redelivery: on a first delivery the header, if any, is whatever the
        // publisher wrote (outside the seal), and a replayed task with a large count would pass as exhausted.
        let attempt = if delivery.redelivered { delivery_count(&delivery.properties).saturating_add(1) } else { 1 };
        let task_id = envelope.task_id.clone();
        if lock(&self.settled).contains(&task_id) {
            tracing::info!(task_id = %task_id, "redelivery of a task settled here; dropped");
            if let Err(error) = delivery.acker.ack(BasicAckOptions::default()).await {
                tracing::warn!(error = %error, "ack failed");
                self.report_broken(link.generation);
            }
            return Ok(None);
        }
        if lock(&self.controls).cancelled.contains(&task_id) {
            tracing::info!(task_id = %task_id, "task was cancelled before it was claimed");
            let event = self.finished_event(&task_id, attempt, TaskOutcome::Cancelled);
            self.finish_unrun(link, &delivery.acker, event, false).await?;
            return Ok(None);
        }
        if attempt > envelope.max_attempts.max(1) {
            tracing::warn!(task_id = %task_id, attempts = attempt - 1, "task exhausted its attempts; dead-lettered");
            let event = self.finished_event(&task_id, attempt, TaskOutcome::Failed);
            self.finish_unrun(link, &delivery.acker, event, true).await?;
            return Ok(None);
        }
        let token = format!("{}.{}", link.generation, delivery.delivery_tag);
        let claim = Claim { generation: link.generation, acker: delivery.acker, terminal: Vec::new() };
        lock(&self.claims).insert(token.clone(), claim);
        Ok(Some(ClaimedTask { envelope, attempt, token }))
    }

    /// The connection a claim was made on, if it is still the live one.
    fn claim_link(&self, task: &ClaimedTask) -> Result<Arc<Link>> {
        let lost = || QueueError::LeaseLost { task_id: task.envelope.task_id.clone() };
        let generation = lock(&self.claims).get(&task.token).map(|held| held.generation).ok_or_else(lost)?;
        match &*self.link.borrow() {
            LinkState::Up(link) if link.generation == generation => Ok(link.clone()),
            _ => {
                lock(&self.claims).remove(&task.token);
                Err(lost())
            }
        }
    }

    /// Sends a claimed task's terminal event without waiting for its confirm, which [`WorkQueue::settle`]
    /// leaves to the background.
    async fn send_terminal(&self, link: &Link, task: &ClaimedTask, event: &WorkerEvent) -> Result<()> {
        let lost = || QueueError::LeaseLost { task_id: task.envelope.task_id.clone() };
        let message = Outgoing::new(&event.task_id, event.encode()?);
        match self.send(link, Target::Event, &message).await {
            Ok(confirm) => {
                let mut claims = lock(&self.claims);
                let claim = claims.get_mut(&task.token).ok_or_else(lost)?;
                claim.terminal.push(confirm);
                Ok(())
            }
            Err(error) => {
                // As with a lost confirm: the delivery goes back with the connection, the worker stops.
                tracing::warn!(task_id = %event.task_id, error = %error, "terminal event not sent");
                self.report_broken(link.generation);
                lock(&self.claims).remove(&task.token);
                Err(lost())
            }
        }
    }
}

impl WorkQueue for AmqpQueue {
    fn claim(&self) -> BoxFuture<'_, Result<ClaimedTask>> {
        Box::pin(async move {
            let shared = &self.shared;
            loop {
                let (link, delivery) = if shared.settings.routes.len() > 1 {
                    shared.next_polled().await?
                } else {
                    shared.next_delivery(Consuming::Tasks).await?
                };
                if let Some(task) = shared.admit(&link, delivery).await? {
                    return Ok(task);
                }
            }
        })
    }

    fn emit<'a>(&'a self, task: &'a ClaimedTask, event: &'a WorkerEvent) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let link = self.shared.claim_link(task)?;
            if event.is_terminal() {
                return self.shared.send_terminal(&link, task, event).await;
            }
            match self.shared.publish_event_on(&link, event).await? {
                Published::Confirmed => Ok(()),
                // The claim still holds; the caller may retry the event or give up on the task.
                Published::Refused(reason) => Err(QueueError::Broker(reason)),
                Published::ConnectionLost => {
                    // The event may or may not have reached the broker; either way the delivery goes back to
                    // the queue with the connection, so the worker must stop and let the redelivery run.
                    lock(&self.shared.claims).remove(&task.token);
                    Err(QueueError::LeaseLost { task_id: task.envelope.task_id.clone() })
                }
            }
        })
    }

    fn controls<'a>(&'a self, task: &'a ClaimedTask) -> BoxFuture<'a, Result<Vec<ControlMessage>>> {
        Box::pin(async move { Ok(lock(&self.shared.controls).take(&task.envelope.task_id)) })
    }

    fn settle<'a>(&'a self, task: &'a ClaimedTask) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let shared = &self.shared;
            lock(&shared.controls).take(&task.envelope.task_id);
            let lost = || QueueError::LeaseLost { task_id: task.envelope.task_id.clone() };
            let link = shared.claim_link(task)?;
            let claim = lock(&shared.claims).remove(&task.token).ok_or_else(lost)?;
            if !claim.terminal.is_empty() {
                shared.in_background(Background::Settle {
                    task_id: task.envelope.task_id.clone(),
                    generation: claim.generation,
                    acker: claim.acker,
                    terminal: claim.terminal,
                });
                return Ok(());
            }
            if let Err(error) = claim.acker.ack(BasicAckOptions::default()).await {
                tracing::warn!(task_id = %task.envelope.task_id, error = %error, "ack failed; the task will be redelivered");
                shared.report_broken(link.generation);
                return Err(lost());
            }
            Ok(())
        })
    }

    fn announce<'a>(&'a self, status: &'a WorkerStatus) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let message = Outgoing::new(&status.worker_id, status.encode()?);
            let link = self.shared.current().await?;
            let confirm = self.shared.send(&link, Target::Status, &message).await.map_err(super::broker)?;
            // Awaited, though a lost heartbeat is replaced by the next: lapin keeps every dropped confirm.
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), confirm).await;
            Ok(())
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(AmqpQueue::close(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::types::FieldTable;

    fn with_count(value: AMQPValue) -> BasicProperties {
        let mut headers = FieldTable::default();
        headers.insert("x-delivery-count".into(), value);
        BasicProperties::default().with_headers(headers)
    }

    #[test]
    fn delivery_count_reads_any_integer_and_tolerates_nonsense() {
        assert_eq!(delivery_count(&BasicProperties::default()), 0);
        assert_eq!(delivery_count(&with_count(AMQPValue::LongLongInt(2))), 2);
        assert_eq!(delivery_count(&with_count(AMQPValue::LongInt(3))), 3);
        assert_eq!(delivery_count(&with_count(AMQPValue::LongLongInt(-5))), 0);
        assert_eq!(delivery_count(&with_count(AMQPValue::LongLongInt(i64::MAX))), u32::MAX - 1);
        assert_eq!(delivery_count(&with_count(AMQPValue::LongString("7".into()))), 0);
    }
}
