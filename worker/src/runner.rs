//! Runs one claimed task: the agent loop under the task's limits, progress and control messages alongside,
//! then the terminal event and the settlement of the claim. Tool calls that need the user's approval ask over
//! the queue ([`QueueApprovals`]); their answers arrive with the control messages.
//!
//! A panic while running a task fails that task, not the worker ([`catch_panic`]): the task is reported failed
//! and settled like any other, so it is not delivered again to bring down the next worker.

use crate::approvals::QueueApprovals;
use crate::assembly::{Assembled, assemble};
use futures_util::future::BoxFuture;
use minibot_agent::OutgoingFile;
use minibot_agent::compaction::{CompactionOutcome, RunCompaction};
use minibot_agent::{
    AgentError, AgentEvent, AgentRun, ApprovalGate, Approver, ChannelCapabilities, RequestKeys, Steer, StopReason,
    ToolContext,
};
use minibot_config::Config;
use minibot_llm::{ChatProvider, ChatRequest, ChatResponse};
use minibot_protocol::{
    ControlKind, MAX_RESULT_BYTES, TaskAttachment, TaskOutcome, TaskUsage, WorkerEvent, WorkerEventKind,
};
use minibot_queue::approvals::PendingApprovals;
use minibot_queue::{ClaimedTask, QueueError, WorkQueue};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

const CONTROL_POLL: Duration = Duration::from_millis(200);
/// Where a deadline lies when the task's limit reaches past what the clock can count (tokio's own choice).
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);
/// Model clients a worker keeps; past this many endpoints (each task may name its own model) it starts over.
const MAX_PROVIDERS: usize = 16;
/// Characters of a name a log line shows.
const LOG_NAME_CHARS: usize = 64;
/// Least time between two progress events of one task.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(250);
/// How long a task runs before it reports that it started (unless it reports progress, or ends, first).
const START_NOTICE_AFTER: Duration = Duration::from_millis(250);

/// Whether the task's `started` event went out, and when the attempt began.
struct StartNotice {
    began: Instant,
    sent: tokio::sync::Mutex<bool>,
    /// Raised when reporting the start found the task gone to another worker: the run stops at once.
    lost: tokio::sync::Notify,
}
const STEER_PREFIX: &str = "Message from the agent that assigned you this task, sent while you work on it. \
Follow it from now on:\n\n";

pub struct Worker {
    pub config: Arc<Config>,
    pub queue: Arc<dyn WorkQueue>,
    pub worker_id: String,
    /// The tasks it runs now, for its heartbeat.
    pub running: Arc<std::sync::Mutex<Vec<String>>>,
    /// Model clients by endpoint, kept across tasks: building one loads the system's certificates and opens a
    /// new connection, which cost a short task most of its time.
    providers: std::sync::Mutex<std::collections::HashMap<String, Arc<dyn ChatProvider>>>,
}

enum Interrupt {
    Cancelled,
    LeaseLost,
}

impl Worker {
    pub fn new(config: Arc<Config>, queue: Arc<dyn WorkQueue>, worker_id: &str) -> Self {
        Self { config, queue, worker_id: worker_id.to_string(), running: Arc::default(), providers: Default::default() }
    }

    /// Claims and runs tasks until the queue fails.
    pub async fn run(&self) -> Result<(), QueueError> {
        self.run_until_idle(None).await
    }

    /// Claims and runs tasks until the queue fails, or returns `Ok` once `idle` passes without a task to claim
    /// (counted from the start and from the end of each task).
    ///
    /// Giving up drops a claim that may be in flight. Should that claim have taken a task in the same instant, the
    /// task is not lost: closing the queue gives it back, and the orchestrator releases the exited worker's claims
    /// too, so the next worker takes it at once (as a new attempt).
    pub async fn run_until_idle(&self, idle: Option<Duration>) -> Result<(), QueueError> {
        loop {
            let task = match idle {
                None => self.queue.claim().await?,
                Some(idle) => match tokio::time::timeout(idle, self.queue.claim()).await {
                    Ok(task) => task?,
                    Err(_) => return Ok(()),
                },
            };
            let agent = task.envelope.agent_name.as_deref().map(|name| short(name, LOG_NAME_CHARS));
            tracing::info!(task_id = %task.envelope.task_id, attempt = task.attempt, agent = ?agent, "task claimed");
            self.set_running(&task.envelope.task_id, true);
            let result = self.run_task(&task).await;
            self.set_running(&task.envelope.task_id, false);
            if let Err(error) = result {
                tracing::error!(task_id = %task.envelope.task_id, error = %error, "task ended without settling");
            }
        }
    }

