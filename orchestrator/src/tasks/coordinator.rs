//! The task coordinator: consumes worker events, applies them to the task records (idempotently: a repeated
//! or stale event changes nothing, the first terminal event wins), and routes what the chat should see:
//! rate-limited progress notes, `spawn_task` results straight to the chat, `delegate` results as a new turn
//! of the main agent. An event is acknowledged only after it was applied, so a crash in between replays it.
//! A worker's approval question is handed to [`approvals::relay`], which waits for the user in the background.
//!
//! An attempt takes events only from the worker that holds it (the store binds the attempt to the worker of
//! its first event): an event from any other worker id is refused, logged once, acknowledged (so the queue
//! does not bring it back) and never applied: no record change, no chat message, no approval question. An
//! event of an older attempt changes nothing either. A task that ends `cancelled` without the user or the main
//! agent asking for it is reported to the chat, so a stranger's cancel is not mistaken for silence.

use super::approvals::{self, WorkerQuestion};
use super::hub::TaskHub;
use super::{meter, texts};
use crate::messages::{
    ApprovalRequest, Deliver, Inbound, Outbound, OutboundFile, OutboundRole, TaskRoutes, TaskSource, session_id,
};
use actix::prelude::*;
use minibot_protocol::{
    ControlKind, ControlMessage, Delivery, TaskAttachment, TaskStatus, TaskUsage, WorkerEvent, WorkerEventKind,
};
use minibot_queue::{EventDelivery, QueueError};
use minibot_store::{Applied, Attempt, Ending, Role, TaskRecord};
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct TaskCoordinator {
    hub: Arc<TaskHub>,
    routes: TaskRoutes,
    last_progress: HashMap<String, Instant>,
    /// Queued tasks no live worker can take, since when (the chat was told then).
    unserved_since: HashMap<String, Instant>,
    sweeping: bool,
    /// Tasks being timed out now (a cancel may wait for a broker that is down).
    timing_out: std::collections::HashSet<String>,
}

/// How often queued tasks are checked against the roster.
const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// One event taken from the queue, to apply.
#[derive(Message)]
#[rtype(result = "()")]
struct Apply(EventDelivery);

