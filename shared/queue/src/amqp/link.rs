//! Connection supervision: the live connection ([`Link`]) and its generation, the supervisor that pumps control
//! messages while it lives and reconnects with backoff when it dies, and the waits of every operation for a
//! live connection and for the next delivery of a consumer.

use super::topology::open_link;
use super::{BACKOFF_MAX, BACKOFF_MIN, Shared, broker, lock};
use crate::{QueueError, Result};
use futures_util::StreamExt;
use lapin::options::{BasicConsumeOptions, BasicQosOptions};
use lapin::types::{FieldTable, ShortString};
use lapin::{Channel, Connection, Consumer};
use minibot_protocol::ControlMessage;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

/// How long an operation waits for a connection before it gives up with an error.
const LINK_WAIT: Duration = Duration::from_secs(60);

/// One live connection and what hangs off it. Replaced wholesale on reconnect.
pub(super) struct Link {
    pub(super) generation: u64,
    pub(super) connection: Connection,
    /// Confirm-mode channel all publishes share, so concurrent publishes pipeline.
    pub(super) publisher: Channel,
    /// Started on first use: the orchestrator never consumes tasks, a worker never consumes events.
    pub(super) tasks: Mutex<Option<(Channel, Consumer)>>,
    pub(super) events: Mutex<Option<(Channel, Consumer)>>,
}

#[derive(Clone)]
pub(super) enum LinkState {
    Up(Arc<Link>),
    Reconnecting,
    /// [`AmqpQueue::close`](super::AmqpQueue::close) was called: waiting is pointless.
    Closed,
}

/// Pumps control messages into the buffer while the connection lives, then reconnects with backoff.
pub(super) async fn supervise(shared: Arc<Shared>, mut link: Arc<Link>, mut controls: Consumer) {
    loop {
        let generation = link.generation;
        let mut broken = shared.broken.subscribe();
        tokio::select! {
            () = pump_controls(&shared, &mut controls) => {}
            _ = broken.wait_for(|g| *g >= generation) => {}
        }
        shared.link.send_replace(LinkState::Reconnecting);
        tracing::warn!(
            worker_id = %shared.worker_id,
            generation,
            "lost the broker connection; reconnecting"
        );
        let _ = tokio::time::timeout(Duration::from_secs(1), link.connection.close(200, "reconnecting".into())).await;
        let mut delay = BACKOFF_MIN;
        loop {
            tokio::time::sleep(delay).await;
            match open_link(&shared, generation + 1).await {
                Ok((new_link, new_controls)) => {
                    link = new_link;
                    controls = new_controls;
                    break;
                }
                Err(error) => {
                    tracing::debug!(error = %error, ?delay, "reconnect failed");
                    delay = (delay * 2).min(BACKOFF_MAX);
                }
            }
        }
        tracing::info!(worker_id = %shared.worker_id, generation = link.generation, "reconnected to the broker");
        shared.link.send_replace(LinkState::Up(link.clone()));
    }
}

async fn pump_controls(shared: &Shared, controls: &mut Consumer) {
    while let Some(delivery) = controls.next().await {
        let Ok(delivery) = delivery else { return };
        match ControlMessage::decode(&delivery.data) {
            Ok(message) => lock(&shared.controls).push(message),
            Err(error) => {
                tracing::error!(error = %error, "control message does not decode; dropped")
            }
        }
    }
}

async fn start_consumer(link: &Link, queue: &ShortString, prefetch: u16) -> Result<(Channel, Consumer)> {
    let channel = link.connection.create_channel().await.map_err(broker)?;
    channel.basic_qos(prefetch.max(1), BasicQosOptions::default()).await.map_err(broker)?;
    let consumer = channel
        .basic_consume(queue.clone(), "".into(), BasicConsumeOptions::default(), FieldTable::default())
        .await
        .map_err(broker)?;
    Ok((channel, consumer))
}

impl Shared {
    /// The next delivery from the consumer in `slot` of the current link, starting that consumer first when
    /// needed. A consumer that cannot start, fails or ends marks its link broken, and the wait goes on on the
    /// next link.
    pub(super) async fn next_delivery(
        &self,
        slot: impl Fn(&Link) -> &Mutex<Option<(Channel, Consumer)>>,
        queue: &ShortString,
        prefetch: u16,
        what: &str,
    ) -> Result<(Arc<Link>, lapin::message::Delivery)> {
        let mut floor = 0;
        loop {
            let link = self.current_from(floor).await?;
            let next = {
                let mut consumer = slot(&link).lock().await;
                if consumer.is_none() {
                    match start_consumer(&link, queue, prefetch).await {
                        Ok(started) => *consumer = Some(started),
                        Err(error) => {
                            tracing::warn!(error = %error, "cannot consume {what}");
                            self.report_broken(link.generation);
                            floor = link.generation + 1;
                            continue;
                        }
                    }
                }
                match consumer.as_mut() {
                    Some((_, consumer)) => consumer.next().await,
                    None => None,
                }
            };
            match next {
                Some(Ok(delivery)) => return Ok((link, delivery)),
                Some(Err(_)) | None => {
                    self.report_broken(link.generation);
                    floor = link.generation + 1;
                }
            }
        }
    }

    /// The live connection, waiting (bounded) while a reconnect is under way.
    pub(super) async fn current(&self) -> Result<Arc<Link>> {
        self.current_from(0).await
    }

    /// The live connection of at least `generation`. Loops that just reported their connection broken wait
    /// here for its replacement: retrying on the dead one would spin without ever yielding to the supervisor.
    pub(super) async fn current_from(&self, generation: u64) -> Result<Arc<Link>> {
        let mut link = self.link.subscribe();
        let ready = |state: &LinkState| match state {
            LinkState::Up(link) => link.generation >= generation,
            LinkState::Reconnecting => false,
            LinkState::Closed => true,
        };
        match tokio::time::timeout(LINK_WAIT, link.wait_for(ready)).await {
            Ok(Ok(state)) => match &*state {
                LinkState::Up(link) => Ok(link.clone()),
                LinkState::Reconnecting | LinkState::Closed => Err(QueueError::Closed),
            },
            Ok(Err(_)) => Err(QueueError::Closed),
            Err(_) => Err(broker(format!("no connection to the broker for {} s", LINK_WAIT.as_secs()))),
        }
    }

    /// Marks the connection of `generation` broken, waking the supervisor to replace it.
    pub(super) fn report_broken(&self, generation: u64) {
        self.broken.send_if_modified(|g| {
            let newer = *g < generation;
            if newer {
                *g = generation;
            }
            newer
        });
    }
}