    fn set_running(&self, task_id: &str, running: bool) {
        let mut tasks = self.running.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        tasks.retain(|id| id != task_id);
        if running {
            tasks.push(task_id.to_string());
        }
    }

    fn event(&self, task: &ClaimedTask, kind: WorkerEventKind) -> WorkerEvent {
        WorkerEvent::new(&task.envelope.task_id, task.attempt, &self.worker_id, kind)
    }

    pub async fn run_task(&self, task: &ClaimedTask) -> Result<(), QueueError> {
        let notice = StartNotice {
            began: Instant::now(),
            sent: tokio::sync::Mutex::new(false),
            lost: tokio::sync::Notify::new(),
        };
        let tally = Tally::default();
        let work = async {
            let attempt = self.attempt(task, &tally, &notice);
            tokio::pin!(attempt);
            // A task still running after a moment says so; a quicker one only reports its end (one message less
            // for the broker per task, which is most of what a short task costs it).
            let announce = async {
                tokio::time::sleep(START_NOTICE_AFTER).await;
                match self.ensure_started(task, &notice).await {
                    Ok(()) => {}
                    // `notify_one` keeps its permit, so the run sees it even if it is not waiting yet.
                    Err(QueueError::LeaseLost { .. }) => notice.lost.notify_one(),
                    Err(error) => {
                        tracing::debug!(task_id = %task.envelope.task_id, error = %error, "start not reported");
                    }
                }
            };
            tokio::select! {
                outcome = &mut attempt => outcome,
                () = announce => attempt.await,
            }
        };
        // The run's own panics are caught around it (`attempt`, which then closes its MCP connections); this
        // catches the rest: assembling the agent, reporting the start.
        let outcome = match catch_panic(work).await {
            Ok(outcome) => outcome,
            Err(panic) => Some(self.internal_error(task, &panic, tally.usage())),
        };
        let Some(mut finished) = outcome else { return Ok(()) };
        cap_result(&mut finished);
        match self.queue.emit(task, &self.event(task, finished)).await {
            Ok(()) => self.queue.settle(task).await,
            Err(QueueError::LeaseLost { .. }) => {
                tracing::warn!(task_id = %task.envelope.task_id, "result dropped: the lease was lost");
                Ok(())
            }
            Err(error) => Err(error),
        }
    }

    /// Assembles and runs the task; `None` when the lease was lost on the way (another worker owns it now).
    async fn attempt(&self, task: &ClaimedTask, tally: &Tally, notice: &StartNotice) -> Option<WorkerEventKind> {
        Some(match assemble(&self.config, &task.envelope).await {
            Ok(mut assembled) => {
                let mcp = assembled.mcp.take();
                let result = catch_panic(self.execute(task, assembled, tally, notice)).await;
                if let Some(hub) = mcp {
                    hub.shutdown().await;
                }
                match result {
                    Ok(Ok(kind)) => kind,
                    Ok(Err(Interrupt::LeaseLost)) => {
                        tracing::warn!(task_id = %task.envelope.task_id, "lease lost; another worker owns the task now");
                        return None;
                    }
                    Ok(Err(Interrupt::Cancelled)) => finished(TaskOutcome::Cancelled, "cancelled", None, tally.usage()),
                    Err(panic) => self.internal_error(task, &panic, tally.usage()),
                }
            }
            Err(error) => {
                let error = match error.strip_prefix(crate::assembly::REFUSED) {
                    Some(reason) => {
                        tracing::warn!(task_id = %task.envelope.task_id, reason = %reason, "task refused");
                        format!("worker {} refused the task: {reason}", self.worker_id)
                    }
                    None => error,
                };
                finished(TaskOutcome::Failed, "worker_error", Some(error), tally.usage())
            }
        })
    }

