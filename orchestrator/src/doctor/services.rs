//! The task queue (and with RabbitMQ, the broker and the workers heard on it) and the MCP servers.

use super::report::Report;
use crate::checks::workers;
use minibot_config::{Config, TaskBackend};
use minibot_queue::{QueueError, backend};
use std::io::Write;
use std::time::Duration;

/// The longest the broker gets to accept a connection.
const BROKER_TIMEOUT: Duration = Duration::from_secs(15);

/// The `tasks` line, and with RabbitMQ the `broker` and `workers` lines.
pub async fn tasks(config: &Config, report: &mut Report<impl Write>) {
    if !config.tasks.enabled {
        report.skip("tasks", "off ([tasks] enabled = false)");
        return;
    }
    if config.tasks.backend == TaskBackend::Sqlite {
        let queue =
            backend::tasks_db_path(config).map_or_else(|_| config.tasks.sqlite.sqlite_url.clone(), |path| tidy(&path));
        report.ok(
            "tasks",
            format!(
                "SQLite queue {queue}; minibot starts {} local worker(s) itself",
                config.tasks.local_worker_count()
            ),
        );
        return;
    }
    let url = backend::redact_url(&config.rabbitmq.broker_url);
    let opened = tokio::time::timeout(BROKER_TIMEOUT, backend::open_orchestrator_queue(config, &[])).await;
    let queue = match opened {
        Ok(Ok(opened)) => opened.queue,
        Ok(Err(error)) => {
            report.fail("broker", error.to_string(), broker_fix(&error));
            return;
        }
        Err(_) => {
            report.fail(
                "broker",
                format!("RabbitMQ at {url} did not answer within {} s", BROKER_TIMEOUT.as_secs()),
                "check `rabbitmq.broker_url` and the network to the broker",
            );
            return;
        }
    };
    report.ok("broker", format!("RabbitMQ at {url}: connected"));
    let window = workers::listen_window(config);
    let heard = workers::listen(queue.as_ref(), window).await;
    queue.close().await;
    match heard {
        Ok(seen) if seen.is_empty() => report.warn(
            "workers",
            format!("none sent a heartbeat within {:.1} s: tasks wait until one runs", window.as_secs_f32()),
            "start `minibot-worker` with this broker and message key (docs/deploy.md)",
        ),
        Ok(seen) => {
            let each: Vec<String> = seen
                .iter()
                .map(|w| format!("{} on {} (load {}/{})", w.worker_id, w.host, w.load, w.capacity))
                .collect();
            report.ok("workers", format!("{} alive: {}", seen.len(), each.join(", ")));
        }
        Err(error) => report.warn("workers", format!("lost the broker while listening: {error}"), ""),
    }
}

fn broker_fix(error: &QueueError) -> String {
    match error {
        QueueError::Setting { key, .. } => format!("correct `{key}` as the message says"),
        QueueError::Unreachable { .. } => "start RabbitMQ, or set `rabbitmq.broker_url` to where it listens".into(),
        QueueError::Topology(_) => "run `minibot queue migrate`".into(),
        _ => "check [rabbitmq] and the broker's log".into(),
    }
}

/// One `mcp` line per configured server: it starts (or answers) and lists its tools.
pub async fn mcp(config: &Config, report: &mut Report<impl Write>) {
    let section = &config.tools.mcp;
    if !section.enabled || section.servers.is_empty() {
        report.skip("mcp", "no MCP servers configured");
        return;
    }
    // The hub connects every server at once, each within `[tools.mcp] timeout_seconds`.
    let limit = Duration::try_from_secs_f64(section.timeout_seconds).unwrap_or(Duration::from_secs(10))
        + Duration::from_secs(5);
    let hub = match tokio::time::timeout(limit, minibot_mcp::McpHub::start(config)).await {
        Ok(Ok(hub)) => hub,
        Ok(Err(error)) => {
            report.fail("mcp", error.to_string(), "correct the [[tools.mcp.servers]] entry the message names");
            return;
        }
        Err(_) => {
            report.fail(
                "mcp",
                format!("the servers did not all answer within {} s", limit.as_secs()),
                "check each [[tools.mcp.servers]] command or url",
            );
            return;
        }
    };
    let statuses = hub.status();
    for server in &section.servers {
        let Some(status) = statuses.iter().find(|s| s.name == server.name) else {
            report.fail(
                "mcp",
                format!(
                    "`{}` was not started: its name is empty, repeated, or makes tool names providers refuse",
                    server.name
                ),
                "give it a short unique name of letters, digits, `_` or `-`",
            );
            continue;
        };
        match &status.error {
            Some(error) => {
                let what = match (&server.command, &server.url) {
                    (Some(command), _) => format!("its command `{command}`"),
                    (None, Some(url)) => format!("its url {url}"),
                    (None, None) => "its command or url".into(),
                };
                report.fail("mcp", error, format!("check {what} in [[tools.mcp.servers]] `{}`", server.name));
            }
            None => report.ok("mcp", format!("`{}`: {} tool(s) ({})", status.name, status.tools.len(), status.mode)),
        }
    }
    hub.shutdown().await;
}

/// `/srv/minibot/./data/tasks.db` as `/srv/minibot/data/tasks.db`.
fn tidy(path: &std::path::Path) -> String {
    path.components().collect::<std::path::PathBuf>().display().to_string()
}
