//! What the pages show of the running assistant. The orchestrator implements [`Backstage`]; this crate never
//! sees the runtime itself, so the dependency runs one way.

use std::time::Duration;

#[async_trait::async_trait]
pub trait Backstage: Send + Sync + 'static {
    /// The dashboard's figures, read now.
    async fn overview(&self) -> Overview;

    /// Background tasks, newest first, as `list_tasks` gives them (`{"tasks": [...]}`); `Err` says why not
    /// (tasks are off, the store failed).
    async fn tasks(&self, limit: u32) -> Result<serde_json::Value, String>;

    /// Cancels a running task, as `cancel_task` does; answers its result (`{"cancelled": true}` or why not).
    async fn cancel_task(&self, task_id: &str) -> Result<serde_json::Value, String>;
}

#[derive(Debug, Clone, Default)]
pub struct Overview {
    pub provider: String,
    pub model: String,
    pub channels: Vec<String>,
    /// The main agent's tools, by name.
    pub tools: Vec<String>,
    pub mcp: Vec<McpServerRow>,
    /// `None` when `[tasks]` is off.
    pub tasks: Option<TaskFigures>,
    /// Main-agent turns running now.
    pub running_turns: usize,
    pub uptime: Duration,
}

#[derive(Debug, Clone, Default)]
pub struct McpServerRow {
    pub name: String,
    /// `running`, `failed: …`, `stopped`.
    pub state: String,
    pub tools: usize,
}

#[derive(Debug, Clone, Default)]
pub struct TaskFigures {
    /// `sqlite` or `rabbitmq`.
    pub backend: String,
    /// Tasks waiting for a worker; `None` when the backend cannot say.
    pub queued: Option<u64>,
    pub running: u64,
    pub workers: Vec<WorkerRow>,
}

#[derive(Debug, Clone, Default)]
pub struct WorkerRow {
    pub id: String,
    pub host: String,
    /// The specialists it serves.
    pub agents: Vec<String>,
    /// Tasks it runs now, and at most at once.
    pub load: u32,
    pub capacity: u32,
}