    /// The terminal event of a task whose run panicked, logged with the panic's message. The message stays out
    /// of the event: it may quote anything the run held, and the event goes to a chat.
    fn internal_error(&self, task: &ClaimedTask, panic: &str, usage: TaskUsage) -> WorkerEventKind {
        tracing::error!(task_id = %task.envelope.task_id, attempt = task.attempt, panic = %panic,
            "the task hit an internal error (a panic); failing it");
        let error = format!(
            "worker {} hit an internal error while running the task (a bug in the worker; its log has the details)",
            self.worker_id
        );
        finished(TaskOutcome::Failed, "worker_error", Some(error), usage)
    }

    /// The model client for `endpoint`, built once.
    fn provider(&self, endpoint: &minibot_config::LlmEndpoint) -> Result<Arc<dyn ChatProvider>, String> {
        // Everything the client is built from, so two endpoints that differ in anything get their own.
        let key = format!("{endpoint:?}");
        let mut providers = self.providers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(provider) = providers.get(&key) {
            return Ok(provider.clone());
        }
        let provider = minibot_llm::provider_for(endpoint).map_err(|e| e.to_string())?;
        // Tasks choose their model, so the endpoints are as many as the tasks; the clients kept are not.
        if providers.len() >= MAX_PROVIDERS {
            providers.clear();
        }
        providers.insert(key, provider.clone());
        Ok(provider)
    }

    /// Sends the task's `started` event unless it went already; every later non-terminal event goes after it.
    async fn ensure_started(&self, task: &ClaimedTask, notice: &StartNotice) -> Result<(), QueueError> {
        let mut sent = notice.sent.lock().await;
        if !*sent {
            self.queue.emit(task, &self.event(task, WorkerEventKind::Started)).await?;
            *sent = true;
        }
        Ok(())
    }

