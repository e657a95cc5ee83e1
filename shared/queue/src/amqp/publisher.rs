//! The confirm pipeline: publishes on the shared confirm-mode channel, many at a time, and awaits their
//! publisher confirms; [`Shared::publish_reliably`] republishes what was not confirmed across reconnects.

use super::link::{Link, backoff};
use super::{BACKOFF_MAX, CONFIRM_TIMEOUT, Shared};
use crate::{QueueError, Result};
use backon::BackoffBuilder;
use lapin::options::BasicPublishOptions;
use lapin::types::ShortString;
use lapin::{BasicProperties, Confirmation, PublisherConfirm};
use minibot_protocol::{SealKind, WorkerEvent};
use std::time::{Duration, Instant};

/// How long a publish keeps retrying across reconnects before the caller hears it failed.
const PUBLISH_WINDOW: Duration = Duration::from_secs(60);
/// Publishes sent before waiting for their confirms.
const PIPELINE: usize = 512;

/// Where a message goes and how.
#[derive(Clone, Copy)]
pub(super) enum Target {
    Task,
    Event,
    Control,
    /// A worker's announcement or heartbeat.
    Status,
}

impl Target {
    fn seal_kind(self) -> SealKind {
        match self {
            Self::Task => SealKind::Task,
            Self::Event => SealKind::Event,
            Self::Control => SealKind::Control,
            Self::Status => SealKind::Status,
        }
    }
}

/// One message to publish: its id (task id) and body.
pub(super) struct Outgoing {
    pub(super) id: String,
    pub(super) body: Vec<u8>,
    /// A task's route other than the generic worker's: it goes straight to that route's queue.
    pub(super) route: Option<(String, ShortString)>,
}

impl Outgoing {
    pub(super) fn new(id: &str, body: Vec<u8>) -> Self {
        Self { id: id.to_string(), body, route: None }
    }
}

/// What became of one event published on one connection.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Published {
    Confirmed,
    ConnectionLost,
    /// Nacked or returned by a broker that is still connected.
    Refused(String),
}

/// Why a batch publish on one connection did not confirm everything.
struct PublishFailure {
    /// Indices (into the batch) still unconfirmed.
    unconfirmed: Vec<usize>,
    connection_lost: bool,
    reason: String,
}

impl Shared {
    /// Sends one message on one connection; the confirm is the caller's to await.
    pub(super) async fn send(
        &self,
        link: &Link,
        target: Target,
        message: &Outgoing,
    ) -> lapin::Result<PublisherConfirm> {
        let (exchange, routing_key, persistent, mandatory) = match (target, &message.route) {
            (Target::Task, Some((_, queue))) => ("".into(), queue.clone(), true, true),
            (Target::Task, None) => (self.names.tasks_exchange.clone(), "".into(), true, true),
            // Through an exchange of their own, so a worker's broker user needs no write access to the default
            // exchange (which would let it put tasks straight on the task queues).
            (Target::Event, _) => (self.names.events_exchange.clone(), "".into(), true, true),
            // Controls are fanned out to whoever is connected; nobody connected is not an error.
            (Target::Control, _) => (self.names.control_exchange.clone(), "".into(), false, false),
            // Heartbeats: the next one replaces a lost one.
            (Target::Status, _) => (self.names.workers_exchange.clone(), "".into(), false, false),
        };
        let mut properties = BasicProperties::default()
            .with_content_type("application/msgpack".into())
            .with_delivery_mode(if persistent { 2 } else { 1 });
        if let Some(user) = &self.broker_user {
            properties = properties.with_user_id(user.clone());
        }
        let sender = self.broker_user.as_ref().map_or("", |user| user.as_str());
        let body = self.settings.message_key.seal(target.seal_kind(), sender, &message.body);
        if let Ok(id) = ShortString::try_new(message.id.clone()) {
            properties = properties.with_message_id(id);
        }
        link.publisher
            .basic_publish(
                exchange,
                routing_key,
                BasicPublishOptions { mandatory, immediate: false },
                &body,
                properties,
            )
            .await
    }

