//! The orchestrator's side: publishes tasks and control messages, consumes worker events (dropping those that
//! follow a task's terminal event) and acknowledges them in the background.

use super::background::{Background, Held};
use super::link::Consuming;
use super::publisher::{Outgoing, Target};
use super::{AmqpQueue, lock};
use crate::{EventDelivery, Result, TaskQueue};
use futures_util::future::BoxFuture;
use lapin::options::{BasicAckOptions, BasicRejectOptions};
use minibot_protocol::{ControlMessage, SealKind, TaskEnvelope, WorkerEvent, WorkerStatus};
use std::sync::atomic::Ordering;

impl TaskQueue for AmqpQueue {
    fn publish<'a>(&'a self, task: &'a TaskEnvelope) -> BoxFuture<'a, Result<()>> {
        Box::pin(self.publish_many(std::slice::from_ref(task)))
    }

    fn control<'a>(&'a self, message: &'a ControlMessage) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let batch = [Outgoing::new(&message.task_id, message.encode()?)];
            self.shared.publish_reliably(Target::Control, &batch).await
        })
    }

    fn next_event(&self) -> BoxFuture<'_, Result<EventDelivery>> {
        Box::pin(async move {
            let shared = &self.shared;
            loop {
                let (link, delivery) = shared.next_delivery(Consuming::Events).await?;
                let Ok(body) = shared.unseal(SealKind::Event, &delivery) else {
                    let _ = delivery.acker.reject(BasicRejectOptions { requeue: false }).await;
                    continue;
                };
                let event = match WorkerEvent::decode(body) {
                    Ok(event) => event,
                    Err(error) => {
                        tracing::error!(error = %error, "worker event does not decode; dropped");
                        let _ = delivery.acker.reject(BasicRejectOptions { requeue: false }).await;
                        continue;
                    }
                };
                if shared.check_sender(SealKind::Event, &delivery, &event.worker_id).is_err() {
                    let _ = delivery.acker.reject(BasicRejectOptions { requeue: false }).await;
                    continue;
                }
                // Keyed by the sender too: a terminal event the coordinator will refuse (another worker speaking
                // for the attempt) must not hide the genuine one behind it. Terminal events of other attempts
                // pass and are ignored by the coordinator once the task has ended.
                let sent_by = format!("{}\u{0}{}\u{0}{}", event.task_id, event.attempt, event.worker_id);
                let duplicate = {
                    let mut finished = lock(&shared.finished);
                    let duplicate = finished.contains(&sent_by);
                    if !duplicate && event.is_terminal() {
                        finished.insert(&sent_by);
                    }
                    duplicate
                };
                if duplicate {
                    tracing::debug!(task_id = %event.task_id, "event after the task's terminal event; dropped");
                    let _ = delivery.acker.ack(BasicAckOptions::default()).await;
                    continue;
                }
                let tag = shared.next_event_tag.fetch_add(1, Ordering::Relaxed);
                lock(&shared.unacked_events).insert(tag, Held { generation: link.generation, acker: delivery.acker });
                return Ok(EventDelivery { event, tag });
            }
        })
    }

    fn next_status(&self) -> BoxFuture<'_, Result<WorkerStatus>> {
        Box::pin(async move {
            let shared = &self.shared;
            loop {
                let (_, delivery) = shared.next_delivery(Consuming::Statuses).await?;
                // Auto-acknowledged: a heartbeat lost is replaced by the next.
                let Ok(body) = shared.unseal(SealKind::Status, &delivery) else { continue };
                match WorkerStatus::decode(body) {
                    Ok(status) if shared.check_sender(SealKind::Status, &delivery, &status.worker_id).is_ok() => {
                        return Ok(status);
                    }
                    Ok(_) => {}
                    Err(error) => tracing::debug!(error = %error, "worker status does not decode; skipped"),
                }
            }
        })
    }

    fn ack_event(&self, delivery: &EventDelivery) -> BoxFuture<'_, Result<()>> {
        let tag = delivery.tag;
        Box::pin(async move {
            let Some(held) = lock(&self.shared.unacked_events).remove(&tag) else {
                return Ok(());
            };
            // Sent in the background. If the connection is gone the event comes back; terminal ones are then
            // dropped as duplicates and the coordinator applies the others idempotently, so a failed ack is not
            // the caller's problem.
            self.shared.in_background(Background::AckEvent(held));
            Ok(())
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(AmqpQueue::close(self))
    }
}
