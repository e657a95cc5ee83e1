//! `minibot queue migrate`: turns a task queue the broker holds as a classic queue (MiniBot 0.36, or a queue
//! declared by hand) into the quorum queue this version declares, keeping every waiting task.
//!
//! The tasks move through `<queue>.migrating` (a quorum queue): each one is copied with a publisher confirm
//! before its original is acknowledged, so a crash at any point leaves every task in one of the two queues (a
//! task copied but not yet acknowledged is in both: at least once, as everywhere else). Running it again picks
//! up where it stopped. Stop the orchestrator and the workers first; a producer still publishing makes the
//! delete of the old queue wait (`if_empty`) until it drains again.
//!
//! Messages move as they are. Tasks an older version left waiting were not signed, and workers refuse them
//! into `<queue>.dead`; the migration counts them and says so. It never signs them: anybody with broker
//! credentials can put a queue into the classic shape that sends the operator here, and plant tasks in it.

use super::topology::{Names, task_queue_arguments};
use super::{AmqpSettings, broker};
use crate::{QueueError, Result};
use lapin::options::{
    BasicAckOptions, BasicGetOptions, BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions,
    QueueDeleteOptions,
};
use lapin::types::{FieldTable, ShortString};
use lapin::{Channel, Confirmation, Connection, ConnectionProperties};

/// What a migration did, per queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migrated {
    pub queue: String,
    /// False when it already was a quorum queue (nothing to do but finish an interrupted run).
    pub converted: bool,
    pub tasks_moved: u64,
    /// Of those, the ones no version of this project signed (left by an older one): workers refuse them.
    pub unsigned: u64,
}

/// Migrates the task queue of every route in `settings.routes` (and the generic one).
pub async fn migrate(settings: &AmqpSettings) -> Result<Vec<Migrated>> {
    let names = Names::new(settings)?;
    let connection = super::topology::connect(settings, ConnectionProperties::default()).await?;
    let mut queues = vec![names.tasks_queue.clone()];
    for route in settings.routes.iter().filter(|r| !r.is_empty()) {
        queues.push(names.route_queue(route)?);
    }
    let mut done = Vec::new();
    for queue in queues {
        let is_base = queue == names.tasks_queue;
        done.push(migrate_one(&connection, &names, &queue, is_base).await?);
    }
    let _ = connection.close(200, "migrated".into()).await;
    Ok(done)
}

async fn channel(connection: &Connection) -> Result<Channel> {
    let channel = connection.create_channel().await.map_err(broker)?;
    channel.confirm_select(ConfirmSelectOptions::default()).await.map_err(broker)?;
    Ok(channel)
}

/// Whether `queue` can be declared as our quorum queue (a refused declare closes its channel, so on one of its
/// own).
async fn is_quorum(connection: &Connection, names: &Names, queue: &ShortString) -> Result<bool> {
    let probe = connection.create_channel().await.map_err(broker)?;
    let declared =
        probe.queue_declare(queue.clone(), QueueDeclareOptions::durable(), task_queue_arguments(names)).await;
    let _ = probe.close(200, "probed".into()).await;
    Ok(declared.is_ok())
}