    /// Runs the agent. `tally` counts what the run did, for a run that ends without an outcome.
    async fn execute(
        &self,
        task: &ClaimedTask,
        assembled: Assembled,
        tally: &Tally,
        notice: &StartNotice,
    ) -> Result<WorkerEventKind, Interrupt> {
        let provider = match self.provider(&assembled.endpoint) {
            Ok(provider) => provider,
            Err(error) => return Ok(finished(TaskOutcome::Failed, "provider_error", Some(error), tally.usage())),
        };
        let provider = Counted { inner: provider.as_ref(), tally };
        let compaction = RunCompaction::for_model(
            &self.config,
            &assembled.endpoint,
            &assembled.model,
            &provider,
            assembled.compact_prompt.clone(),
        );
        let pending = Arc::new(PendingApprovals::new(task));
        let deadline = deadline_after(assembled.limits.timeout);
        let prompt = QueueApprovals::new(self.queue.clone(), task.clone(), &self.worker_id, pending.clone(), deadline);
        let approval_timeout = Duration::from_secs(self.config.tools.approval.timeout_seconds.max(1));
        let approver = Approver::new(Arc::new(prompt), approval_timeout);
        let (inbox_tx, mut inbox_rx) = mpsc::unbounded_channel();
        let (events_tx, events_rx) = mpsc::unbounded_channel::<AgentEvent>();
        let on_event = move |event: AgentEvent| {
            tally.count(&event);
            let _ = events_tx.send(event);
        };
        let envelope = &task.envelope;
        let mut prompt = envelope.prompt.clone();
        if let Some(context) = envelope.context_json.as_deref().filter(|c| !c.trim().is_empty()) {
            prompt.push_str("\n\nContext:\n");
            prompt.push_str(context);
        }
        // `[tools.approval]` holds in workers as in the main agent; the orchestrator rejects a bad pattern at start.
        let approvals = match ApprovalGate::from_config(&self.config.tools.approval) {
            Ok(gate) => gate,
            Err(error) => {
                return Ok(finished(TaskOutcome::Failed, "worker_error", Some(error.to_string()), tally.usage()));
            }
        };
        let run = AgentRun {
            provider: &provider,
            model: &assembled.model,
            tools: &assembled.tools,
            system_prompt: assembled.system_prompt.clone(),
            history: Vec::new(),
            user_message: prompt,
            limits: assembled.limits,
            context: ToolContext {
                session_id: format!("task:{}", envelope.task_id),
                channel: envelope.channel.clone(),
                chat_id: envelope.chat_id,
                user_id: envelope.user_id,
                owner_id: envelope.owner_id.clone(),
                call_id: String::new(),
                turn_id: String::new(),
                task_depth: 0,
                // A worker has no channel of its own, but files its answer declares (`pre_response` attachments)
                // travel with the task result, and the orchestrator delivers them to the task's chat.
                capabilities: ChannelCapabilities { files: true, ..ChannelCapabilities::default() },
                // Questions go to the chat that started the task, through the orchestrator.
                approver: Some(approver),
                // Filled in by the agent loop from the task's tools.
                agent_tools: None,
                parent_call_id: None,
                nested: None,
            },
            approvals: Some(&approvals),
            inbox: Some(&mut inbox_rx),
            on_event: &on_event,
            // A chain lives for one attempt: a retried task starts from its prompt again.
            keys: RequestKeys {
                cache_key: Some(format!(
                    "{}:{}:task:{}",
                    envelope.channel,
                    envelope.chat_id.map_or_else(String::new, |id| id.to_string()),
                    envelope.task_id
                )),
                chain_key: self
                    .config
                    .llm
                    .agent_chains()
                    .then(|| format!("task:{}:{}:{}", envelope.task_id, task.attempt, self.worker_id)),
            },
            stream: false,
            compaction,
            // A task starts with no history of its own.
            known_tokens: None,
        };
        let progress = self.report_progress(task, events_rx, tally, notice);
        tokio::pin!(progress);
        let result = tokio::select! {
            result = run.run() => result,
            interrupt = self.watch_controls(task, inbox_tx, &pending) => return Err(interrupt),
            () = notice.lost.notified() => return Err(Interrupt::LeaseLost),
            // The reporter ends only when `on_event` is dropped, below, so it is never polled after it ended.
            Err(interrupt) = &mut progress => return Err(interrupt),
        };
        // A quick task can end while its first progress event is still being written: close the event channel
        // and let the reporter finish, so that progress is stored before the result instead of abandoned.
        drop(on_event);
        progress.await?;
        Ok(match result {
            Ok(outcome) => {
                let attachments = match outcome.stop_reason {
                    StopReason::Completed => outcome.attachments.iter().map(task_attachment).collect(),
                    _ => Vec::new(),
                };
                let (status, text, error) = match outcome.stop_reason {
                    StopReason::Completed => (TaskOutcome::Done, Some(outcome.answer), None),
                    StopReason::Timeout => (TaskOutcome::TimedOut, None, Some(outcome.answer)),
                    _ => (TaskOutcome::Failed, None, Some(outcome.answer)),
                };
                WorkerEventKind::Finished {
                    outcome: status,
                    stop_reason: outcome.stop_reason.as_str().into(),
                    text,
                    error,
                    steps: outcome.steps,
                    tool_calls: outcome.tool_calls,
                    total_tokens: outcome.usage.total_tokens,
                    attachments,
                }
            }
            Err(AgentError::Provider(error)) => {
                finished(TaskOutcome::Failed, "provider_error", Some(error.to_string()), tally.usage())
            }
            Err(error @ AgentError::FatalTool { .. }) => {
                finished(TaskOutcome::Failed, "worker_error", Some(error.to_string()), tally.usage())
            }
        })
    }

    /// Polls control messages, handing approval answers to `pending`; returns only when the task must stop.
    async fn watch_controls(
        &self,
        task: &ClaimedTask,
        inbox: mpsc::UnboundedSender<Steer>,
        pending: &PendingApprovals,
    ) -> Interrupt {
        loop {
            match self.queue.controls(task).await {
                Ok(messages) => {
                    for message in messages.into_iter().filter_map(|message| pending.route(message)) {
                        match message.kind {
                            ControlKind::Cancel => return Interrupt::Cancelled,
                            ControlKind::Steer { text } => {
                                // The worker stores no transcript, so it never asks which steers were read.
                                let _ = inbox.send(Steer { id: String::new(), text: format!("{STEER_PREFIX}{text}") });
                            }
                            // `route` took the answers; a late one for another attempt is simply dropped.
                            ControlKind::ApprovalResult { .. } => {}
                            ControlKind::Unknown => {
                                tracing::debug!(task_id = %task.envelope.task_id, "control message of an unknown kind; ignored");
                            }
                        }
                    }
                }
                Err(QueueError::LeaseLost { .. }) => return Interrupt::LeaseLost,
                Err(error) => tracing::warn!(error = %error, "cannot read control messages"),
            }
            tokio::time::sleep(CONTROL_POLL).await;
        }
    }

