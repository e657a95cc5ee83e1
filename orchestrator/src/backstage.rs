//! What the web UI's pages read of the running assistant ([`minibot_web::Backstage`]): the model, channels,
//! tools, MCP servers, the task queue and the worker roster, each read when a page asks.

use crate::runtime::Runtime;
use minibot_protocol::TaskStatus;
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

#[async_trait::async_trait]
impl minibot_web::Backstage for RuntimeBackstage {
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
                                agents: w.specialists.iter().map(|s| s.name.clone()).collect(),
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
