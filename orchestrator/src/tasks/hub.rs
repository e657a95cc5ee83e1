//! The orchestrator's task service: validates and queues tasks for the delegation tools, and answers their
//! questions from the task records. The record is written before the envelope is published, so a task the
//! model was told about always exists; a publish that fails marks it failed and the tool result says so.

use super::demand::Demand;
use super::fleet::{Fleet, Needs};
use super::roster::{Roster, RosterCell};
use futures_util::future::BoxFuture;
use minibot_agent::{ToolContext, ToolError};
use minibot_config::{AgentDefinition, Config, DelegationMode, load_agents, managed_agents};
use minibot_protocol::{ControlKind, ControlMessage, ModelOverrides, PROTOCOL_VERSION, TaskEnvelope, TaskLimits};
use minibot_queue::TaskQueue;
use minibot_queue::backend::{self, OrchestratorQueue};
use minibot_queue::sqlite::SqliteQueue;
use minibot_store::{Applied, Ending, Lookup, NewTask, Store, TaskRecord, TaskStore};
use minibot_tools::tasks::{Delivery, TaskRequest, TaskService, TaskStatus};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Delegations one turn may start, and delegated results that may chain into new delegations.
pub const MAX_TASK_CONTINUATIONS: u32 = 3;
const RESULT_PREVIEW_CHARS: usize = 300;

pub struct TaskHub {
    pub config: Arc<Config>,
    pub store: TaskStore,
    pub queue: Arc<dyn TaskQueue>,
    /// The same queue as a SQLite queue, to release a dead local worker's leases at once.
    pub sqlite: Option<Arc<SqliteQueue>>,
    pub memory: Store,
    /// The specialists: read at start-up, changed by the agent-management tools.
    roster: Arc<RosterCell>,
    handoffs: Mutex<HashMap<String, Vec<String>>>,
    delegations: Mutex<HashMap<String, u32>>,
    /// Wakes the local worker slots that have no worker when a task is submitted.
    pub workers: Demand,
    /// Set when the stores close at exit: a periodic read that meets a closed store then is no news.
    closed: std::sync::atomic::AtomicBool,
    /// The live workers, from their heartbeats (kept by the coordinator).
    pub fleet: Mutex<Fleet>,
}

impl TaskHub {
    pub async fn open(config: Arc<Config>, memory: Store) -> anyhow::Result<Arc<Self>> {
        let store = TaskStore::open(&backend::tasks_db_path(&config)?).await?.with_redactor(config.redactor());
        let roster = Roster::load(&config).map_err(anyhow::Error::msg)?;
        // Every owner specialist's queue exists before any worker looks for it (declared with RabbitMQ). Managed
        // specialists travel on the generic route.
        let routes: Vec<String> = roster.owner.iter().map(|a| minibot_protocol::route_for(Some(&a.name))).collect();
        let OrchestratorQueue { queue, sqlite } = backend::open_orchestrator_queue(&config, &routes).await?;
        let roster = Arc::new(RosterCell::new(roster));
        let config_heartbeat = config.worker.heartbeat_seconds.max(1);
        Ok(Arc::new(Self {
            config,
            store,
            queue,
            sqlite,
            memory,
            roster,
            handoffs: Mutex::new(HashMap::new()),
            delegations: Mutex::new(HashMap::new()),
            workers: Demand::default(),
            closed: std::sync::atomic::AtomicBool::new(false),
            fleet: Mutex::new(Fleet::new(Duration::from_secs(config_heartbeat))),
        }))
    }

    /// Closes the task records and the queue (SQLite pools need their runtime to close, so before it ends).
    pub async fn close(&self) {
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        self.store.close().await;
        self.queue.close().await;
    }

    /// Whether the stores are closed (the process is exiting).
    pub fn is_closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Task ids a turn handed off, once.
    pub fn take_handoffs(&self, turn_id: &str) -> Vec<String> {
        if let Ok(mut delegations) = self.delegations.lock() {
            delegations.remove(turn_id);
        }
        self.handoffs.lock().ok().and_then(|mut h| h.remove(turn_id)).unwrap_or_default()
    }

