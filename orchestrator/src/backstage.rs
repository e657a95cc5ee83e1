//! What the web UI's pages read of the running assistant ([`minibot_web::Backstage`]): the model, channels,
//! tools, MCP servers, the task queue and the worker roster, each read when a page asks.

use crate::runtime::Runtime;
use minibot_agent::ToolContext;
use minibot_protocol::TaskStatus;
use minibot_tools::tasks::TaskService;
use minibot_web::{McpServerRow, Overview, TaskFigures, WorkerRow};
use std::sync::Arc;
use std::time::Instant;

pub struct RuntimeBackstage {
    rt: Arc<Runtime>,
    started: Instant,
}

impl RuntimeBackstage {
    pub fn new(rt: Arc<Runtime>) -> Self {
        Self { rt, started: Instant::now() }
    }
}

impl RuntimeBackstage {
    /// The task tools' view, as the owner sees it from the web UI.
    fn context(&self) -> ToolContext {
        ToolContext {
            session_id: "web:0".into(),
            channel: minibot_web::CHANNEL.into(),
            chat_id: None,
            user_id: None,
            owner_id: self.rt.config.runtime.owner_id.clone(),
            call_id: "web-ui".into(),
            turn_id: String::new(),
            task_depth: 0,
            capabilities: Default::default(),
            approver: None,
            agent_tools: None,
            parent_call_id: None,
            nested: None,
        }
    }

    fn hub(&self) -> Result<&Arc<crate::tasks::TaskHub>, String> {
        self.rt.tasks.as_ref().ok_or_else(|| "Background tasks are off ([tasks] enabled = false).".to_string())
    }
}

#[async_trait::async_trait]
impl minibot_web::Backstage for RuntimeBackstage {
    async fn tasks(&self, limit: u32) -> Result<serde_json::Value, String> {
        let hub = self.hub()?;
        hub.list(None, limit, &self.context()).await.map_err(|e| e.to_string())
    }

    async fn cancel_task(&self, task_id: &str) -> Result<serde_json::Value, String> {
        let hub = self.hub()?;
        hub.cancel(task_id, &self.context()).await.map_err(|e| e.to_string())
    }

    async fn overview(&self) -> Overview {
        let rt = &self.rt;
        let mut tools = rt.tools().names();
        tools.sort();
        let mcp = rt.mcp.as_ref().map_or_else(Vec::new, |hub| {
            hub.status()
                .into_iter()
                .map(|server| McpServerRow {
                    state: server.error.map_or_else(|| "running".to_string(), |error| format!("failed: {error}")),
                    tools: server.tools.len(),
                    name: server.name,
                })
                .collect()
        });
        let tasks = match &rt.tasks {
            None => None,
            Some(hub) => {
                let active = hub.store.active().await;
                let count = |status: TaskStatus| {
                    active.as_ref().ok().map(|tasks| tasks.iter().filter(|t| t.status == status).count() as u64)
                };
                let workers = hub
                    .fleet
                    .lock()
                    .map(|mut fleet| {
                        fleet
                            .live()
                            .into_iter()
                            .map(|w| WorkerRow {
                                id: w.worker_id.clone(),
                                host: w.host.clone(),
                                agents: w
                                    .generic
                                    .then(|| "general tasks".to_string())
                                    .into_iter()
                                    .chain(w.specialists.iter().map(|s| s.name.clone()))
                                    .collect(),
                                load: w.load,
                                capacity: w.capacity,
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                Some(TaskFigures {
                    backend: rt.config.tasks.backend.as_str().to_string(),
                    queued: count(TaskStatus::Pending),
                    running: count(TaskStatus::Running).unwrap_or(0),
                    workers,
                })
            }
        };
        Overview {
            provider: rt.config.main_llm().provider.clone(),
            model: rt.model.model.clone(),
            channels: rt.channels(),
            tools,
            mcp,
            tasks,
            running_turns: rt.active_turns(),
            uptime: self.started.elapsed(),
        }
    }
}
