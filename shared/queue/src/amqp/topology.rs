//! The exchanges and queues: their names, derived from the settings, and opening a connection that declares
//! all of them, enables publisher confirms and starts consuming control messages.

use super::link::Link;
use super::{AmqpQueue, AmqpSettings, Shared, broker};
use crate::{QueueError, Result};
use lapin::options::{
    BasicConsumeOptions, ConfirmSelectOptions, ExchangeDeclareOptions, ExchangeDeleteOptions, QueueBindOptions,
    QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{Channel, Connection, ConnectionProperties, Consumer, ExchangeKind};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

/// Connecting and declaring everything; a broker still booting can accept a connection and then stall.
const OPEN_TIMEOUT: Duration = Duration::from_secs(20);
/// Broker-side backstop against a task that kills every worker before our own count is read.
const DELIVERY_LIMIT: i64 = 100;

/// Validated AMQP names derived from the settings.
#[derive(Debug, Clone)]
pub(super) struct Names {
    pub(super) tasks_exchange: ShortString,
    pub(super) tasks_queue: ShortString,
    pub(super) dead_queue: ShortString,
    pub(super) events_queue: ShortString,
    pub(super) events_exchange: ShortString,
    pub(super) control_exchange: ShortString,
    pub(super) workers_exchange: ShortString,
}

fn short(name: String) -> Result<ShortString> {
    ShortString::try_new(name.clone()).map_err(|_| QueueError::Broker(format!("name too long for AMQP: {name}")))
}

impl Names {
    pub(super) fn new(settings: &AmqpSettings) -> Result<Self> {
        let names = Self {
            tasks_exchange: short(settings.exchange_name.clone())?,
            tasks_queue: short(settings.queue_name.clone())?,
            dead_queue: short(format!("{}.dead", settings.queue_name))?,
            events_queue: short(format!("{}.events", settings.queue_name))?,
            events_exchange: short(format!("{}.events", settings.exchange_name))?,
            control_exchange: short(format!("{}.control", settings.exchange_name))?,
            workers_exchange: short(format!("{}.workers", settings.exchange_name))?,
        };
        for route in &settings.routes {
            names.route_queue(route)?;
        }
        Ok(names)
    }

    /// The queue of a route: the task queue itself for the generic worker, `<queue_name>.<route>` otherwise.
    pub(super) fn route_queue(&self, route: &str) -> Result<ShortString> {
        if route.is_empty() { Ok(self.tasks_queue.clone()) } else { short(format!("{}.{route}", self.tasks_queue)) }
    }
}

/// Opens a connection, declares the topology, enables confirms and starts consuming control messages.
pub(super) async fn open_link(shared: &Shared, generation: u64) -> Result<(Arc<Link>, Consumer)> {
    tokio::time::timeout(OPEN_TIMEOUT, open_link_untimed(shared, generation))
        .await
        .map_err(|_| broker("timed out connecting to the broker"))?
}

/// Connects, over TLS with the configured certificate authority when there is one.
/// The frame size asked for when `broker_url` names none. lapin keeps buffers of 32 frames each way per
/// connection, zero-filled: at the broker's default of 128 KiB that is 8 MiB resident in every idle worker.
/// Larger messages are simply split into more frames.
const FRAME_MAX: u32 = 8192;

/// The user `broker_url` logs in as (lapin's default `guest` when it names none).
pub(super) fn login_user(broker_url: &str) -> Option<ShortString> {
    let uri: lapin::uri::AMQPUri = broker_url.parse().ok()?;
    ShortString::try_new(uri.authority.userinfo.username).ok()
}

pub(super) async fn connect(settings: &AmqpSettings, properties: ConnectionProperties) -> Result<Connection> {
    let mut uri: lapin::uri::AMQPUri = settings.broker_url.parse().map_err(|e: String| broker(e))?;
    if uri.query.frame_max.is_none() {
        uri.query.frame_max = Some(FRAME_MAX);
    }
    let Some(path) = &settings.tls_ca_file else {
        return Connection::connect_uri(uri, properties).await.map_err(broker);
    };
    let pem = std::fs::read_to_string(path).map_err(|e| {
        QueueError::Broker(format!("cannot read the CA file {} ([rabbitmq] tls_ca_file): {e}", path.display()))
    })?;
    let tls = lapin::tcp::OwnedTLSConfig { identity: None, cert_chain: Some(pem) };
    let runtime = lapin::runtime::default_runtime().map_err(broker)?;
    Connection::connect_uri_with_config(uri, properties, tls, runtime).await.map_err(broker)
}

/// The arguments every task queue is declared with. Changing them makes every existing deployment's declare
/// fail, so they stay as they are; [`explain_declare_error`] says what to do when they differ.
pub(super) fn task_queue_arguments(names: &Names) -> FieldTable {
    let mut args = FieldTable::default();
    args.insert("x-queue-type".into(), AMQPValue::LongString("quorum".into()));
    args.insert("x-delivery-limit".into(), AMQPValue::LongLongInt(DELIVERY_LIMIT));
    args.insert("x-dead-letter-exchange".into(), AMQPValue::LongString("".into()));
    args.insert("x-dead-letter-routing-key".into(), AMQPValue::LongString(names.dead_queue.as_str().into()));
    args
}

/// Declares one task queue (durable quorum, dead-lettering into `<queue_name>.dead`). A declare refused
/// because the queue exists with other arguments closes the channel; the error says what differs and what
/// to do.
pub(super) async fn declare_task_queue(
    connection: &Connection,
    channel: &Channel,
    names: &Names,
    queue: &ShortString,
) -> Result<()> {
    let Err(error) =
        channel.queue_declare(queue.clone(), QueueDeclareOptions::durable(), task_queue_arguments(names)).await
    else {
        return Ok(());
    };
    let error = error.to_string();
    if !error.contains("PRECONDITION_FAILED") {
        return Err(QueueError::Broker(format!("cannot declare the task queue `{queue}`: {error}")));
    }
    // The broker names only the first argument that differs; a plain durable declare that succeeds tells that
    // the queue is a classic one without arguments, as MiniBot 0.36 made it (an equal declare changes nothing).
    let classic = match connection.create_channel().await {
        Ok(probe) => {
            let plain = probe.queue_declare(queue.clone(), QueueDeclareOptions::durable(), FieldTable::default()).await;
            let _ = probe.close(200, "probed".into()).await;
            plain.is_ok()
        }
        Err(_) => false,
    };
    Err(explain_declare_error(queue.as_str(), &error, classic))
}

/// Binds the generic worker's queue to the tasks exchange (where MiniBot 0.36 published).
pub(super) async fn bind_generic_queue(channel: &Channel, names: &Names) -> Result<()> {
    let (queue, exchange) = (names.tasks_queue.clone(), names.tasks_exchange.clone());
    channel
        .queue_bind(queue, exchange, "".into(), QueueBindOptions::default(), FieldTable::default())
        .await
        .map_err(broker)?;
    Ok(())
}

/// The start-up message for a task queue the broker already holds in another shape.
pub(super) fn explain_declare_error(queue: &str, error: &str, classic: bool) -> QueueError {
    if error.contains("PRECONDITION_FAILED") || error.contains("inequivalent arg") {
        let what = if classic {
            format!(
                "the task queue `{queue}` exists on the broker as a classic queue (made by MiniBot 0.36 or an older version), and this version needs a quorum queue"
            )
        } else {
            format!("the task queue `{queue}` exists on the broker with other arguments than this version declares")
        };
        return QueueError::Topology(format!(
            "{what}: run `minibot queue migrate` to move its waiting tasks into a new quorum queue (see docs/deploy.md, \"Upgrades\"); broker said: {error}"
        ));
    }
    QueueError::Broker(format!("cannot declare the task queue `{queue}`: {error}"))
}

/// What only the orchestrator needs: the generic queue bound to the tasks exchange (where MiniBot 0.36
/// published), the events queue and its binding. A worker tries too, so a test or a single-user setup works in
/// any order, but a worker whose broker user may not do it (the least-privilege setup of docs/deploy.md) goes
/// on without it. Done on a channel of its own: a refusal closes the channel.
async fn declare_orchestrator_side(connection: &Connection, names: &Names, required: bool) -> Result<()> {
    let channel = connection.create_channel().await.map_err(broker)?;
    let declared = async {
        bind_generic_queue(&channel, names).await?;
        channel
            .queue_declare(names.events_queue.clone(), QueueDeclareOptions::durable(), FieldTable::default())
            .await
            .map_err(broker)?;
        let (queue, exchange) = (names.events_queue.clone(), names.events_exchange.clone());
        channel
            .queue_bind(queue, exchange, "".into(), QueueBindOptions::default(), FieldTable::default())
            .await
            .map_err(broker)
    }
    .await;
    let _ = channel.close(200, "declared".into()).await;
    match declared {
        Err(QueueError::Broker(error)) if !required && error.contains("ACCESS_REFUSED") => {
            tracing::debug!(error = %error, "the orchestrator's bindings are left to the orchestrator");
            Ok(())
        }
        other => other.map(|_| ()),
    }
}

async fn open_link_untimed(shared: &Shared, generation: u64) -> Result<(Arc<Link>, Consumer)> {
    let names = &shared.names;
    let properties =
        ConnectionProperties::default().with_connection_name(format!("minibot {}", shared.worker_id).into());
    let connection = connect(&shared.settings, properties).await?;
    let channel = connection.create_channel().await.map_err(broker)?;
    let durable = ExchangeDeclareOptions { durable: true, ..ExchangeDeclareOptions::default() };
    let exchanges = [&names.tasks_exchange, &names.control_exchange, &names.workers_exchange, &names.events_exchange];
    for exchange in exchanges {
        channel
            .exchange_declare(exchange.clone(), ExchangeKind::Fanout, durable, FieldTable::default())
            .await
            .map_err(broker)?;
    }
    channel
        .queue_declare(names.dead_queue.clone(), QueueDeclareOptions::durable(), FieldTable::default())
        .await
        .map_err(broker)?;
    declare_task_queue(&connection, &channel, names, &names.tasks_queue).await?;
    let mut declared = HashSet::from([String::new()]);
    for route in shared.settings.routes.iter().filter(|r| !r.is_empty()) {
        declare_task_queue(&connection, &channel, names, &names.route_queue(route)?).await?;
        declared.insert(route.clone());
    }
    declare_orchestrator_side(&connection, names, shared.settings.routes.is_empty()).await?;
    let control_queue = channel
        .queue_declare("".into(), QueueDeclareOptions::exclusive().auto_delete(), FieldTable::default())
        .await
        .map_err(broker)?;
    channel
        .queue_bind(
            control_queue.name().clone(),
            names.control_exchange.clone(),
            "".into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(broker)?;
    channel.confirm_select(ConfirmSelectOptions::default()).await.map_err(broker)?;
    let control_channel = connection.create_channel().await.map_err(broker)?;
    let controls = control_channel
        .basic_consume(
            control_queue.name().clone(),
            "".into(),
            BasicConsumeOptions { no_ack: true, exclusive: true, ..BasicConsumeOptions::default() },
            FieldTable::default(),
        )
        .await
        .map_err(broker)?;
    let link = Arc::new(Link {
        generation,
        connection,
        publisher: channel,
        declared_routes: std::sync::Mutex::new(declared),
        tasks: Mutex::new(None),
        events: Mutex::new(None),
        statuses: Mutex::new(None),
        getter: Mutex::new(None),
    });
    Ok((link, controls))
}

impl AmqpQueue {
    /// Messages waiting in the task queue and in the events queue (ready, not delivered).
    pub async fn depths(&self) -> Result<(u32, u32)> {
        let link = self.shared.current().await?;
        let channel = link.connection.create_channel().await.map_err(broker)?;
        let passive = QueueDeclareOptions { passive: true, ..QueueDeclareOptions::default() };
        let tasks = channel
            .queue_declare(self.shared.names.tasks_queue.clone(), passive, FieldTable::default())
            .await
            .map_err(broker)?;
        let events = channel
            .queue_declare(self.shared.names.events_queue.clone(), passive, FieldTable::default())
            .await
            .map_err(broker)?;
        let _ = channel.close(200, "done".into()).await;
        Ok((tasks.message_count(), events.message_count()))
    }

    /// Messages in the dead-letter queue `<queue_name>.dead`: tasks rejected past their attempts or undecodable.
    pub async fn dead_letters(&self) -> Result<u32> {
        let link = self.shared.current().await?;
        let channel = link.connection.create_channel().await.map_err(broker)?;
        let passive = QueueDeclareOptions { passive: true, ..QueueDeclareOptions::default() };
        let dead = channel
            .queue_declare(self.shared.names.dead_queue.clone(), passive, FieldTable::default())
            .await
            .map_err(broker)?;
        let _ = channel.close(200, "done".into()).await;
        Ok(dead.message_count())
    }

    /// Deletes the queues and exchanges this queue declared (tests and tear-down).
    pub async fn delete_topology(&self) -> Result<()> {
        let link = self.shared.current().await?;
        let channel = link.connection.create_channel().await.map_err(broker)?;
        let names = &self.shared.names;
        for queue in [&names.tasks_queue, &names.dead_queue, &names.events_queue] {
            channel.queue_delete(queue.clone(), QueueDeleteOptions::default()).await.map_err(broker)?;
        }
        for route in self.shared.settings.routes.iter().filter(|r| !r.is_empty()) {
            channel.queue_delete(names.route_queue(route)?, QueueDeleteOptions::default()).await.map_err(broker)?;
        }
        let exchanges =
            [&names.tasks_exchange, &names.control_exchange, &names.workers_exchange, &names.events_exchange];
        for exchange in exchanges {
            channel.exchange_delete(exchange.clone(), ExchangeDeleteOptions::default()).await.map_err(broker)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_longer_than_amqp_allows_are_an_error() {
        let key = minibot_protocol::MessageKey::new("topology-test-key-0123456789abcdef").unwrap();
        let mut settings = AmqpSettings::new("amqp://localhost", key);
        assert!(Names::new(&settings).is_ok());
        settings.queue_name = "q".repeat(300);
        assert!(matches!(Names::new(&settings), Err(QueueError::Broker(_))));
    }
}
