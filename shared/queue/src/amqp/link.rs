//! Connection supervision: the live connection ([`Link`]) and its generation, the supervisor that pumps control
//! messages while it lives and reconnects with backoff when it dies, and the waits of every operation for a
//! live connection and for the next delivery of a consumer.

use super::topology::open_link;
use super::{BACKOFF_MAX, BACKOFF_MIN, Shared, broker, lock};
use crate::{QueueError, Result};
use backon::{BackoffBuilder, ExponentialBuilder};
use futures_util::StreamExt;
use futures_util::stream::SelectAll;
use lapin::options::{BasicConsumeOptions, BasicGetOptions, BasicQosOptions, QueueBindOptions, QueueDeclareOptions};
use lapin::types::{FieldTable, ShortString};
use lapin::{Channel, Connection, Consumer};
use minibot_protocol::{ControlMessage, SealKind};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

/// How long an operation waits for a connection before it gives up with an error.
const LINK_WAIT: Duration = Duration::from_secs(60);
/// Pauses between empty polls of a worker with several routes: short while work flows, longer when quiet. An
/// empty `basic.get` on a quorum queue is still a command in its log, so a long-idle worker polls slowly.
const POLL_BUSY: Duration = Duration::from_millis(20);
const POLL_IDLE: Duration = Duration::from_millis(50);
const POLL_QUIET: Duration = Duration::from_millis(250);

/// The consumers of one kind on one channel, read as one stream (a worker consumes a queue per route).
pub(super) type Consumers = (Channel, SelectAll<Consumer>);

/// One live connection and what hangs off it. Replaced wholesale on reconnect.
pub(super) struct Link {
    pub(super) generation: u64,
    pub(super) connection: Connection,
    /// Confirm-mode channel all publishes share, so concurrent publishes pipeline.
    pub(super) publisher: Channel,
    /// Routes whose task queue is known to exist on this connection's broker.
    pub(super) declared_routes: std::sync::Mutex<HashSet<String>>,
    /// Started on first use: the orchestrator never consumes tasks, a worker never consumes events.
    pub(super) tasks: Mutex<Option<Consumers>>,
    pub(super) events: Mutex<Option<Consumers>>,
    pub(super) statuses: Mutex<Option<Consumers>>,
    /// The channel a worker with several routes polls them on (see [`Shared::next_polled`]).
    pub(super) getter: Mutex<Option<Channel>>,
}

#[derive(Clone)]
pub(super) enum LinkState {
    Up(Arc<Link>),
    Reconnecting,
    /// [`AmqpQueue::close`](super::AmqpQueue::close) was called: waiting is pointless.
    Closed,
}