    /// The roster fragment of the main system prompt.
    pub fn roster_prompt(&self) -> Option<String> {
        let roster = self.roster.get().entries();
        if roster.is_empty() {
            return None;
        }
        let mut text = String::from("Available specialist agents:\nUse only these exact agent names for delegation.");
        for (name, description) in &roster {
            text.push_str(&format!("\n- {name}: {description}"));
        }
        text.push_str("\nCall fetch_agent_info to read a specialist's full definition before overriding its model.");
        Some(text)
    }

    /// The specialists as this orchestrator reads them now; none when the folder does not load (the task tools
    /// report that themselves).
    pub fn agent_definitions(&self) -> Vec<AgentDefinition> {
        self.agents().unwrap_or_default()
    }

    /// The roster, shared with the agent-management tools.
    pub fn roster_cell(&self) -> Arc<RosterCell> {
        self.roster.clone()
    }

    /// Changes whenever the roster does: what was built from it (the system prompt) is stale.
    pub fn roster_generation(&self) -> u64 {
        self.roster.generation()
    }

    /// Whether there is no specialist to delegate to.
    pub fn roster_is_empty(&self) -> bool {
        let roster = self.roster.get();
        roster.owner.is_empty() && roster.managed.is_empty()
    }

    /// Whether `name` is a managed (model-authored) specialist: its tasks carry its definition and go to any
    /// worker.
    pub fn is_managed(&self, name: &str) -> bool {
        self.roster.get().managed(name).is_some()
    }

    /// The owner's specialists as their folder holds them now (a worker reads the same files for each task), then
    /// the managed ones as the roster holds them (their tasks carry that text).
    fn agents(&self) -> Result<Vec<AgentDefinition>, ToolError> {
        if !self.config.specialists_enabled() {
            return Ok(Vec::new());
        }
        let mut agents = load_agents(&self.config.resolve_path(&self.config.orchestration.directory))
            .map_err(|e| ToolError::respond("task:agents_unreadable", e.to_string()))?;
        let roster = self.roster.get();
        let managed = roster.managed.iter().map(|m| m.agent.clone());
        let managed: Vec<AgentDefinition> = managed.filter(|m| agents.iter().all(|a| a.name != m.name)).collect();
        agents.extend(managed);
        Ok(agents)
    }

    async fn lookup(&self, id: &str, ctx: &ToolContext) -> Result<Result<TaskRecord, Value>, ToolError> {
        let lookup = self.store.find(&ctx.owner_id, id).await.map_err(store_error)?;
        Ok(match lookup {
            Lookup::Found(record) => Ok(*record),
            Lookup::NotFound => Err(json!({ "task_id": id, "found": false, "reason": "task not found" })),
            Lookup::Ambiguous(ids) => Err(json!({ "task_id": id, "found": false,
                "reason": "the prefix matches several tasks; use more characters", "matches": ids })),
        })
    }

    /// A task that has not ended yet, or the answer for the model: not found, ambiguous, or already ended
    /// (with `outcome_key: false`).
    async fn running(
        &self,
        id: &str,
        outcome_key: &str,
        ctx: &ToolContext,
    ) -> Result<Result<TaskRecord, Value>, ToolError> {
        Ok(match self.lookup(id, ctx).await? {
            Ok(record) if record.is_terminal() => Err(json!({ "task_id": record.id, outcome_key: false,
                "reason": format!("task already {}", record.status) })),
            other => other,
        })
    }

