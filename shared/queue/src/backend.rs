//! Backend selection: the queue `[tasks] backend` names, where it lives (`[tasks.sqlite]`, `[rabbitmq]`), and
//! opening a worker's side ([`open_worker_queue`]) or the orchestrator's side ([`open_orchestrator_queue`]).
//! Errors name the config key at fault.

use crate::amqp::{AmqpQueue, AmqpSettings};
use crate::sqlite::SqliteQueue;
use crate::{QueueError, Result, TaskQueue, WorkQueue};
use minibot_config::{Config, TaskBackend};
use minibot_protocol::{KeyError, MessageKey};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The id the orchestrator's side goes by (SQLite lease holder, AMQP connection name).
const ORCHESTRATOR_ID: &str = "orchestrator";

/// The orchestrator's side of the configured queue.
pub struct OrchestratorQueue {
    pub queue: Arc<dyn TaskQueue>,
    /// The same queue when it is SQLite, to release a dead local worker's leases at once
    /// ([`SqliteQueue::release_worker`]).
    pub sqlite: Option<Arc<SqliteQueue>>,
}

/// The tasks database (`[tasks.sqlite].sqlite_url`), resolved against the config's folder. The SQLite queue and
/// the orchestrator's task records share it.
pub fn tasks_db_path(config: &Config) -> Result<PathBuf> {
    let url = &config.tasks.sqlite.sqlite_url;
    minibot_config::sqlite_path_from_url(url)
        .map(|path| config.resolve_path(&path))
        .ok_or_else(|| QueueError::NotSqliteUrl { key: "tasks.sqlite.sqlite_url", url: url.clone() })
}

/// `[rabbitmq]` as the AMQP backend takes it, for a side that takes tasks of `routes` (none: the orchestrator).
/// Fails, naming `rabbitmq.message_key`, when the key that signs broker messages is missing or too short.
pub fn amqp_settings(config: &Config, routes: &[String]) -> Result<AmqpSettings> {
    let section = &config.rabbitmq;
    Ok(AmqpSettings {
        broker_url: section.broker_url.clone(),
        queue_name: section.queue_name.clone(),
        exchange_name: section.exchange_name.clone(),
        prefetch_count: section.prefetch_count.max(1),
        routes: routes.to_vec(),
        tls_ca_file: section.tls_ca_file.as_deref().filter(|f| !f.trim().is_empty()).map(|f| config.resolve_path(f)),
        message_key: message_key(config)?,
    })
}

/// The key every broker message is signed with; without one anybody with broker credentials could command the
/// workers, so neither side starts.
pub fn message_key(config: &Config) -> Result<MessageKey> {
    MessageKey::new(&config.rabbitmq.message_key).map_err(|error| {
        let message = match error {
            KeyError::Empty => "is not set, and the RabbitMQ backend signs every broker message with it; make one with \
                `minibot vault generate MESSAGE_KEY` and set `message_key = \"${secret:MESSAGE_KEY}\"` under [rabbitmq] \
                (or MINIBOT__RABBITMQ__MESSAGE_KEY in the environment, as in deploy/minibot.env), the same on the \
                orchestrator and every worker host (docs/deploy.md, \"Signed messages\")"
                .to_string(),
            error => format!("{error} (`minibot vault generate MESSAGE_KEY` makes one of 64 hex digits)"),
        };
        QueueError::Setting { key: "rabbitmq.message_key", message }
    })
}

/// A broker URL for messages: the password is replaced.
pub fn redact_url(url: &str) -> String {
    match (url.split_once("://"), url.rfind('@')) {
        (Some((scheme, rest)), Some(at)) if at > scheme.len() + 3 => {
            let credentials = &rest[..at - scheme.len() - 3];
            let user = credentials.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}:***@{}", &url[at + 1..])
        }
        _ => url.to_string(),
    }
}

/// Opens a worker's side of the configured queue, taking tasks of `routes` only.
pub async fn open_worker_queue(config: &Config, worker_id: &str, routes: &[String]) -> Result<Arc<dyn WorkQueue>> {
    match config.tasks.backend {
        TaskBackend::Sqlite => Ok(Arc::new(open_sqlite(config, worker_id).await?.with_routes(routes))),
        TaskBackend::Rabbitmq => Ok(Arc::new(connect_amqp(config, worker_id, routes).await?)),
    }
}

/// Opens the orchestrator's side of the configured queue. With RabbitMQ, the queues of `specialist_routes` are
/// declared at once: a least-privilege worker may not declare one (docs/deploy.md, "Broker users").
pub async fn open_orchestrator_queue(config: &Config, specialist_routes: &[String]) -> Result<OrchestratorQueue> {
    match config.tasks.backend {
        TaskBackend::Sqlite => {
            let queue = Arc::new(open_sqlite(config, ORCHESTRATOR_ID).await?);
            Ok(OrchestratorQueue { queue: queue.clone(), sqlite: Some(queue) })
        }
        TaskBackend::Rabbitmq => {
            let queue = connect_amqp(config, ORCHESTRATOR_ID, &[]).await?;
            queue.declare_route_queues(specialist_routes).await?;
            Ok(OrchestratorQueue { queue: Arc::new(queue), sqlite: None })
        }
    }
}

