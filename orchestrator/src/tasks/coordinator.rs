//! The task coordinator: consumes worker events, applies them to the task records (idempotently: a repeated
//! or stale event changes nothing, the first terminal event wins), and routes what the chat should see:
//! rate-limited progress notes, `spawn_task` results straight to the chat, `delegate` results as a new turn
//! of the main agent. An event is acknowledged only after it was applied, so a crash in between replays it.

use super::hub::TaskHub;
use super::texts;
use crate::messages::{Deliver, Inbound, Outbound, OutboundRole, TaskRoutes, TaskSource, session_id};
use actix::prelude::*;
use minibot_protocol::{Delivery, TaskStatus, TaskUsage, WorkerEventKind};
use minibot_queue::{EventDelivery, QueueError};
use minibot_store::{Applied, Ending, Role, TaskRecord};
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct TaskCoordinator {
    hub: Arc<TaskHub>,
    routes: TaskRoutes,
    last_progress: HashMap<String, Instant>,
}

/// One event taken from the queue, to apply.
#[derive(Message)]
#[rtype(result = "()")]
struct Apply(EventDelivery);

impl TaskCoordinator {
    pub fn new(hub: Arc<TaskHub>, routes: TaskRoutes) -> Self {
        Self { hub, routes, last_progress: HashMap::new() }
    }

    fn progress_due(&mut self, task_id: &str) -> bool {
        let interval = self.hub.config.tasks.progress_interval_seconds;
        if interval <= 0.0 {
            return false;
        }
        let interval = Duration::try_from_secs_f64(interval).unwrap_or(Duration::from_secs(3));
        match self.last_progress.get(task_id) {
            Some(at) if at.elapsed() < interval => false,
            _ => {
                self.last_progress.insert(task_id.to_string(), Instant::now());
                true
            }
        }
    }
}

impl Actor for TaskCoordinator {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        // Ended tasks older than `done_retention_seconds` are purged at start and every hour.
        let retention = self.hub.config.tasks.sqlite.done_retention_seconds;
        let store = self.hub.store.clone();
        ctx.spawn(
            async move {
                loop {
                    match store.purge(retention).await {
                        Ok(0) => {}
                        Ok(n) => tracing::info!(tasks = n, "purged ended tasks past their retention"),
                        Err(error) => tracing::warn!(error = %error, "cannot purge old tasks"),
                    }
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                }
            }
            .into_actor(self),
        );
        // Events are read by one loop and applied one at a time by the actor, in queue order.
        let queue = self.hub.queue.clone();
        let me = ctx.address();
        ctx.spawn(
            async move {
                loop {
                    match queue.next_event().await {
                        Ok(delivery) => {
                            if me.send(Apply(delivery)).await.is_err() {
                                break;
                            }
                        }
                        // Closed at exit (`Runtime::close`).
                        Err(QueueError::Closed) => break,
                        Err(error) => {
                            tracing::warn!(error = %error, "cannot read worker events; retrying");
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        }
                    }
                }
            }
            .into_actor(self),
        );
    }
}

enum Route {
    Nothing,
    Progress(TaskRecord),
    Finished(TaskRecord),
}

impl Handler<Apply> for TaskCoordinator {
    type Result = ResponseActFuture<Self, ()>;

    fn handle(&mut self, Apply(delivery): Apply, _ctx: &mut Context<Self>) -> Self::Result {
        let hub = self.hub.clone();
        let apply = async move {
            let event = &delivery.event;
            let applied = match &event.kind {
                WorkerEventKind::Started => hub.store.started(&event.task_id, event.attempt, &event.worker_id).await,
                WorkerEventKind::Progress { step, tool_names, total_tokens } => {
                    let progress = json!({ "phase": "running", "step": step, "tool_names": tool_names,
                                           "total_tokens": total_tokens, "attempt": event.attempt });
                    hub.store.progress(&event.task_id, event.attempt, &progress).await
                }
                WorkerEventKind::Finished { outcome, stop_reason, text, error, steps, tool_calls, total_tokens } => {
                    let ending = Ending {
                        status: TaskStatus::from(*outcome),
                        stop_reason,
                        text: text.as_deref(),
                        error: error.as_deref(),
                        usage: Some(TaskUsage { steps: *steps, tool_calls: *tool_calls, total_tokens: *total_tokens }),
                    };
                    hub.store.finish(&event.task_id, event.attempt, &ending).await
                }
            };
            let route = match applied {
                Ok(Applied::Finished(record)) => Route::Finished(record),
                Ok(Applied::Updated(record)) if matches!(event.kind, WorkerEventKind::Progress { .. }) => {
                    Route::Progress(record)
                }
                Ok(_) => Route::Nothing,
                Err(error) => {
                    // Not acknowledged: the event comes again and is applied then.
                    tracing::error!(task_id = %event.task_id, error = %error, "cannot apply a worker event");
                    return (Route::Nothing, None);
                }
            };
            (route, Some(delivery))
        };
        Box::pin(apply.into_actor(self).then(|(route, delivery), act, _ctx| {
            let (hub, routes) = (act.hub.clone(), act.routes.clone());
            let progress_due = match &route {
                Route::Progress(record) => act.progress_due(&record.id),
                Route::Finished(record) => {
                    act.last_progress.remove(&record.id);
                    false
                }
                Route::Nothing => false,
            };
            async move {
                match route {
                    Route::Progress(record) if progress_due => deliver_progress(&routes, &record),
                    Route::Finished(record) => deliver_result(&hub, &routes, &record).await,
                    _ => {}
                }
                if let Some(delivery) = delivery
                    && let Err(error) = hub.queue.ack_event(&delivery).await
                {
                    tracing::warn!(error = %error, "cannot acknowledge a worker event");
                }
            }
            .into_actor(act)
        }))
    }
}

fn deliver_progress(routes: &TaskRoutes, record: &TaskRecord) {
    let Some(chat_id) = record.chat_id else { return };
    let mut note = Outbound::text(&record.channel, chat_id, texts::progress_note(record), OutboundRole::Progress);
    note.task_id = Some(record.id.clone());
    routes.deliver.do_send(Deliver(note));
}

async fn deliver_result(hub: &TaskHub, routes: &TaskRoutes, record: &TaskRecord) {
    tracing::info!(task_id = %record.id, status = %record.status, attempts = record.attempts, "task ended");
    if record.status == TaskStatus::Cancelled {
        return;
    }
    let Some(chat_id) = record.chat_id else {
        tracing::warn!(task_id = %record.id, "task has no chat to report to");
        return;
    };
    if record.delivery == Delivery::Delegate {
        let mut inbound = Inbound::new(&record.channel, chat_id, record.user_id, texts::delegated_turn(record));
        inbound.source = Some(TaskSource { task_id: record.id.clone(), depth: record.continuation_depth + 1 });
        routes.turn.do_send(inbound);
        return;
    }
    let session = session_id(&record.channel, chat_id);
    let note = texts::history_note(record);
    if let Err(error) = hub.memory.finish_turn(&session, &[(Role::User, note.as_str())], &[]).await {
        tracing::warn!(error = %error, "cannot note the task in the chat history");
    }
    let mut message = Outbound::text(&record.channel, chat_id, texts::spawn_result(record), OutboundRole::TaskResult);
    message.task_id = Some(record.id.clone());
    message.is_error = record.status != TaskStatus::Done;
    routes.deliver.do_send(Deliver(message));
}
