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
use lapin::{Connection, ConnectionProperties, Consumer, ExchangeKind};
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
    pub(super) control_exchange: ShortString,
}

impl Names {
    pub(super) fn new(settings: &AmqpSettings) -> Result<Self> {
        let short = |s: String| {
            ShortString::try_new(s.clone()).map_err(|_| QueueError::Broker(format!("name too long for AMQP: {s}")))
        };
        Ok(Self {
            tasks_exchange: short(settings.exchange_name.clone())?,
            tasks_queue: short(settings.queue_name.clone())?,
            dead_queue: short(format!("{}.dead", settings.queue_name))?,
            events_queue: short(format!("{}.events", settings.queue_name))?,
            control_exchange: short(format!("{}.control", settings.exchange_name))?,
        })
    }
}

/// Opens a connection, declares the topology, enables confirms and starts consuming control messages.
pub(super) async fn open_link(shared: &Shared, generation: u64) -> Result<(Arc<Link>, Consumer)> {
    tokio::time::timeout(OPEN_TIMEOUT, open_link_untimed(shared, generation))
        .await
        .map_err(|_| broker("timed out connecting to the broker"))?
}

async fn open_link_untimed(shared: &Shared, generation: u64) -> Result<(Arc<Link>, Consumer)> {
    let names = &shared.names;
    let properties =
        ConnectionProperties::default().with_connection_name(format!("minibot {}", shared.worker_id).into());
    let connection = Connection::connect(&shared.settings.broker_url, properties).await.map_err(broker)?;
    let channel = connection.create_channel().await.map_err(broker)?;
    let durable = ExchangeDeclareOptions { durable: true, ..ExchangeDeclareOptions::default() };
    for exchange in [&names.tasks_exchange, &names.control_exchange] {
        channel
            .exchange_declare(exchange.clone(), ExchangeKind::Fanout, durable, FieldTable::default())
            .await
            .map_err(broker)?;
    }
    channel
        .queue_declare(names.dead_queue.clone(), QueueDeclareOptions::durable(), FieldTable::default())
        .await
        .map_err(broker)?;
    let mut task_args = FieldTable::default();
    task_args.insert("x-queue-type".into(), AMQPValue::LongString("quorum".into()));
    task_args.insert("x-delivery-limit".into(), AMQPValue::LongLongInt(DELIVERY_LIMIT));
    task_args.insert("x-dead-letter-exchange".into(), AMQPValue::LongString("".into()));
    task_args.insert("x-dead-letter-routing-key".into(), AMQPValue::LongString(names.dead_queue.as_str().into()));
    channel.queue_declare(names.tasks_queue.clone(), QueueDeclareOptions::durable(), task_args).await.map_err(|e| {
        QueueError::Broker(format!(
            "cannot declare the task queue {} as a quorum queue (an existing queue of another kind must be \
                 deleted first): {e}",
            names.tasks_queue
        ))
    })?;
    channel
        .queue_bind(
            names.tasks_queue.clone(),
            names.tasks_exchange.clone(),
            "".into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(broker)?;
    channel
        .queue_declare(names.events_queue.clone(), QueueDeclareOptions::durable(), FieldTable::default())
        .await
        .map_err(broker)?;
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
        tasks: Mutex::new(None),
        events: Mutex::new(None),
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

    /// Deletes the queues and exchanges this queue declared (tests and tear-down).
    pub async fn delete_topology(&self) -> Result<()> {
        let link = self.shared.current().await?;
        let channel = link.connection.create_channel().await.map_err(broker)?;
        let names = &self.shared.names;
        for queue in [&names.tasks_queue, &names.dead_queue, &names.events_queue] {
            channel.queue_delete(queue.clone(), QueueDeleteOptions::default()).await.map_err(broker)?;
        }
        for exchange in [&names.tasks_exchange, &names.control_exchange] {
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
        let mut settings = AmqpSettings::new("amqp://localhost");
        assert!(Names::new(&settings).is_ok());
        settings.queue_name = "q".repeat(300);
        assert!(matches!(Names::new(&settings), Err(QueueError::Broker(_))));
    }
}