    async fn submit_task(&self, request: TaskRequest, ctx: &ToolContext) -> Result<Value, ToolError> {
        let Some(chat_id) = ctx.chat_id else {
            return Err(ToolError::respond("task:no_channel", "tasks can only be started from a conversation"));
        };
        let tasks = &self.config.tasks;
        let agent = match &request.agent_name {
            None => None,
            Some(name) => {
                if !self.config.specialists_enabled() {
                    return Err(ToolError::respond(
                        "task:specialists_disabled",
                        "specialists are disabled; leave agent_name empty",
                    ));
                }
                let agents = self.agents()?;
                let names: Vec<String> = agents.iter().map(|a| a.name.clone()).collect();
                match agents.into_iter().find(|a| &a.name == name) {
                    Some(agent) => Some(agent),
                    None => {
                        return Err(ToolError::respond(
                            "task:unknown_agent",
                            format!(
                                "there is no specialist named `{name}`; available: {}",
                                if names.is_empty() {
                                    "none (leave agent_name empty)".to_string()
                                } else {
                                    names.join(", ")
                                }
                            ),
                        ));
                    }
                }
            }
        };
        // A managed specialist's task carries the definition it was checked as, and may only be retargeted to a
        // provider the ceiling allows.
        let carried = agent.as_ref().and_then(|a| {
            self.roster.get().managed(&a.name).filter(|m| m.agent.hash == a.hash).map(|m| m.text.clone())
        });
        if carried.is_some()
            && let Some(provider) = &request.model_provider
        {
            managed_agents::check_override_provider(&self.config, provider)
                .map_err(|e| ToolError::respond("task:provider_not_allowed", e.to_string()))?;
        }
        if let Some(provider) = &request.model_provider {
            let endpoint = self
                .config
                .llm_for(Some(provider), None, None)
                .map_err(|e| ToolError::respond("task:unknown_provider", e))?;
            endpoint
                .require_key(&self.config.origin())
                .map_err(|e| ToolError::respond("task:provider_without_credentials", e.to_string()))?;
        }
        let limit = tasks.worker_timeout_seconds;
        let timeout_seconds = match request.timeout_seconds {
            Some(t) if t > limit => {
                return Err(ToolError::invalid_arguments(format!(
                    "timeout_seconds {t} is above the worker limit of {limit} seconds ([tasks] worker_timeout_seconds)"
                )));
            }
            Some(t) => t,
            None => agent.as_ref().and_then(|a| a.timeout_seconds).map_or(limit, |t| t.min(limit)),
        };
        let mut delivery = request.delivery;
        if delivery == Delivery::Delegate {
            let claims = self.delegations.lock().map(|d| d.get(&ctx.turn_id).copied().unwrap_or(0)).unwrap_or(0);
            if ctx.task_depth >= MAX_TASK_CONTINUATIONS || claims >= MAX_TASK_CONTINUATIONS {
                if tasks.delegation_mode == DelegationMode::Delegate {
                    delivery = Delivery::Spawn;
                } else {
                    return Err(ToolError::respond(
                        "task:continuation_limit",
                        format!(
                            "at most {MAX_TASK_CONTINUATIONS} delegations per turn and {MAX_TASK_CONTINUATIONS} \
                             chained results; use spawn_task or answer with what you have"
                        ),
                    ));
                }
            }
        }
        let id = uuid::Uuid::new_v4().to_string();
        let overrides = ModelOverrides {
            model_provider: request.model_provider.clone(),
            model: request.model.clone(),
            reasoning_effort: request.reasoning_effort.clone(),
        };
        let max_attempts = tasks.sqlite.max_attempts.max(1);
        let new_task = NewTask {
            id: id.clone(),
            owner_id: ctx.owner_id.clone(),
            channel: ctx.channel.clone(),
            chat_id: Some(chat_id),
            user_id: ctx.user_id,
            prompt: request.prompt.clone(),
            agent_name: request.agent_name.clone(),
            context_json: request.context_json.clone(),
            model_overrides: json!({ "model_provider": overrides.model_provider, "model": overrides.model,
                                     "reasoning_effort": overrides.reasoning_effort }),
            delivery,
            continuation_depth: ctx.task_depth,
            origin_turn_id: Some(ctx.turn_id.clone()).filter(|t| !t.is_empty()),
            max_attempts,
            timeout_seconds,
            max_steps: tasks.worker_max_steps.max(),
            max_tool_calls: tasks.worker_max_tool_calls.max(),
        };
        self.store.create(&new_task).await.map_err(store_error)?;
        let envelope = TaskEnvelope {
            version: PROTOCOL_VERSION,
            task_id: id.clone(),
            agent_name: request.agent_name.clone(),
            prompt: request.prompt,
            context_json: request.context_json,
            model_overrides: overrides.clone(),
            limits: TaskLimits {
                timeout_seconds,
                max_steps: new_task.max_steps,
                max_tool_calls: new_task.max_tool_calls,
            },
            owner_id: ctx.owner_id.clone(),
            channel: ctx.channel.clone(),
            chat_id: Some(chat_id),
            user_id: ctx.user_id,
            max_attempts,
            agent_hash: agent.as_ref().map(|a| a.hash.clone()),
            requires: agent.as_ref().map(|a| a.requires.clone()).unwrap_or_default(),
            agent_definition: carried,
        };
        if self.workers.task_submitted()
            && let Ok(mut fleet) = self.fleet.lock()
        {
            // Local workers start only now: until they announce themselves, an empty roster says nothing.
            fleet.expect_workers();
        }
        if let Err(error) = self.queue.publish(&envelope).await {
            tracing::error!(task_id = %id, error = %error, "cannot queue the task");
            let error_text = error.to_string();
            let ending = Ending { error: Some(&error_text), ..Ending::new(TaskStatus::Failed, "worker_error") };
            if let Ok(Applied::Finished(record)) = self.store.finish(&id, 0, &ending).await {
                super::meter::ended(&record);
            }
            return Err(ToolError::respond("task:queue_failed", format!("the task could not be queued: {error}")));
        }
        tracing::info!(task_id = %id, agent = ?envelope.agent_name, delivery = %delivery, "task queued");
        if !ctx.turn_id.is_empty() {
            if let Err(error) = self.memory.mark_task_handoff(&ctx.turn_id).await {
                tracing::warn!(error = %error, "cannot mark the turn's hand-off");
            }
            if let Ok(mut handoffs) = self.handoffs.lock() {
                handoffs.entry(ctx.turn_id.clone()).or_default().push(id.clone());
            }
            if delivery == Delivery::Delegate
                && let Ok(mut delegations) = self.delegations.lock()
            {
                *delegations.entry(ctx.turn_id.clone()).or_insert(0) += 1;
            }
        }
        let limit_json = |v: Option<u32>| v.map_or(json!("unlimited"), |n| json!(n));
        let unserved = self.unserved(&envelope);
        let mut answer = json!({
            "task_id": id,
            "status": "queued",
            "task_status": "pending",
            "channel": ctx.channel,
            "chat_id": chat_id,
            "user_id": ctx.user_id,
            "agent_name": request.agent_name,
            "model_overrides": { "model_provider": overrides.model_provider, "model": overrides.model,
                                 "reasoning_effort": overrides.reasoning_effort },
            "limits": { "timeout_seconds": timeout_seconds, "max_steps": limit_json(new_task.max_steps),
                        "max_tool_calls": limit_json(new_task.max_tool_calls) },
            "continue_turn": delivery == Delivery::Delegate,
        });
        if let Some(reason) = unserved {
            answer["waiting_for_worker"] = json!(format!(
                "{reason}; the task stays queued until such a worker joins, or times out after {timeout_seconds} s"
            ));
        }
        Ok(answer)
    }

