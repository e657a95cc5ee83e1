//! The orch host's side of a scale-out run: the real orchestrator booted in-process (router, task hub,
//! coordinator) with a chat channel that records every message it is sent, the scripted model (reached by the
//! workers through [`forward`]), and lapin probes of the queues. Runs inside [`Lab::in_orch`].

use super::lab::{Lab, forward};
use actix::prelude::*;
use lapin::options::QueueDeclareOptions;
use lapin::types::FieldTable;
use lapin::{Connection, ConnectionProperties};
use minibot_agent::ToolContext;
use minibot_orchestrator::boot;
use minibot_orchestrator::messages::{
    ChannelCapabilities, ChannelHandle, Outbound, OutboundRole, Progress, RegisterChannel,
};
use minibot_orchestrator::runtime::Runtime;
use minibot_orchestrator::tasks::{TaskHub, WorkerStart};
use minibot_test_support::{Script, ScriptedLlm};
use minibot_tools::tasks::{Delivery, TaskRequest, TaskService};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

/// The task queue's name on the private broker (the lab's broker serves one run only).
pub const QUEUE: &str = "scaleout";
const CHANNEL: &str = "e2e";
const CHAT_ID: i64 = 7;

/// The chat channel: hands every message to the driver, with when it arrived.
struct Chat(UnboundedSender<(Instant, Outbound)>);

impl Actor for Chat {
    type Context = Context<Self>;
}

impl Handler<Outbound> for Chat {
    type Result = ();
    fn handle(&mut self, message: Outbound, _: &mut Context<Self>) {
        let _ = self.0.send((Instant::now(), message));
    }
}

impl Handler<Progress> for Chat {
    type Result = ();
    fn handle(&mut self, _: Progress, _: &mut Context<Self>) {}
}

pub struct Driver {
    pub llm: ScriptedLlm,
    pub runtime: Arc<Runtime>,
    pub hub: Arc<TaskHub>,
    broker_url: String,
    worker_config: PathBuf,
    chat: UnboundedReceiver<(Instant, Outbound)>,
    /// Task results the chat received, by task id, in order.
    results: HashMap<String, Vec<Outbound>>,
    /// When each result arrived.
    arrivals: HashMap<String, Instant>,
}

/// The config both sides share: the private broker with a short heartbeat, no progress notes.
fn config(lab: &Lab, base_url: &str, max_attempts: u32, extra: &str) -> String {
    format!(
        "[llm]\nbase_url = \"{base_url}\"\napi_key = \"sk-e2e\"\nmodel = \"e2e-model\"\nretry_delay_seconds = 0.01\n\
         [tasks]\nbackend = \"rabbitmq\"\nprogress_interval_seconds = 0\n[tasks.sqlite]\nmax_attempts = {max_attempts}\n\
         [rabbitmq]\nbroker_url = \"{}\"\nqueue_name = \"{QUEUE}\"\nexchange_name = \"{QUEUE}.tasks\"\nmessage_key = \"test-message-key-0123456789abcdef0123456789\"\n{extra}",
        lab.broker_url()
    )
}

impl Driver {
    /// Starts the scripted model, writes the workers' config (`worker_extra` appended) and boots the
    /// orchestrator against the lab's broker. Call inside the orch namespace.
    pub async fn start(lab: &Lab, scripts: Vec<Script>, max_attempts: u32, worker_extra: &str) -> Driver {
        let llm = ScriptedLlm::start(scripts).await;
        let forwarded = forward(SocketAddr::new(lab.addr("orch").into(), 0), llm.addr).await;
        let worker_config = lab.dir().join("worker.toml");
        let worker_text = config(lab, &format!("http://{forwarded}/v1"), max_attempts, worker_extra);
        std::fs::write(&worker_config, worker_text).unwrap();
        let orchestrator = lab.dir().join("orchestrator");
        std::fs::create_dir_all(&orchestrator).unwrap();
        let path = orchestrator.join("config.toml");
        std::fs::write(&path, config(lab, &llm.base_url(), max_attempts, "")).unwrap();
        let config = minibot_config::Config::load(Some(&path)).unwrap();
        let booted = boot::start(config, None, WorkerStart::AtOnce)
            .await
            .unwrap_or_else(|e| panic!("the orchestrator did not start against {}: {e:#}", lab.broker_url()));
        let (tx, chat) = unbounded_channel();
        let sink = Chat(tx).start();
        let handle = ChannelHandle {
            outbound: sink.clone().recipient(),
            progress: sink.recipient(),
            capabilities: ChannelCapabilities::default(),
            files: None,
            approvals: None,
            confirms_delivery: false,
        };
        booted.router.send(RegisterChannel { name: CHANNEL.into(), handle }).await.unwrap();
        let hub = booted.runtime.tasks.clone().expect("tasks are enabled");
        Driver {
            llm,
            runtime: booted.runtime,
            hub,
            broker_url: lab.broker_url(),
            worker_config,
            chat,
            results: HashMap::new(),
            arrivals: HashMap::new(),
        }
    }