async fn migrate_one(connection: &Connection, names: &Names, queue: &ShortString, is_base: bool) -> Result<Migrated> {
    let holding = ShortString::try_new(format!("{queue}.migrating"))
        .map_err(|_| QueueError::Broker(format!("name too long for AMQP: {queue}.migrating")))?;
    let first = channel(connection).await?;
    first
        .queue_declare(holding.clone(), QueueDeclareOptions::durable(), task_queue_arguments(names))
        .await
        .map_err(broker)?;
    let converted = !is_quorum(connection, names, queue).await?;
    let mut moved = 0;
    if converted {
        moved += move_all(&first, queue, &holding, &mut 0).await?;
        // Only once empty and unused: a task published meanwhile is moved by the next round, and a worker still
        // holding a task (unacknowledged, which `if_empty` does not count) must be stopped first.
        loop {
            let delete = QueueDeleteOptions { if_empty: true, if_unused: true, ..QueueDeleteOptions::default() };
            let probe = self::channel(connection).await?;
            let Err(error) = probe.queue_delete(queue.clone(), delete).await else {
                let _ = probe.close(200, "deleted".into()).await;
                break;
            };
            let error = error.to_string();
            // A refused delete closed that channel; look again on a fresh one.
            let channel = self::channel(connection).await?;
            let passive = QueueDeclareOptions { passive: true, ..QueueDeclareOptions::default() };
            let state = channel.queue_declare(queue.clone(), passive, FieldTable::default()).await.map_err(broker)?;
            if state.consumer_count() > 0 {
                return Err(QueueError::Broker(format!(
                    "{queue} still has {} consumer(s): stop every worker and orchestrator of the old version, then \
                     run this again",
                    state.consumer_count()
                )));
            }
            let more = move_all(&channel, queue, &holding, &mut 0).await?;
            let _ = channel.close(200, "moved".into()).await;
            if more == 0 {
                return Err(QueueError::Broker(format!("cannot delete the old queue {queue}: {error}")));
            }
            moved += more;
        }
    }
    let _ = first.close(200, "moved".into()).await;
    // A channel that read the classic queue keeps state about it that breaks on the new queue of the same name
    // (RabbitMQ 3.10 fails the channel with an internal error): the rest runs on a fresh one.
    let channel = channel(connection).await?;
    if converted {
        channel
            .queue_declare(queue.clone(), QueueDeclareOptions::durable(), task_queue_arguments(names))
            .await
            .map_err(broker)?;
    }
    if is_base {
        super::topology::bind_generic_queue(&channel, names).await?;
    }
    let mut unsigned = 0;
    let back = move_all(&channel, &holding, queue, &mut unsigned).await?;
    // Nothing publishes to the holding queue but this run (RabbitMQ 3.10 cannot `if_empty`-delete a quorum
    // queue: it answers with an internal error).
    channel.queue_delete(holding, QueueDeleteOptions::default()).await.map_err(broker)?;
    let _ = channel.close(200, "done".into()).await;
    Ok(Migrated { queue: queue.to_string(), converted, tasks_moved: moved.max(back), unsigned })
}

/// Copies every message of `from` into `to` (confirmed) and then acknowledges it in `from`, counting the
/// unsigned ones.
async fn move_all(channel: &Channel, from: &ShortString, to: &ShortString, unsigned: &mut u64) -> Result<u64> {
    let mut moved = 0;
    while let Some(message) =
        channel.basic_get(from.clone(), BasicGetOptions { no_ack: false }).await.map_err(broker)?
    {
        let delivery = message.delivery;
        // The copy is a new message: its old delivery count would make its first delivery look like a retry.
        let mut properties = delivery.properties.clone();
        if let Some(headers) = properties.headers().clone() {
            let mut kept = FieldTable::default();
            for (key, value) in headers.inner() {
                if !matches!(
                    key.as_str(),
                    "x-delivery-count"
                        | "x-death"
                        | "x-first-death-reason"
                        | "x-first-death-queue"
                        | "x-first-death-exchange"
                ) {
                    kept.insert(key.clone(), value.clone());
                }
            }
            properties = properties.with_headers(kept);
        }
        let confirm = channel
            .basic_publish(
                "".into(),
                to.clone(),
                BasicPublishOptions { mandatory: true, immediate: false },
                &delivery.data,
                properties,
            )
            .await
            .map_err(broker)?
            .await
            .map_err(broker)?;
        if !matches!(confirm, Confirmation::Ack(None)) {
            return Err(QueueError::Broker(format!("the broker did not take a task into {to}: {confirm:?}")));
        }
        delivery.acker.ack(BasicAckOptions::default()).await.map_err(broker)?;
        moved += 1;
        if !minibot_protocol::is_sealed(&delivery.data) {
            *unsigned += 1;
        }
    }
    Ok(moved)
}