    /// Turns agent events into progress events (rate-limited) with the tokens used so far; they also renew the
    /// lease. Returns once the run's events are all handled and their channel is closed.
    async fn report_progress(
        &self,
        task: &ClaimedTask,
        mut events: mpsc::UnboundedReceiver<AgentEvent>,
        tally: &Tally,
        notice: &StartNotice,
    ) -> Result<(), Interrupt> {
        let mut step = 0;
        let mut tool_names: Vec<String> = Vec::new();
        let mut last_sent: Option<Instant> = None;
        while let Some(event) = events.recv().await {
            match event {
                AgentEvent::StepStarted { step: s } => {
                    step = s;
                    tool_names.clear();
                }
                AgentEvent::ToolStarted { name, .. } => tool_names.push(name),
                AgentEvent::Compacted(outcome) => {
                    log_compaction(task, &outcome);
                    continue;
                }
                AgentEvent::ToolFinished { .. } | AgentEvent::SendFile(_) | AgentEvent::AnswerText { .. } => continue,
            }
            if last_sent.is_some_and(|at| at.elapsed() < PROGRESS_INTERVAL) {
                continue;
            }
            // A model step with no tool, this early, tells the chat nothing its result will not.
            if tool_names.is_empty() && notice.began.elapsed() < START_NOTICE_AFTER {
                continue;
            }
            match self.ensure_started(task, notice).await {
                Ok(()) => {}
                Err(QueueError::LeaseLost { .. }) => return Err(Interrupt::LeaseLost),
                Err(error) => tracing::warn!(error = %error, "cannot report the start"),
            }
            let total_tokens = tally.tokens.load(Ordering::Relaxed);
            let progress = WorkerEventKind::Progress { step, tool_names: tool_names.clone(), total_tokens };
            match self.queue.emit(task, &self.event(task, progress)).await {
                Ok(()) => last_sent = Some(Instant::now()),
                Err(QueueError::LeaseLost { .. }) => return Err(Interrupt::LeaseLost),
                Err(error) => tracing::warn!(error = %error, "cannot report progress"),
            }
        }
        Ok(())
    }
}

/// The log line of a run compacted mid-task: the run goes on either way.
fn log_compaction(task: &ClaimedTask, outcome: &CompactionOutcome) {
    let task_id = &task.envelope.task_id;
    match outcome {
        CompactionOutcome::Summarised { before_tokens, after_tokens, .. } => {
            tracing::info!(task_id = %task_id, before_tokens, after_tokens, "compacted the task's conversation");
        }
        CompactionOutcome::Failed { error, shortened } => {
            tracing::warn!(task_id = %task_id, error = %error, shortened, "could not summarise the task's conversation; shortened old tool results");
        }
    }
}

/// Runs `work`, turning a panic inside it into `Err` with the panic's message. A task that hits a bug then fails
/// alone instead of taking the worker down, and with it, redelivered, every next worker that claims it.
///
/// Unwind safety: what a task shares with the rest of the worker survives a panic halfway: counters are atomic,
/// tokio's locks do not poison and the worker's std locks are taken past poisoning; the task's own state is
/// dropped with the future.
async fn catch_panic<F: std::future::Future>(work: F) -> Result<F::Output, String> {
    use futures_util::FutureExt as _;
    std::panic::AssertUnwindSafe(work).catch_unwind().await.map_err(|payload| panic_message(payload.as_ref()))
}

/// The text a panic was raised with.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    match (payload.downcast_ref::<&str>(), payload.downcast_ref::<String>()) {
        (Some(text), _) => (*text).to_string(),
        (None, Some(text)) => text.clone(),
        (None, None) => "a panic without a message".into(),
    }
}

/// `timeout` from now, or [`FAR_FUTURE`] from now when that is past what the clock can count: a task's limit,
/// however large, never overflows the clock.
fn deadline_after(timeout: Duration) -> tokio::time::Instant {
    let now = tokio::time::Instant::now();
    now.checked_add(timeout).or_else(|| now.checked_add(FAR_FUTURE)).unwrap_or(now)
}