    /// Publishes a batch on one connection, pipelining confirms `PIPELINE` at a time.
    async fn publish_on(
        &self,
        link: &Link,
        target: Target,
        batch: &[Outgoing],
        indices: &[usize],
    ) -> std::result::Result<(), PublishFailure> {
        let mut unconfirmed = Vec::new();
        let mut connection_lost = false;
        let mut reason = String::new();
        for chunk in indices.chunks(PIPELINE) {
            let mut confirms = Vec::with_capacity(chunk.len());
            for &index in chunk {
                if connection_lost {
                    unconfirmed.push(index);
                    continue;
                }
                let Some(message) = batch.get(index) else {
                    continue;
                };
                match self.send(link, target, message).await {
                    Ok(confirm) => confirms.push((index, confirm)),
                    Err(error) => {
                        connection_lost = true;
                        reason = error.to_string();
                        unconfirmed.push(index);
                    }
                }
            }
            let deadline = tokio::time::Instant::now() + CONFIRM_TIMEOUT;
            for (index, confirm) in confirms {
                let Ok(confirmation) = tokio::time::timeout_at(deadline, confirm).await else {
                    connection_lost = true;
                    reason = "no publisher confirm in time".into();
                    unconfirmed.push(index);
                    continue;
                };
                match confirmation {
                    Ok(Confirmation::Ack(None)) => {}
                    Ok(Confirmation::Ack(Some(returned))) => {
                        // Routable targets we declared ourselves; a return means someone deleted them.
                        reason = format!("the broker returned the message: {}", returned.reply_text);
                        unconfirmed.push(index);
                    }
                    Ok(Confirmation::Nack(_)) => {
                        reason = "the broker refused the message (nack)".into();
                        unconfirmed.push(index);
                    }
                    Ok(Confirmation::NotRequested) => {
                        reason = "publisher confirms are off on this channel".into();
                        unconfirmed.push(index);
                    }
                    Err(error) => {
                        connection_lost = true;
                        reason = error.to_string();
                        unconfirmed.push(index);
                    }
                }
            }
        }
        if unconfirmed.is_empty() { Ok(()) } else { Err(PublishFailure { unconfirmed, connection_lost, reason }) }
    }

    /// Publishes until every message is confirmed, across reconnects, for at most `PUBLISH_WINDOW`.
    pub(super) async fn publish_reliably(&self, target: Target, batch: &[Outgoing]) -> Result<()> {
        let deadline = Instant::now() + PUBLISH_WINDOW;
        let mut pending: Vec<usize> = (0..batch.len()).collect();
        let mut delays = backoff().build();
        let mut floor = 0;
        loop {
            let link = self.current_from(floor).await?;
            if let Err(error) = self.declare_routes(&link, batch).await {
                if let QueueError::Topology(_) = &error {
                    return Err(error);
                }
                tracing::warn!(error = %error, "cannot declare a task queue; reconnecting");
                self.report_broken(link.generation);
                floor = link.generation + 1;
                if Instant::now() >= deadline {
                    return Err(error);
                }
                continue;
            }
            let failure = match self.publish_on(&link, target, batch, &pending).await {
                Ok(()) => return Ok(()),
                Err(failure) => failure,
            };
            if failure.connection_lost {
                self.report_broken(link.generation);
                floor = link.generation + 1;
            }
            if Instant::now() >= deadline {
                return Err(QueueError::Broker(format!(
                    "{} of {} messages not confirmed by the broker: {}",
                    failure.unconfirmed.len(),
                    batch.len(),
                    failure.reason
                )));
            }
            tracing::warn!(
                unconfirmed = failure.unconfirmed.len(),
                reason = %failure.reason,
                "publishing again after a failed publish"
            );
            pending = failure.unconfirmed;
            tokio::time::sleep(delays.next().unwrap_or(BACKOFF_MAX)).await;
        }
    }

    /// Declares the queues of the routes in `batch` this connection has not declared yet (on a channel of their
    /// own: a refused declare closes its channel).
    pub(super) async fn declare_routes(&self, link: &Link, batch: &[Outgoing]) -> Result<()> {
        let missing: Vec<&(String, ShortString)> = {
            let declared = super::lock(&link.declared_routes);
            let mut missing: Vec<&(String, ShortString)> =
                batch.iter().filter_map(|m| m.route.as_ref()).filter(|(route, _)| !declared.contains(route)).collect();
            missing.dedup_by(|a, b| a.0 == b.0);
            missing
        };
        if missing.is_empty() {
            return Ok(());
        }
        let channel = link.connection.create_channel().await.map_err(super::broker)?;
        for (route, queue) in missing {
            super::topology::declare_task_queue(&link.connection, &channel, &self.names, queue).await?;
            super::lock(&link.declared_routes).insert(route.clone());
        }
        let _ = channel.close(200, "declared".into()).await;
        Ok(())
    }

    /// Publishes one event on the given connection only, never on a later one.
    pub(super) async fn publish_event_on(&self, link: &Link, event: &WorkerEvent) -> Result<Published> {
        let batch = [Outgoing::new(&event.task_id, event.encode()?)];
        match self.publish_on(link, Target::Event, &batch, &[0]).await {
            Ok(()) => Ok(Published::Confirmed),
            Err(failure) => {
                tracing::warn!(task_id = %event.task_id, reason = %failure.reason, "event not confirmed");
                if failure.connection_lost {
                    self.report_broken(link.generation);
                    Ok(Published::ConnectionLost)
                } else {
                    Ok(Published::Refused(failure.reason))
                }
            }
        }
    }
}
