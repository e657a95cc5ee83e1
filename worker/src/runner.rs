//! Runs one claimed task: the agent loop under the task's limits, progress and control messages alongside,
//! then the terminal event and the settlement of the claim. Tool calls that need the user's approval ask over
//! the queue ([`QueueApprovals`]); their answers arrive with the control messages.

use crate::approvals::QueueApprovals;
use crate::assembly::{Assembled, assemble};
use futures_util::future::BoxFuture;
use minibot_agent::OutgoingFile;
use minibot_agent::{
    AgentError, AgentEvent, AgentRun, ApprovalGate, Approver, ChannelCapabilities, Steer, StopReason, ToolContext,
};
use minibot_config::Config;
use minibot_llm::{ChatProvider, ChatRequest, ChatResponse};
use minibot_protocol::{ControlKind, TaskAttachment, TaskOutcome, TaskUsage, WorkerEvent, WorkerEventKind};
use minibot_queue::approvals::PendingApprovals;
use minibot_queue::{ClaimedTask, QueueError, WorkQueue};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

const CONTROL_POLL: Duration = Duration::from_millis(200);
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
        loop {
            let task = self.queue.claim().await?;
            tracing::info!(task_id = %task.envelope.task_id, attempt = task.attempt, agent = ?task.envelope.agent_name, "task claimed");
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
        let attempt = self.attempt(task, &tally, &notice);
        tokio::pin!(attempt);
        // A task still running after a moment says so; a quicker one only reports its end (one message less for
        // the broker per task, which is most of what a short task costs it).
        let announce = async {
            tokio::time::sleep(START_NOTICE_AFTER).await;
            match self.ensure_started(task, &notice).await {
                Ok(()) => {}
                // `notify_one` keeps its permit, so the run sees it even if it is not waiting yet.
                Err(QueueError::LeaseLost { .. }) => notice.lost.notify_one(),
                Err(error) => tracing::debug!(task_id = %task.envelope.task_id, error = %error, "start not reported"),
            }
        };
        let outcome = tokio::select! {
            outcome = &mut attempt => outcome,
            () = announce => attempt.await,
        };
        let Some(finished) = outcome else { return Ok(()) };
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
                let result = self.execute(task, assembled, tally, notice).await;
                if let Some(hub) = mcp {
                    hub.shutdown().await;
                }
                match result {
                    Ok(kind) => kind,
                    Err(Interrupt::LeaseLost) => {
                        tracing::warn!(task_id = %task.envelope.task_id, "lease lost; another worker owns the task now");
                        return None;
                    }
                    Err(Interrupt::Cancelled) => finished(TaskOutcome::Cancelled, "cancelled", None, tally.usage()),
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

    /// The model client for `endpoint`, built once.
    fn provider(&self, endpoint: &minibot_config::LlmEndpoint) -> Result<Arc<dyn ChatProvider>, String> {
        // Everything the client is built from, so two endpoints that differ in anything get their own.
        let key = format!("{endpoint:?}");
        let mut providers = self.providers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(provider) = providers.get(&key) {
            return Ok(provider.clone());
        }
        let provider = minibot_llm::provider_for(endpoint).map_err(|e| e.to_string())?;
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
        let pending = Arc::new(PendingApprovals::new(task));
        let deadline = tokio::time::Instant::now() + assembled.limits.timeout;
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
            },
            approvals: Some(&approvals),
            inbox: Some(&mut inbox_rx),
            on_event: &on_event,
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
                AgentEvent::ToolFinished { .. } | AgentEvent::SendFile(_) => continue,
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
            AgentEvent::ToolStarted { .. } => {
                self.tool_calls.fetch_add(1, Ordering::Relaxed);
            }
            AgentEvent::ToolFinished { .. } | AgentEvent::SendFile(_) => {}
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