/// The waits between reconnects, and between publishes the broker did not confirm: `BACKOFF_MIN` doubling up to
/// `BACKOFF_MAX`, without end (a reconnect never gives up; a publish is bounded by its own window).
pub(super) fn backoff() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(BACKOFF_MIN)
        .with_max_delay(BACKOFF_MAX)
        .with_factor(2.0)
        .without_max_times()
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
        // Each outage starts again from the shortest wait; the first one gives the broker a moment.
        let mut delays = backoff().build();
        loop {
            let delay = delays.next().unwrap_or(BACKOFF_MAX);
            tokio::time::sleep(delay).await;
            match open_link(&shared, generation + 1).await {
                Ok((new_link, new_controls)) => {
                    link = new_link;
                    controls = new_controls;
                    break;
                }
                Err(error) => {
                    // A queue in another shape never heals by retrying: say so where it is seen.
                    if matches!(error, QueueError::Topology(_)) {
                        tracing::error!(error = %error, "reconnect refused");
                    } else {
                        tracing::debug!(error = %error, ?delay, "reconnect failed");
                    }
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
        let Ok(body) = shared.unseal(SealKind::Control, &delivery) else { continue };
        match ControlMessage::decode(body) {
            Ok(message) => lock(&shared.controls).push(message),
            Err(error) => {
                tracing::error!(error = %error, "control message does not decode; dropped")
            }
        }
    }
}

/// Binds a queue of this orchestrator's own (exclusive: it goes with the connection) to the workers' status
/// exchange and consumes it without acknowledgements.
async fn start_status_consumer(link: &Link, exchange: ShortString) -> Result<Consumers> {
    let channel = link.connection.create_channel().await.map_err(broker)?;
    let queue = channel
        .queue_declare("".into(), QueueDeclareOptions::exclusive().auto_delete(), FieldTable::default())
        .await
        .map_err(broker)?;
    channel
        .queue_bind(queue.name().clone(), exchange, "".into(), QueueBindOptions::default(), FieldTable::default())
        .await
        .map_err(broker)?;
    let options = BasicConsumeOptions { no_ack: true, exclusive: true, ..BasicConsumeOptions::default() };
    let consumer =
        channel.basic_consume(queue.name().clone(), "".into(), options, FieldTable::default()).await.map_err(broker)?;
    Ok((channel, futures_util::stream::select_all([consumer])))
}

/// Consumes `queues` on one new channel. The prefetch applies to each consumer (RabbitMQ's per-consumer
/// `basic.qos`), so a worker with several routes holds at most `prefetch` tasks of each.
async fn start_consumers(link: &Link, queues: &[ShortString], prefetch: u16) -> Result<Consumers> {
    let channel = link.connection.create_channel().await.map_err(broker)?;
    channel.basic_qos(prefetch.max(1), BasicQosOptions::default()).await.map_err(broker)?;
    let mut consumers = Vec::with_capacity(queues.len());
    for queue in queues {
        let consumer = channel
            .basic_consume(queue.clone(), "".into(), BasicConsumeOptions::default(), FieldTable::default())
            .await
            .map_err(broker)?;
        consumers.push(consumer);
    }
    Ok((channel, futures_util::stream::select_all(consumers)))
}

/// What a side consumes.
#[derive(Debug, Clone, Copy)]
pub(super) enum Consuming {
    /// A worker: the queues of its routes.
    Tasks,
    /// The orchestrator: worker events.
    Events,
    /// The orchestrator: worker statuses, through a queue of its own bound to the workers' exchange.
    Statuses,
}

/// Unacked events the orchestrator's consumer may hold.
const EVENT_PREFETCH: u16 = 256;

impl Shared {
    async fn start(&self, link: &Link, kind: Consuming) -> Result<Consumers> {
        match kind {
            Consuming::Tasks => {
                let queues = self
                    .settings
                    .routes
                    .iter()
                    .map(|route| self.names.route_queue(route))
                    .collect::<Result<Vec<_>>>()?;
                start_consumers(link, &queues, self.settings.prefetch_count).await
            }
            Consuming::Events => {
                start_consumers(link, std::slice::from_ref(&self.names.events_queue), EVENT_PREFETCH).await
            }
            Consuming::Statuses => start_status_consumer(link, self.names.workers_exchange.clone()).await,
        }
    }

    /// The next delivery from the consumer in `slot` of the current link, starting that consumer first when
    /// needed. A consumer that cannot start, fails or ends marks its link broken, and the wait goes on on the
    /// next link.
    pub(super) async fn next_delivery(&self, kind: Consuming) -> Result<(Arc<Link>, lapin::message::Delivery)> {
        let what = match kind {
            Consuming::Tasks => "tasks",
            Consuming::Events => "events",
            Consuming::Statuses => "worker statuses",
        };
        let mut floor = 0;
        loop {
            let link = self.current_from(floor).await?;
            let next = {
                let slot = match kind {
                    Consuming::Tasks => &link.tasks,
                    Consuming::Events => &link.events,
                    Consuming::Statuses => &link.statuses,
                };
                let mut consumer = slot.lock().await;
                if consumer.is_none() {
                    match self.start(&link, kind).await {
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

    /// The next task of a worker with several routes, taken with `basic.get` from each route's queue in turn,
    /// pausing 20 ms between empty rounds (50 ms after a quiet second, 250 ms after ten). Consumers would not do here: the
    /// broker's prefetch is per consumer (quorum queues have no channel-wide one), so a busy worker would hold a
    /// task of every route it serves, unstarted, while other workers idle, and each held task would lose an
    /// attempt when that worker stops.
    pub(super) async fn next_polled(&self) -> Result<(Arc<Link>, lapin::message::Delivery)> {
        let queues =
            self.settings.routes.iter().map(|route| self.names.route_queue(route)).collect::<Result<Vec<_>>>()?;
        let since = std::time::Instant::now();
        let mut floor = 0;
        loop {
            let first = self.next_route.load(std::sync::atomic::Ordering::Relaxed);
            let link = self.current_from(floor).await?;
            let channel = {
                let mut slot = link.getter.lock().await;
                if slot.is_none() {
                    match link.connection.create_channel().await {
                        Ok(channel) => *slot = Some(channel),
                        Err(error) => {
                            tracing::warn!(error = %error, "cannot open a channel to take tasks");
                            self.report_broken(link.generation);
                            floor = link.generation + 1;
                            continue;
                        }
                    }
                }
                slot.clone()
            };
            let Some(channel) = channel else { continue };
            let mut failed = false;
            for turn in 0..queues.len() {
                // Round robin over the routes, so one busy route cannot starve the others.
                let index = (first + turn) % queues.len();
                match channel.basic_get(queues[index].clone(), BasicGetOptions { no_ack: false }).await {
                    Ok(Some(message)) => {
                        self.next_route.store((index + 1) % queues.len(), std::sync::atomic::Ordering::Relaxed);
                        return Ok((link, message.delivery));
                    }
                    Ok(None) => {}
                    Err(error) => {
                        // A queue deleted under us closes the channel: reconnecting declares it again.
                        tracing::warn!(error = %error, queue = %queues[index], "cannot take tasks");
                        failed = true;
                        break;
                    }
                }
            }
            if failed {
                self.report_broken(link.generation);
                floor = link.generation + 1;
                continue;
            }
            let pause = match since.elapsed() {
                quiet if quiet < Duration::from_secs(1) => POLL_BUSY,
                quiet if quiet < Duration::from_secs(10) => POLL_IDLE,
                _ => POLL_QUIET,
            };
            tokio::time::sleep(pause).await;
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

#[cfg(test)]
mod tests {
    use super::backoff;
    use backon::BackoffBuilder;
    use std::time::Duration;

    /// A broker that stays down is tried again every 5 s at most, for as long as it takes.
    #[test]
    fn reconnects_wait_from_a_tenth_of_a_second_up_to_five_and_never_give_up() {
        // In whole milliseconds: backon multiplies by an `f32` factor, a few nanoseconds off.
        let waits: Vec<u128> = backoff().build().take(10).map(|wait: Duration| wait.as_millis()).collect();
        assert_eq!(waits, [100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000, 5000]);
    }
}
