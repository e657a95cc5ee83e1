//! Shared setup: a config pointing at the scripted model, the queue's two sides on one file, and a running task.

mod approvals;
mod hostile;
mod managed;
mod progress;

use minibot_config::Config;
use minibot_protocol::{ModelOverrides, PROTOCOL_VERSION, TaskEnvelope, TaskLimits, WorkerEvent, WorkerEventKind};
use minibot_queue::sqlite::SqliteQueue;
use minibot_queue::{TaskQueue, WorkQueue};
use minibot_test_support::{Script, ScriptedLlm};
use minibot_worker::Worker;
use std::sync::Arc;
use std::time::Duration;

pub struct Setup {
    pub llm: ScriptedLlm,
    pub orchestrator: Arc<SqliteQueue>,
    worker_queue: Arc<SqliteQueue>,
    config: Arc<Config>,
    _dir: tempfile::TempDir,
}

impl Setup {
    /// `extra` is appended to the config (sections of its own).
    pub async fn start(scripts: Vec<Script>, extra: &str) -> Self {
        let llm = ScriptedLlm::start(scripts).await;
        let dir = tempfile::tempdir().unwrap();
        let toml = format!(
            "[llm]\nbase_url = \"{}\"\napi_key = \"sk-test\"\nmodel = \"worker-model\"\nretry_attempts = 0\n{extra}",
            llm.base_url()
        );
        let config = Config::from_toml(&toml, "test.toml", dir.path(), &|_| None).unwrap();
        let path = dir.path().join("tasks.db");
        let orchestrator = Arc::new(SqliteQueue::open(&path, "orchestrator", Duration::from_secs(60)).await.unwrap());
        let worker_queue = Arc::new(SqliteQueue::open(&path, "w1", Duration::from_secs(60)).await.unwrap());
        Self { llm, orchestrator, worker_queue, config: Arc::new(config), _dir: dir }
    }

    /// Queues a generic task with this prompt and has the worker claim and run it in the background.
    pub async fn run(&self, prompt: &str, timeout_seconds: u64) -> tokio::task::JoinHandle<()> {
        self.orchestrator.publish(&envelope("t1", prompt, timeout_seconds)).await.unwrap();
        let queue: Arc<dyn WorkQueue> = self.worker_queue.clone();
        let worker = Worker::new(self.config.clone(), queue.clone(), "w1");
        tokio::spawn(async move {
            let task = queue.claim().await.unwrap();
            worker.run_task(&task).await.unwrap();
        })
    }

    /// Runs the worker's claim loop in the background, as `minibot-worker` does, over the worker's side of the
    /// queue as `through` wraps it. It ends only when its queue fails.
    pub fn serve(
        &self,
        through: impl FnOnce(Arc<dyn WorkQueue>) -> Arc<dyn WorkQueue>,
    ) -> tokio::task::JoinHandle<Result<(), minibot_queue::QueueError>> {
        let queue = through(self.worker_queue.clone());
        let worker = Worker::new(self.config.clone(), queue, "w1");
        tokio::spawn(async move { worker.run().await })
    }

    /// The terminal events of `count` tasks, by task id.
    pub async fn endings(&self, count: usize) -> std::collections::HashMap<String, WorkerEvent> {
        let mut endings = std::collections::HashMap::new();
        while endings.len() < count {
            let event = self.next_event().await;
            if event.is_terminal() {
                endings.insert(event.task_id.clone(), event);
            }
        }
        endings
    }

    /// Waits until the queue holds no task: every claimed one was settled, none goes back to be run again.
    pub async fn settled(&self) {
        let empty = async {
            while self.orchestrator.depth().await.unwrap() > 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), empty).await.expect("the queue still holds tasks");
    }

    /// The next event of the task, acknowledged.
    pub async fn next_event(&self) -> WorkerEvent {
        let delivery =
            tokio::time::timeout(Duration::from_secs(20), self.orchestrator.next_event()).await.unwrap().unwrap();
        self.orchestrator.ack_event(&delivery).await.unwrap();
        delivery.event
    }

    /// Events until the terminal one, which is returned last.
    pub async fn events_to_the_end(&self) -> Vec<WorkerEvent> {
        let mut events = Vec::new();
        loop {
            let event = self.next_event().await;
            let last = event.is_terminal();
            events.push(event);
            if last {
                return events;
            }
        }
    }

    pub async fn close(&self) {
        self.orchestrator.close().await;
        self.worker_queue.close().await;
    }
}

/// A generic task as an orchestrator queues it.
pub fn envelope(task_id: &str, prompt: &str, timeout_seconds: u64) -> TaskEnvelope {
    TaskEnvelope {
        version: PROTOCOL_VERSION,
        task_id: task_id.into(),
        agent_name: None,
        prompt: prompt.into(),
        context_json: None,
        model_overrides: ModelOverrides::default(),
        limits: TaskLimits { timeout_seconds, max_steps: None, max_tool_calls: None },
        owner_id: "primary".into(),
        channel: "test".into(),
        chat_id: Some(1),
        user_id: Some(7),
        max_attempts: 1,
        agent_hash: None,
        requires: Vec::new(),
        agent_definition: None,
    }
}

/// The tool results the worker sent its model, as JSON text, over all its requests (the last request has all).
pub fn tool_results(llm: &ScriptedLlm) -> Vec<String> {
    let requests = llm.requests();
    let Some(last) = requests.iter().rfind(|r| r["model"] == "worker-model") else { return Vec::new() };
    last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect()
}

/// The text a terminal event carries (answer or error).
pub fn ending(event: &WorkerEvent) -> (String, Option<String>) {
    match &event.kind {
        WorkerEventKind::Finished { stop_reason, text, error, .. } => {
            (stop_reason.clone(), text.clone().or_else(|| error.clone()))
        }
        other => panic!("not a terminal event: {other:?}"),
    }
}