impl TaskCoordinator {
    pub fn new(hub: Arc<TaskHub>, routes: TaskRoutes) -> Self {
        Self {
            hub,
            routes,
            last_progress: HashMap::new(),
            unserved_since: HashMap::new(),
            sweeping: false,
            timing_out: Default::default(),
        }
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
        // Worker announcements and heartbeats keep the roster.
        let hub = self.hub.clone();
        ctx.spawn(
            async move {
                loop {
                    match hub.queue.next_status().await {
                        Ok(status) => {
                            let (id, host) = (status.worker_id.clone(), status.host.clone());
                            let joined = hub.fleet.lock().is_ok_and(|mut fleet| fleet.apply(status));
                            // A worker may start a task before its first heartbeat is read: name its host now.
                            if joined && let Err(error) = hub.store.fill_worker_host(&id, &host).await {
                                tracing::warn!(error = %error, "cannot record a worker's host");
                            }
                        }
                        Err(QueueError::Closed) => break,
                        Err(error) => {
                            tracing::warn!(error = %error, "cannot read worker statuses; retrying");
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        }
                    }
                }
            }
            .into_actor(self),
        );
        ctx.run_interval(SWEEP_INTERVAL, |act, ctx| act.sweep(ctx));
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

impl TaskCoordinator {
    /// Tells a chat when no live worker can take its queued task (once, within a second or two of the roster
    /// knowing), and times the task out once it has waited its whole timeout that way.
    fn sweep(&mut self, ctx: &mut Context<Self>) {
        if self.sweeping {
            return;
        }
        self.sweeping = true;
        // The roster drops silent workers as it is read: read every sweep, the gauge follows within a second.
        if let Ok(mut fleet) = self.hub.fleet.lock() {
            meter::workers_online(fleet.live().len());
        }
        let hub = self.hub.clone();
        let check = async move { waiting_tasks(&hub).await };
        ctx.spawn(check.into_actor(self).then(|waiting, act, _| {
            act.sweeping = false;
            let ids: std::collections::HashSet<&str> = waiting.iter().map(|(r, _)| r.id.as_str()).collect();
            act.unserved_since.retain(|id, _| ids.contains(id.as_str()));
            let mut expired = Vec::new();
            for (record, reason) in &waiting {
                let Some(reason) = reason else {
                    act.unserved_since.remove(&record.id);
                    continue;
                };
                match act.unserved_since.get(&record.id) {
                    None => {
                        act.unserved_since.insert(record.id.clone(), Instant::now());
                        tracing::warn!(task_id = %record.id, reason = %reason, "no live worker can take the task");
                        if let Some(chat_id) = record.chat_id {
                            let text = texts::waiting_note(record, reason);
                            let mut note = Outbound::text(&record.channel, chat_id, text, OutboundRole::Progress);
                            note.task_id = Some(record.id.clone());
                            act.routes.deliver.do_send(Deliver(note));
                        }
                    }
                    Some(since)
                        if since.elapsed() >= Duration::from_secs(record.timeout_seconds)
                            && act.timing_out.insert(record.id.clone()) =>
                    {
                        expired.push((record.clone(), reason.clone()));
                    }
                    Some(_) => {}
                }
            }
            let (hub, routes) = (act.hub.clone(), act.routes.clone());
            async move {
                let mut done = Vec::new();
                for (record, reason) in expired {
                    time_out_unserved(&hub, &routes, &record, &reason).await;
                    done.push(record.id);
                }
                done
            }
            .into_actor(act)
            .map(|done, act, _| {
                for id in done {
                    act.timing_out.remove(&id);
                }
            })
        }));
    }
}

/// Tasks still queued (no worker started them), each with why no live worker can take it, if none can.
async fn waiting_tasks(hub: &TaskHub) -> Vec<(TaskRecord, Option<String>)> {
    let active = match hub.store.active().await {
        Ok(active) => active,
        Err(error) => {
            if hub.is_closed() {
                tracing::debug!(error = %error, "task store closed at exit");
            } else {
                tracing::warn!(error = %error, "cannot read the queued tasks");
            }
            return Vec::new();
        }
    };
    // Queued tasks, and running ones whose worker left the roster (it died; the queue hands the task to the
    // next worker that can take it, if there is one).
    let live: Option<std::collections::HashSet<String>> = hub
        .fleet
        .lock()
        .ok()
        .filter(|fleet| fleet.settled())
        .map(|mut fleet| fleet.live().into_iter().map(|w| w.worker_id.clone()).collect());
    let orphaned = |record: &TaskRecord| {
        record.status == TaskStatus::Running
            && matches!((&live, &record.worker_id), (Some(live), Some(id)) if !live.contains(id))
    };
    let waiting: Vec<TaskRecord> =
        active.into_iter().filter(|r| r.status == TaskStatus::Pending || orphaned(r)).collect();
    meter::queue_depth(waiting.len());
    if waiting.is_empty() {
        return Vec::new();
    }
    // The folder is read only when a waiting task names a specialist (this runs every second).
    let agents = if waiting.iter().any(|r| r.agent_name.is_some()) { hub.agent_definitions() } else { Vec::new() };
    waiting
        .into_iter()
        .map(|record| {
            // A managed specialist's task carries its definition: any worker can take it, as a generic one can.
            let name = record.agent_name.as_deref().filter(|name| !hub.is_managed(name));
            let agent = name.and_then(|name| agents.iter().find(|a| a.name == name));
            let requires = agent.map(|a| a.requires.clone()).unwrap_or_default();
            let needs = super::fleet::Needs { agent: name, hash: agent.map(|a| a.hash.as_str()), requires: &requires };
            let reason = hub.fleet.lock().ok().and_then(|mut fleet| fleet.unserved(needs));
            (record, reason)
        })
        .collect()
}

/// The host a worker announced, if the roster holds it.
fn host_of(hub: &TaskHub, worker_id: &str) -> Option<String> {
    hub.fleet.lock().ok().and_then(|fleet| fleet.host_of(worker_id))
}

/// Ends a task that waited its whole timeout without a worker able to take it, unless a worker started it since
/// it was looked at.
async fn time_out_unserved(hub: &TaskHub, routes: &TaskRoutes, record: &TaskRecord, reason: &str) {
    let error = format!("no worker could take the task within {} s: {reason}", record.timeout_seconds);
    let ending = Ending { error: Some(&error), ..Ending::new(TaskStatus::TimedOut, "timeout") };
    match hub.store.finish_unchanged(record, &ending).await {
        Ok(Applied::Finished(ended)) => {
            meter::ended(&ended);
            tracing::warn!(task_id = %record.id, reason = %reason, "task timed out waiting for a worker");
            // Off the queue, so a worker that joins later does not run it after the chat heard it timed out
            // (SQLite removes it; over RabbitMQ a worker that takes it anyway is told to stop when it reports
            // its start, a quarter second in: a task quicker than that runs, and its result is ignored).
            cancel_on_queue(hub, &record.id).await;
            deliver_result(hub, routes, &ended, &[]).await;
        }
        Ok(_) => {}
        Err(error) => tracing::warn!(task_id = %record.id, error = %error, "cannot time out the task"),
    }
}

async fn cancel_on_queue(hub: &TaskHub, task_id: &str) {
    if let Err(error) = hub.queue.control(&ControlMessage::new(task_id, ControlKind::Cancel)).await {
        tracing::warn!(task_id = %task_id, error = %error, "cannot tell the queue the task is over");
    }
}

enum Route {
    Nothing,
    Progress(TaskRecord),
    /// The record and the files its answer carries.
    Finished(TaskRecord, Vec<TaskAttachment>),
    Approval(WorkerQuestion),
}

impl Handler<Apply> for TaskCoordinator {
    type Result = ResponseActFuture<Self, ()>;

    fn handle(&mut self, Apply(delivery): Apply, _ctx: &mut Context<Self>) -> Self::Result {
        let hub = self.hub.clone();
        let apply = async move {
            let event = &delivery.event;
            let host = host_of(&hub, &event.worker_id);
            let attempt = Attempt { number: event.attempt, worker_id: &event.worker_id, host: host.as_deref() };
            let applied = match &event.kind {
                WorkerEventKind::Started => {
                    let applied = hub.store.started(&event.task_id, &attempt).await;
                    if let Ok(Applied::Updated(record)) = &applied {
                        meter::started(record, event.attempt);
                    }
                    if let Ok(Applied::Ignored) = applied {
                        // It ended here already (cancelled, timed out waiting for a worker) while its message
                        // still sat in a queue nobody read: the worker that took it now must not run it.
                        tracing::info!(task_id = %event.task_id, worker_id = %event.worker_id, "a worker started an ended task; cancelling it");
                        cancel_on_queue(&hub, &event.task_id).await;
                    }
                    applied
                }
                WorkerEventKind::Progress { step, tool_names, total_tokens } => {
                    // The names are the worker's word and go to the store and the chat: a few, short ones.
                    let tool_names: Vec<String> =
                        tool_names.iter().take(16).map(|name| name.chars().take(64).collect()).collect();
                    let progress = json!({ "phase": "running", "step": step, "tool_names": tool_names,
                                           "total_tokens": total_tokens, "attempt": event.attempt });
                    hub.store.progress(&event.task_id, &attempt, &progress).await
                }
                WorkerEventKind::Finished {
                    outcome,
                    stop_reason,
                    text,
                    error,
                    steps,
                    tool_calls,
                    total_tokens,
                    ..
                } => {
                    let ending = Ending {
                        status: TaskStatus::from(*outcome),
                        stop_reason,
                        text: text.as_deref(),
                        error: error.as_deref(),
                        usage: Some(TaskUsage { steps: *steps, tool_calls: *tool_calls, total_tokens: *total_tokens }),
                        worker_id: Some(&event.worker_id),
                        worker_host: host.as_deref(),
                    };
                    hub.store.finish(&event.task_id, event.attempt, &ending).await
                }
                WorkerEventKind::ApprovalRequest { approval_id, tool, detail, reason, wait_ms } => {
                    // Changes no record but the attempt's holder (a quick attempt may ask before it says it
                    // started): asked in the background, acknowledged now (a question lost in a crash goes
                    // unanswered, and the worker denies). One of an older attempt, or of a task that ended, is
                    // answered no at once by the relay. A refused or failed one is handled below, as any event.
                    let held = hub.store.hold(&event.task_id, &attempt).await;
                    if !matches!(held, Ok(Applied::NotHolder { .. }) | Err(_)) {
                        let request = ApprovalRequest {
                            approval_id: approval_id.clone(),
                            tool: tool.clone(),
                            detail: detail.clone(),
                            reason: reason.clone(),
                        };
                        let question = WorkerQuestion {
                            task_id: event.task_id.clone(),
                            attempt: event.attempt,
                            request,
                            worker_wait: wait_ms.map(std::time::Duration::from_millis),
                        };
                        return (Route::Approval(question), Some(delivery));
                    }
                    held
                }
                WorkerEventKind::Unknown => {
                    tracing::debug!(task_id = %event.task_id, "worker event of an unknown kind; skipped");
                    return (Route::Nothing, Some(delivery));
                }
            };
            let route = match applied {
                Ok(Applied::Finished(record)) => {
                    meter::ended(&record);
                    let attachments = match &event.kind {
                        WorkerEventKind::Finished { attachments, .. } => attachments.clone(),
                        _ => Vec::new(),
                    };
                    Route::Finished(record, attachments)
                }
                Ok(Applied::Updated(record)) if matches!(event.kind, WorkerEventKind::Progress { .. }) => {
                    Route::Progress(record)
                }
                Ok(Applied::NotHolder { holder }) => {
                    refused(event, &holder);
                    Route::Nothing
                }
                Ok(Applied::Superseded { current }) => {
                    tracing::info!(task_id = %event.task_id, attempt = event.attempt, current_attempt = current,
                        worker_id = %event.worker_id, kind = kind_name(&event.kind),
                        "worker event of an older attempt; ignored");
                    Route::Nothing
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
        Box::pin(apply.into_actor(self).then(|(route, delivery), act, ctx| {
            let (hub, routes) = (act.hub.clone(), act.routes.clone());
            let progress_due = match &route {
                Route::Progress(record) => act.progress_due(&record.id),
                Route::Finished(record, _) => {
                    act.last_progress.remove(&record.id);
                    false
                }
                Route::Nothing | Route::Approval(_) => false,
            };
            let route = match route {
                Route::Approval(question) => {
                    let (hub, routes) = (hub.clone(), routes.clone());
                    ctx.spawn(async move { approvals::relay(&hub, &routes, question).await }.into_actor(act));
                    Route::Nothing
                }
                other => other,
            };
            async move {
                match route {
                    Route::Progress(record) if progress_due => deliver_progress(&routes, &record),
                    Route::Finished(record, attachments) => deliver_result(&hub, &routes, &record, &attachments).await,
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

/// The log line of an event refused because another worker holds its attempt (the event is acknowledged and
/// dropped, so this is said once per event).
fn refused(event: &WorkerEvent, holder: &str) {
    tracing::warn!(task_id = %event.task_id, attempt = event.attempt, worker_id = %event.worker_id, holder = %holder,
        kind = kind_name(&event.kind),
        "refused a worker event: another worker holds this attempt of the task (a forged or misrouted event)");
}

fn kind_name(kind: &WorkerEventKind) -> &'static str {
    match kind {
        WorkerEventKind::Started => "started",
        WorkerEventKind::Progress { .. } => "progress",
        WorkerEventKind::Finished { .. } => "finished",
        WorkerEventKind::ApprovalRequest { .. } => "approval_request",
        WorkerEventKind::Unknown => "unknown",
    }
}

fn deliver_progress(routes: &TaskRoutes, record: &TaskRecord) {
    let Some(chat_id) = record.chat_id else { return };
    let mut note = Outbound::text(&record.channel, chat_id, texts::progress_note(record), OutboundRole::Progress);
    note.task_id = Some(record.id.clone());
    routes.deliver.do_send(Deliver(note));
}

async fn deliver_result(hub: &TaskHub, routes: &TaskRoutes, record: &TaskRecord, attachments: &[TaskAttachment]) {
    tracing::info!(task_id = %record.id, status = %record.status, attempts = record.attempts, "task ended");
    if record.status == TaskStatus::Cancelled && record.cancel_requested {
        // Asked for with `cancel_task`, whose answer said so already.
        return;
    }
    if texts::cancelled_unasked(record) {
        tracing::warn!(task_id = %record.id, worker_id = ?record.worker_id, stop_reason = ?record.stop_reason,
            "task cancelled without the chat asking (an operator, a forged cancel, or its worker); telling the chat");
    }
    let Some(chat_id) = record.chat_id else {
        tracing::warn!(task_id = %record.id, "task has no chat to report to");
        return;
    };
    if record.delivery == Delivery::Delegate {
        let mut text = texts::delegated_turn(record);
        text.push_str(&attachment_list(attachments));
        let mut inbound = Inbound::new(&record.channel, chat_id, record.user_id, text);
        inbound.source = Some(TaskSource { task_id: record.id.clone(), depth: record.continuation_depth + 1 });
        routes.turn.do_send(inbound);
        return;
    }
    let session = session_id(&record.channel, chat_id);
    let note = texts::history_note(record);
    if let Err(error) = hub.memory.finish_turn(&session, &[(Role::User, note.as_str())], &[]).await {
        tracing::warn!(error = %error, "cannot note the task in the chat history");
    }
    let mut text = texts::spawn_result(record);
    if record.status == TaskStatus::Done && !attachments.is_empty() {
        // The files go first: the text is what tells a waiting `--once` run that the task is answered.
        let failed = send_attachments(&hub.config, routes, record, chat_id, attachments);
        if !failed.is_empty() {
            text.push_str("\n\nAttachments that could not be sent:");
            for line in failed {
                text.push_str(&format!("\n- {line}"));
            }
        }
    }
    let mut message = Outbound::text(&record.channel, chat_id, text, OutboundRole::TaskResult);
    message.task_id = Some(record.id.clone());
    message.is_error = record.status != TaskStatus::Done;
    routes.deliver.do_send(Deliver(message));
}

/// Most attachment paths listed in a delegated result, as MiniBot did.
const MAX_LISTED_ATTACHMENTS: usize = 50;

/// Sends a task's files to its chat, each resolved under this side's managed root (a worker elsewhere names
/// them relative to it); returns a line for each file that could not be sent.
fn send_attachments(
    config: &minibot_config::Config,
    routes: &TaskRoutes,
    record: &TaskRecord,
    chat_id: i64,
    attachments: &[TaskAttachment],
) -> Vec<String> {
    let storage = &config.tools.file_storage;
    // A worker (possibly on another host) names these paths: they must lie inside the managed folder whatever
    // `allow_outside_root` says, and never be a file the assistant runs or trusts (the config, the vault, ...).
    let protected = minibot_tools::files::ProtectedPaths::from_config(config);
    let root = if storage.enabled {
        minibot_tools::files::ManagedRoot::create(&config.resolve_path(&storage.root_dir), false)
            .map_err(|e| format!("the managed folder {} is unavailable: {e}", storage.root_dir))
    } else {
        Err("[tools.file_storage] is off here".to_string())
    };
    let mut failed = Vec::new();
    for attachment in attachments {
        let resolved = root.as_ref().map_err(Clone::clone).and_then(|root| {
            let path = root.resolve_required(&attachment.path).map_err(|e| e.to_string())?;
            if let Some(hit) = protected.hit(&path.absolute) {
                return Err(format!("{}, which is never sent as an attachment", hit.describe(&path.absolute)));
            }
            // Checked through the root's handle (a link swapped in cannot point it outside); the channel then
            // sends the file by its path, which is as safe as the folder it lies in.
            match root.metadata(&path) {
                Ok(meta) if meta.is_file() => Ok(path.absolute),
                _ => Err("no such file".to_string()),
            }
        });
        match resolved {
            Ok(path) => routes.files.do_send(OutboundFile {
                channel: record.channel.clone(),
                chat_id,
                path,
                caption: attachment.caption.clone(),
                task_id: Some(record.id.clone()),
            }),
            Err(reason) => {
                tracing::warn!(task_id = %record.id, path = %attachment.path, reason = %reason, "task attachment not sent");
                failed.push(format!("{}: {reason}", attachment.path));
            }
        }
    }
    failed
}

/// The files of a delegated result, for the main agent to send on (`send_file`) if the user should have them.
fn attachment_list(attachments: &[TaskAttachment]) -> String {
    if attachments.is_empty() {
        return String::new();
    }
    let mut text = String::from(
        "\nThe worker attached these managed files to its result; send them with send_file if the user should get them:",
    );
    for attachment in attachments.iter().take(MAX_LISTED_ATTACHMENTS) {
        text.push_str(&format!("\n- {}", attachment.path));
        if let Some(caption) = attachment.caption.as_deref().filter(|c| !c.is_empty()) {
            text.push_str(&format!(" ({caption})"));
        }
    }
    if attachments.len() > MAX_LISTED_ATTACHMENTS {
        text.push_str(&format!("\n- … and {} more", attachments.len() - MAX_LISTED_ATTACHMENTS));
    }
    text
}