    /// The config file the workers run with.
    pub fn worker_config(&self) -> PathBuf {
        self.worker_config.clone()
    }

    /// Queues a `spawn_task` task with this prompt, as the model's tool call would; its id.
    pub async fn submit(&self, prompt: &str) -> String {
        let ctx = ToolContext {
            session_id: format!("{CHANNEL}:{CHAT_ID}"),
            channel: CHANNEL.into(),
            chat_id: Some(CHAT_ID),
            owner_id: "primary".into(),
            ..Default::default()
        };
        let answer = self
            .hub
            .submit(TaskRequest::new(Delivery::Spawn, prompt), &ctx)
            .await
            .unwrap_or_else(|e| panic!("submitting {prompt:?} failed: {e}"));
        answer["task_id"].as_str().unwrap().to_string()
    }

    fn take(&mut self, (at, message): (Instant, Outbound)) {
        if message.role != OutboundRole::TaskResult {
            return;
        }
        let Some(id) = message.task_id.clone() else { return };
        self.arrivals.entry(id.clone()).or_insert(at);
        self.results.entry(id).or_default().push(message);
    }

    /// Waits until every task of `ids` has a result in the chat; panics after `within`, naming the missing.
    pub async fn wait_results(&mut self, ids: &[String], within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let missing: Vec<&String> = ids.iter().filter(|id| !self.results.contains_key(*id)).collect();
            if missing.is_empty() {
                return;
            }
            match tokio::time::timeout_at(deadline, self.chat.recv()).await {
                Ok(Some(message)) => self.take(message),
                Ok(None) => panic!("the chat channel closed"),
                Err(_) => {
                    let mut statuses = Vec::new();
                    for id in missing.iter().take(10) {
                        let record = self.hub.store.get(id).await.ok().flatten();
                        let record =
                            record.map(|r| format!("{} after {} attempts {:?}", r.status, r.attempts, r.last_error));
                        statuses.push(format!("{id}: {}", record.unwrap_or_else(|| "no record".into())));
                    }
                    panic!(
                        "{} of {} tasks have no result after {within:?}; first ones: {statuses:#?}",
                        missing.len(),
                        ids.len()
                    );
                }
            }
        }
    }

    /// Keeps reading the chat for `period`, so a duplicate result that comes late is counted too.
    pub async fn linger(&mut self, period: Duration) {
        let deadline = tokio::time::Instant::now() + period;
        while let Ok(Some(message)) = tokio::time::timeout_at(deadline, self.chat.recv()).await {
            self.take(message);
        }
    }

    /// The task results the chat received for `id`.
    pub fn results(&self, id: &str) -> &[Outbound] {
        self.results.get(id).map(Vec::as_slice).unwrap_or_default()
    }

    /// When the first result of `id` reached the chat.
    pub fn arrival(&self, id: &str) -> Option<Instant> {
        self.arrivals.get(id).copied()
    }

    /// Which worker started each attempt of the task, from the task's events: `(attempt, worker id)`.
    pub async fn attempts(&self, id: &str) -> Vec<(u64, String)> {
        let events = self.hub.store.events(id).await.unwrap();
        events
            .into_iter()
            .filter(|(kind, _, _)| kind == "running")
            .map(|(_, payload, _)| {
                (payload["attempt"].as_u64().unwrap_or(0), payload["worker_id"].as_str().unwrap_or("").to_string())
            })
            .collect()
    }

    /// The task events the orchestrator applied for `id`, by kind (`running`, `progress`, `done`, …).
    pub async fn events(&self, id: &str) -> Vec<String> {
        self.hub.store.events(id).await.unwrap().into_iter().map(|(kind, _, _)| kind).collect()
    }

    /// How many times the task store recorded the task's end (an applied terminal event writes one).
    pub async fn endings(&self, id: &str) -> usize {
        let terminal = ["done", "failed", "cancelled", "timed_out"];
        self.events(id).await.iter().filter(|kind| terminal.contains(&kind.as_str())).count()
    }

    /// Messages ready in `queue` and consumers on it, by a passive declare on a connection of its own.
    pub async fn queue_counts(&self, queue: &str) -> (u32, u32) {
        let connection = Connection::connect(&self.broker_url, ConnectionProperties::default()).await.unwrap();
        let channel = connection.create_channel().await.unwrap();
        let passive = QueueDeclareOptions { passive: true, ..QueueDeclareOptions::default() };
        let declared = channel
            .queue_declare(queue.into(), passive, FieldTable::default())
            .await
            .unwrap_or_else(|e| panic!("the queue {queue} is not there: {e}"));
        let _ = connection.close(200, "probed".into()).await;
        (declared.message_count(), declared.consumer_count())
    }

    /// Waits until `count` workers consume the task queue.
    pub async fn wait_consumers(&self, count: u32, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let (_, consumers) = self.queue_counts(QUEUE).await;
            if consumers == count {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{consumers} workers consume the task queue after {within:?}, not {count}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn close(self) {
        self.runtime.close().await;
    }
}