async fn open_sqlite(config: &Config, id: &str) -> Result<SqliteQueue> {
    let path = tasks_db_path(config)?;
    let lease = Duration::from_secs(config.tasks.sqlite.lease_timeout_seconds);
    SqliteQueue::open(&path, id, lease).await
}

async fn connect_amqp(config: &Config, id: &str, routes: &[String]) -> Result<AmqpQueue> {
    let settings = amqp_settings(config, routes)?;
    if let Some(path) = &settings.tls_ca_file
        && let Err(error) = std::fs::metadata(path)
    {
        let message = format!("cannot read {}: {error}", path.display());
        return Err(QueueError::Setting { key: "rabbitmq.tls_ca_file", message });
    }
    AmqpQueue::connect(&settings, id).await.map_err(|error| match error {
        // Reached, but holding a queue in another shape: the message says what to do.
        QueueError::Topology(_) => error,
        // Reached, but this broker user may not do what it asked.
        QueueError::Broker(text) if text.contains("ACCESS_REFUSED") => QueueError::Setting {
            key: "rabbitmq.broker_url",
            message: format!(
                "the broker user of {} may not declare or use part of the queue topology ({text}); a worker with \
                 the least-privilege permissions of docs/deploy.md (\"Broker users\") needs the orchestrator to have \
                 run once first, so that the queues exist",
                redact_url(&settings.broker_url)
            ),
        },
        error => QueueError::Unreachable {
            url: redact_url(&settings.broker_url),
            key: "rabbitmq.broker_url",
            error: Box::new(error),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_url_hides_the_password_only() {
        assert_eq!(redact_url("amqp://guest:secret@rabbit:5672/%2f"), "amqp://guest:***@rabbit:5672/%2f");
        assert_eq!(redact_url("amqp://user@rabbit"), "amqp://user:***@rabbit");
        assert_eq!(redact_url("amqp://rabbit:5672"), "amqp://rabbit:5672");
        assert_eq!(redact_url("amqp://a:p@ss@host"), "amqp://a:***@host", "the last @ ends the credentials");
    }

    #[test]
    fn tasks_db_path_resolves_against_the_config_folder_and_names_the_key() {
        let mut config = Config::defaults("/srv/minibot");
        config.tasks.sqlite.sqlite_url = "sqlite+aiosqlite:///./data/tasks.db".into();
        assert_eq!(tasks_db_path(&config).ok(), Some(PathBuf::from("/srv/minibot/./data/tasks.db")));
        config.tasks.sqlite.sqlite_url = "postgres://db/tasks".into();
        let error = tasks_db_path(&config).err().map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(error, "tasks.sqlite.sqlite_url `postgres://db/tasks` is not a SQLite URL");
    }

    #[tokio::test]
    async fn an_unreachable_broker_is_named_with_its_password_hidden() {
        let mut config = Config::defaults("/srv/minibot");
        config.tasks.backend = TaskBackend::Rabbitmq;
        // Port 1 on the loopback refuses at once.
        config.rabbitmq.broker_url = "amqp://guest:secret@127.0.0.1:1/%2f".into();
        config.rabbitmq.message_key = "backend-test-key-0123456789abcdef".into();
        let error =
            open_worker_queue(&config, "w", &[String::new()]).await.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            error.starts_with("cannot reach RabbitMQ at amqp://guest:***@127.0.0.1:1/%2f (rabbitmq.broker_url): "),
            "{error}"
        );
        assert!(!error.contains("secret"), "{error}");
    }

    #[tokio::test]
    async fn a_missing_or_short_message_key_stops_both_sides_naming_the_key() {
        let mut config = Config::defaults("/srv/minibot");
        config.tasks.backend = TaskBackend::Rabbitmq;
        config.rabbitmq.broker_url = "amqp://guest:guest@127.0.0.1:1/%2f".into();
        let worker = open_worker_queue(&config, "w", &[String::new()]).await.err().map(|e| e.to_string());
        let worker = worker.unwrap_or_default();
        assert!(worker.starts_with("rabbitmq.message_key: is not set"), "{worker}");
        assert!(worker.contains("minibot vault generate"), "{worker}");
        assert!(!worker.contains('\n'), "one line: {worker}");
        let orchestrator = open_orchestrator_queue(&config, &[]).await.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(orchestrator.starts_with("rabbitmq.message_key: is not set"), "{orchestrator}");
        config.rabbitmq.message_key = "too-short".into();
        let error = open_orchestrator_queue(&config, &[]).await.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(error.starts_with("rabbitmq.message_key: is 9 characters long; use at least 32"), "{error}");
    }
}