    /// Why no live worker can take this task now, if none can.
    pub fn unserved(&self, envelope: &TaskEnvelope) -> Option<String> {
        if envelope.agent_definition.is_some() {
            // Every worker can run a definition the task carries.
            let generic = Needs { agent: None, hash: None, requires: &[] };
            return self.fleet.lock().ok()?.unserved(generic);
        }
        let needs = Needs {
            agent: envelope.agent_name.as_deref(),
            hash: envelope.agent_hash.as_deref(),
            requires: &envelope.requires,
        };
        self.fleet.lock().ok()?.unserved(needs)
    }
}

fn store_error(error: minibot_store::StoreError) -> ToolError {
    ToolError::respond("task:store_failed", format!("the task store failed: {error}"))
}

fn preview(text: Option<&str>) -> Option<String> {
    text.map(|t| {
        let cut: String = t.chars().take(RESULT_PREVIEW_CHARS).collect();
        if t.chars().count() > RESULT_PREVIEW_CHARS { format!("{cut}…") } else { cut }
    })
}

fn summary(record: &TaskRecord) -> Value {
    json!({
        "task_id": record.id,
        "status": record.status,
        "channel": record.channel,
        "agent_name": record.agent_name,
        "stop_reason": record.stop_reason,
        "progress": record.progress,
        "attempts": record.attempts,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "started_at": record.started_at,
        "worker": record.worker_id.as_ref().map(|id| json!({ "worker_id": id, "host": record.worker_host })),
        "result_preview": preview(record.result_text.as_deref()),
    })
}