/// At most `max` characters of `text`, marked when cut, for a log line.
fn short(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

/// The terminal event of a run that ended without an answer, with what it had used by then.
fn finished(outcome: TaskOutcome, stop_reason: &str, error: Option<String>, usage: TaskUsage) -> WorkerEventKind {
    WorkerEventKind::Finished {
        outcome,
        stop_reason: stop_reason.into(),
        text: None,
        error,
        steps: usage.steps,
        tool_calls: usage.tool_calls,
        total_tokens: usage.total_tokens,
        attachments: Vec::new(),
    }
}

/// Cuts an answer (and an error) to what a receiver accepts ([`MAX_RESULT_BYTES`]); a longer one would be
/// refused by the orchestrator as a whole, and the task would never finish.
fn cap_result(kind: &mut WorkerEventKind) {
    const NOTE: &str = "\n\n[The worker cut this result here: it was longer than the task queue carries.]";
    let WorkerEventKind::Finished { text, error, .. } = kind else { return };
    for field in [text, error].into_iter().flatten() {
        if field.len() > MAX_RESULT_BYTES {
            field.truncate(field.floor_char_boundary(MAX_RESULT_BYTES - NOTE.len()));
            field.push_str(NOTE);
        }
    }
}

/// A file of the answer as the orchestrator resolves it: relative to the managed root where it is inside it.
fn task_attachment(file: &OutgoingFile) -> TaskAttachment {
    let path = file.relative.clone().unwrap_or_else(|| file.path.display().to_string());
    TaskAttachment { path, caption: file.caption.clone() }
}

/// What a run has used so far: steps and tool calls counted from its events, tokens from every model response
/// ([`Counted`]). Progress shows it, and the runs that end without an [`minibot_agent::AgentOutcome`]
/// (cancelled, provider error, fatal tool error), whose own counts are lost, report it. Calls the agent refused
/// before running them (unknown tool, unreadable arguments) are not counted.
#[derive(Default)]
struct Tally {
    steps: AtomicU32,
    tool_calls: AtomicU32,
    tokens: AtomicU64,
}

/// The run's model, counting the tokens of every response into the tally as it arrives.
struct Counted<'a> {
    inner: &'a dyn ChatProvider,
    tally: &'a Tally,
}

impl ChatProvider for Counted<'_> {
    fn complete<'b>(&'b self, request: &'b ChatRequest) -> BoxFuture<'b, minibot_llm::Result<ChatResponse>> {
        Box::pin(async move {
            let response = self.inner.complete(request).await?;
            self.tally.tokens.fetch_add(response.usage.total_tokens, Ordering::Relaxed);
            Ok(response)
        })
    }
}

impl Tally {
    fn count(&self, event: &AgentEvent) {
        match event {
            AgentEvent::StepStarted { step } => {
                self.steps.fetch_max(*step, Ordering::Relaxed);
            }
            // The model's calls: those a script makes are part of its run_tools_script call.
            AgentEvent::ToolStarted { parent_call_id: None, .. } => {
                self.tool_calls.fetch_add(1, Ordering::Relaxed);
            }
            AgentEvent::ToolStarted { .. }
            | AgentEvent::ToolFinished { .. }
            | AgentEvent::SendFile(_)
            | AgentEvent::AnswerText { .. }
            | AgentEvent::Compacted(_) => {}
        }
    }