impl TaskService for TaskHub {
    fn submit<'a>(&'a self, request: TaskRequest, ctx: &'a ToolContext) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(self.submit_task(request, ctx))
    }

    fn cancel<'a>(&'a self, task_id: &'a str, ctx: &'a ToolContext) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            let record = match self.running(task_id, "cancelled", ctx).await? {
                Ok(record) => record,
                Err(answer) => return Ok(answer),
            };
            // Noted first, so the worker's report of the cancel, however quick, reads as asked for (the chat is
            // told of a cancel nobody here asked for).
            self.store.request_cancel(&record.id).await.map_err(store_error)?;
            // The queue first: until the cancel reaches it (or the worker), the task keeps running, and the
            // record must not say otherwise.
            if let Err(error) = self.queue.control(&ControlMessage::new(&record.id, ControlKind::Cancel)).await {
                tracing::warn!(task_id = %record.id, error = %error, "cannot tell the worker to cancel");
                if let Err(error) = self.store.withdraw_cancel(&record.id).await {
                    tracing::warn!(task_id = %record.id, error = %error, "cannot take back the cancel request");
                }
                return Err(ToolError::respond(
                    "task:cancel_failed",
                    format!("the cancel could not be sent to the task queue ({error}); the task keeps running"),
                ));
            }
            let ending = Ending::new(TaskStatus::Cancelled, "cancelled");
            let applied = self.store.finish(&record.id, record.attempts, &ending).await.map_err(store_error)?;
            if let Applied::Finished(ended) = &applied {
                super::meter::ended(ended);
            }
            if let Applied::Ignored = applied {
                // It ended on its own while the cancel was on its way (or its worker already reported the cancel).
                let status = self.store.get(&record.id).await.map_err(store_error)?.map(|r| r.status);
                if status != Some(TaskStatus::Cancelled) {
                    let status = status.map_or_else(|| "gone".to_string(), |s| s.to_string());
                    return Ok(json!({ "task_id": record.id, "cancelled": false,
                                      "reason": format!("task already {status}") }));
                }
            }
            // A turn that cancels a task it started hands nothing off: no result will come for it (a
            // `console --once` run would wait for one).
            if let Ok(mut handoffs) = self.handoffs.lock() {
                for ids in handoffs.values_mut() {
                    ids.retain(|id| *id != record.id);
                }
            }
            Ok(json!({ "task_id": record.id, "cancelled": true }))
        })
    }

    fn message<'a>(
        &'a self,
        task_id: &'a str,
        text: &'a str,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            let record = match self.running(task_id, "delivered", ctx).await? {
                Ok(record) => record,
                Err(answer) => return Ok(answer),
            };
            let message = ControlMessage::new(&record.id, ControlKind::Steer { text: text.to_string() });
            self.queue.control(&message).await.map_err(|e| {
                ToolError::respond("task:message_failed", format!("the message could not be sent: {e}"))
            })?;
            Ok(json!({ "task_id": record.id, "delivered": true }))
        })
    }

    fn list<'a>(
        &'a self,
        status: Option<TaskStatus>,
        limit: u32,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            let records = self.store.list(&ctx.owner_id, status, limit).await.map_err(store_error)?;
            let tasks: Vec<Value> = records.iter().map(summary).collect();
            // The live workers, so "is anyone there to run it?" has an answer too.
            let workers = self.fleet.lock().map(|mut fleet| fleet.describe()).unwrap_or_default();
            Ok(json!({ "count": tasks.len(), "tasks": tasks, "workers": workers }))
        })
    }

    fn get<'a>(
        &'a self,
        task_id: &'a str,
        include_events: bool,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            let record = match self.lookup(task_id, ctx).await? {
                Ok(record) => record,
                Err(answer) => return Ok(answer),
            };
            let mut task = summary(&record);
            task["prompt"] = json!(record.prompt);
            task["limits"] = json!({ "timeout_seconds": record.timeout_seconds, "max_steps": record.max_steps,
                                     "max_tool_calls": record.max_tool_calls });
            task["max_attempts"] = json!(record.max_attempts);
            task["last_error"] = json!(record.last_error);
            // Whether the user or the main agent asked for a cancel: a task `cancelled` without it was stopped
            // by someone else.
            task["cancel_requested"] = json!(record.cancel_requested);
            task["completed_at"] = json!(record.completed_at);
            task["result"] = json!({ "text": record.result_text });
            // What the attempt that ended the task used, as its worker reported it; null until then.
            task["usage"] = json!(record.usage);
            let mut answer = json!({ "found": true, "task": task });
            if include_events {
                let events = self.store.events(&record.id).await.map_err(store_error)?;
                answer["events"] = events
                    .into_iter()
                    .map(|(event_type, payload, created_at)| json!({ "event_type": event_type, "payload": payload, "created_at": created_at }))
                    .collect();
            }
            Ok(answer)
        })
    }

    fn agent_info<'a>(&'a self, agent_name: &'a str) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            let agents = self.agents()?;
            let Some(agent) = agents.iter().find(|a| a.name == agent_name) else {
                let names: Vec<&str> = agents.iter().map(|a| a.name.as_str()).collect();
                return Err(ToolError::respond(
                    "agent_not_found",
                    format!("no specialist named `{agent_name}`; available: {}", names.join(", ")),
                ));
            };
            let mut providers = Vec::new();
            let mut names: Vec<&str> = vec![self.config.llm.provider.as_str()];
            names.extend(self.config.providers.keys().map(String::as_str));
            names.dedup();
            for name in names {
                if let Ok(endpoint) = self.config.llm_for(Some(name), None, None)
                    && endpoint.require_key(&self.config.origin()).is_ok()
                {
                    let models = self.config.providers.get(name).map(|p| p.models.clone()).unwrap_or_default();
                    providers
                        .push(json!({ "name": name, "api_format": endpoint.api_format.as_str(), "models": models }));
                }
            }
            Ok(json!({
                "ok": true,
                "agent": agent.name,
                "managed": self.is_managed(&agent.name),
                "name": agent.name,
                "description": agent.description,
                "system_prompt": agent.system_prompt,
                "defaults": { "model_provider": agent.model_provider, "model": agent.model,
                              "reasoning_effort": agent.reasoning_effort, "timeout_seconds": agent.timeout_seconds },
                "tools_allow": agent.tools_allow,
                "tools_deny": agent.tools_deny,
                "mcp_servers": agent.mcp_servers,
                "available_providers": providers,
                "override_hint": "Pass model_provider, model or reasoning_effort to delegate/spawn_task to override the defaults for one task.",
            }))
        })
    }

    fn roster(&self) -> Vec<(String, String)> {
        self.roster.get().entries()
    }
}