    fn usage(&self) -> TaskUsage {
        TaskUsage {
            steps: self.steps.load(Ordering::Relaxed),
            tool_calls: self.tool_calls.load(Ordering::Relaxed),
            total_tokens: self.tokens.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use minibot_protocol::{ModelOverrides, PROTOCOL_VERSION, TaskEnvelope, TaskLimits};
    use minibot_queue::TaskQueue;
    use minibot_queue::sqlite::SqliteQueue;

    #[test]
    fn a_result_longer_than_the_queue_carries_is_cut_and_says_so() {
        let mut kind = finished(TaskOutcome::Done, "completed", None, TaskUsage::default());
        if let WorkerEventKind::Finished { text, .. } = &mut kind {
            *text = Some("é".repeat(MAX_RESULT_BYTES));
        }
        cap_result(&mut kind);
        let WorkerEventKind::Finished { text: Some(text), .. } = kind else { panic!("no text") };
        assert!(text.len() <= MAX_RESULT_BYTES);
        assert!(text.ends_with("longer than the task queue carries.]"));
        let event = WorkerEvent::new(
            "t",
            1,
            "w",
            WorkerEventKind::Finished {
                outcome: TaskOutcome::Done,
                stop_reason: "completed".into(),
                text: Some(text),
                error: None,
                steps: 0,
                tool_calls: 0,
                total_tokens: 0,
                attachments: Vec::new(),
            },
        );
        assert!(event.encode().unwrap().len() < MAX_RESULT_BYTES + 1024 * 1024, "the orchestrator takes it");
    }

    #[tokio::test]
    async fn catch_panic_passes_a_result_through_and_turns_a_panic_into_its_message() {
        assert_eq!(catch_panic(async { 42 }).await, Ok(42));
        let text: Result<(), String> = catch_panic(async { panic!("a plain message") }).await;
        assert_eq!(text, Err("a plain message".to_string()));
        // A panic in a later poll, after the future gave way, with a formatted message.
        let late: Result<(), String> = catch_panic(async {
            tokio::task::yield_now().await;
            let limit = u64::MAX;
            panic!("formatted: {limit}")
        })
        .await;
        assert_eq!(late, Err(format!("formatted: {}", u64::MAX)));
        let opaque: Result<(), String> = catch_panic(async { std::panic::panic_any(7_u8) }).await;
        assert_eq!(opaque, Err("a panic without a message".to_string()));
    }

    #[test]
    fn a_deadline_never_overflows_the_clock() {
        let now = tokio::time::Instant::now();
        for timeout in [Duration::from_secs(1 << 63), Duration::from_secs(u64::MAX), Duration::MAX] {
            assert!(deadline_after(timeout) >= now + FAR_FUTURE, "{timeout:?}");
        }
        let soon = deadline_after(Duration::from_secs(5));
        assert!(soon > now && soon <= tokio::time::Instant::now() + Duration::from_secs(5));
    }

    #[test]
    fn short_cuts_names_at_a_character() {
        assert_eq!(short("researcher", 64), "researcher");
        assert_eq!(short("ééééé", 2), "éé…");
    }

    /// A model client with a bug: its first call panics, later ones answer.
    struct PanicsOnce {
        calls: AtomicU32,
    }

    impl ChatProvider for PanicsOnce {
        fn complete<'b>(&'b self, _request: &'b ChatRequest) -> BoxFuture<'b, minibot_llm::Result<ChatResponse>> {
            Box::pin(async move {
                if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
                    panic!("index out of bounds: the len is 0 but the index is 3");
                }
                Ok(ChatResponse { content: Some("fine".into()), ..ChatResponse::default() })
            })
        }
    }

    /// A model client that answers at once.
    struct Answers;

    impl ChatProvider for Answers {
        fn complete<'b>(&'b self, _request: &'b ChatRequest) -> BoxFuture<'b, minibot_llm::Result<ChatResponse>> {
            Box::pin(async { Ok(ChatResponse { content: Some("done".into()), ..ChatResponse::default() }) })
        }
    }

    /// A worker with an idle limit runs the tasks that come, and returns only once the limit passed after the last.
    #[tokio::test]
    async fn an_idle_worker_returns_after_its_idle_period_and_not_before() {
        let dir = tempfile::tempdir().unwrap();
        let toml = "[llm]\nbase_url = \"http://127.0.0.1:9/v1\"\napi_key = \"sk-test\"\nmodel = \"m\"\n";
        let config = Arc::new(Config::from_toml(toml, "test.toml", dir.path(), &|_| None).unwrap());
        let path = dir.path().join("tasks.db");
        let orchestrator = SqliteQueue::open(&path, "orchestrator", Duration::from_secs(60)).await.unwrap();
        let worker_queue = Arc::new(SqliteQueue::open(&path, "w1", Duration::from_secs(60)).await.unwrap());
        let queue: Arc<dyn WorkQueue> = worker_queue.clone();
        let worker = Arc::new(Worker::new(config.clone(), queue, "w1"));
        let endpoint = config.llm_for(None, None, None).unwrap();
        worker.providers.lock().unwrap().insert(format!("{endpoint:?}"), Arc::new(Answers));
        let idle = Duration::from_millis(600);
        let started = Instant::now();
        let running = tokio::spawn({
            let worker = worker.clone();
            async move { worker.run_until_idle(Some(idle)).await }
        });
        // A task that comes before the limit runs, and the wait starts again after it.
        tokio::time::sleep(Duration::from_millis(400)).await;
        orchestrator.publish(&envelope("t1")).await.unwrap();
        let delivery = tokio::time::timeout(Duration::from_secs(20), orchestrator.next_event()).await.unwrap().unwrap();
        let finished_at = Instant::now();
        assert!(matches!(delivery.event.kind, WorkerEventKind::Finished { outcome: TaskOutcome::Done, .. }));
        assert!(!running.is_finished(), "the worker stopped while a task was coming");
        tokio::time::timeout(Duration::from_secs(10), running).await.unwrap().unwrap().unwrap();
        assert!(finished_at.elapsed() >= idle - Duration::from_millis(100), "it waited its idle period after the task");
        assert!(started.elapsed() >= Duration::from_millis(400) + idle - Duration::from_millis(100));
        orchestrator.close().await;
        worker_queue.close().await;
    }

    fn envelope(task_id: &str) -> TaskEnvelope {
        TaskEnvelope {
            version: PROTOCOL_VERSION,
            task_id: task_id.into(),
            agent_name: None,
            prompt: format!("do {task_id}"),
            context_json: None,
            model_overrides: ModelOverrides::default(),
            limits: TaskLimits { timeout_seconds: 60, max_steps: None, max_tool_calls: None },
            owner_id: "primary".into(),
            channel: "test".into(),
            chat_id: Some(1),
            user_id: Some(7),
            max_attempts: 3,
            agent_hash: None,
            requires: Vec::new(),
            agent_definition: None,
        }
    }

    /// The whole worker loop over a real queue: a task whose run panics is reported failed with an internal
    /// error and settled (not redelivered), and the worker goes on to the next task.
    #[tokio::test]
    async fn a_panicking_task_fails_alone_and_the_worker_takes_the_next() {
        let dir = tempfile::tempdir().unwrap();
        // Nothing listens there: the model client used is the one put in the worker's cache below.
        let toml = "[llm]\nbase_url = \"http://127.0.0.1:9/v1\"\napi_key = \"sk-test\"\nmodel = \"m\"\n";
        let config = Arc::new(Config::from_toml(toml, "test.toml", dir.path(), &|_| None).unwrap());
        let path = dir.path().join("tasks.db");
        let orchestrator = SqliteQueue::open(&path, "orchestrator", Duration::from_secs(60)).await.unwrap();
        let worker_queue = Arc::new(SqliteQueue::open(&path, "w1", Duration::from_secs(60)).await.unwrap());
        orchestrator.publish(&envelope("t1")).await.unwrap();
        orchestrator.publish(&envelope("t2")).await.unwrap();

        let queue: Arc<dyn WorkQueue> = worker_queue.clone();
        let worker = Arc::new(Worker::new(config.clone(), queue, "w1"));
        let endpoint = config.llm_for(None, None, None).unwrap();
        let buggy: Arc<dyn ChatProvider> = Arc::new(PanicsOnce { calls: AtomicU32::new(0) });
        worker.providers.lock().unwrap().insert(format!("{endpoint:?}"), buggy);
        let running = tokio::spawn({
            let worker = worker.clone();
            async move { worker.run().await }
        });

        let mut endings = std::collections::HashMap::new();
        while endings.len() < 2 {
            let delivery =
                tokio::time::timeout(Duration::from_secs(20), orchestrator.next_event()).await.unwrap().unwrap();
            orchestrator.ack_event(&delivery).await.unwrap();
            if let WorkerEventKind::Finished { outcome, stop_reason, text, error, .. } = delivery.event.kind {
                endings.insert(delivery.event.task_id, (outcome, stop_reason, text, error));
            }
        }
        let (outcome, stop_reason, text, error) = &endings["t1"];
        assert_eq!((*outcome, stop_reason.as_str(), text), (TaskOutcome::Failed, "worker_error", &None));
        let error = error.as_deref().unwrap();
        assert!(error.contains("worker w1 hit an internal error"), "{error}");
        assert!(!error.contains("index out of bounds"), "the panic's text stays in the log: {error}");
        let (outcome, _, text, _) = &endings["t2"];
        assert_eq!((*outcome, text.as_deref()), (TaskOutcome::Done, Some("fine")));

        assert!(!running.is_finished(), "the worker is still running");
        // Both are settled (a task is settled right after its terminal event): none goes back to the queue.
        let settled = async {
            while orchestrator.depth().await.unwrap() > 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), settled).await.unwrap();
        running.abort();
        let _ = running.await;
        orchestrator.close().await;
        worker_queue.close().await;
    }
}
