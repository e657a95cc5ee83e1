use actix::prelude::*;
use minibot_config::Config;
use minibot_orchestrator::messages::{ChannelCapabilities, ChannelHandle, RegisterChannel};
use minibot_orchestrator::messages::{Inbound, Outbound, Progress};
use minibot_orchestrator::router::Router;
use minibot_orchestrator::runtime::Runtime;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

/// A channel that hands every reply and progress event to the test.
pub struct TestChannel {
    outbound: UnboundedSender<Outbound>,
    progress: UnboundedSender<Progress>,
}

/// Registers a channel under `name` whose replies and progress go to the two senders.
pub async fn register(
    router: &Addr<Router>,
    name: &str,
    outbound: UnboundedSender<Outbound>,
    progress: UnboundedSender<Progress>,
) {
    let channel = TestChannel { outbound, progress }.start();
    let handle = ChannelHandle {
        outbound: channel.clone().recipient(),
        progress: channel.recipient(),
        capabilities: ChannelCapabilities::default(),
        files: None,
        approvals: None,
        confirms_delivery: false,
    };
    router.send(RegisterChannel { name: name.into(), handle }).await.unwrap();
}

impl Actor for TestChannel {
    type Context = Context<Self>;
}

impl Handler<Outbound> for TestChannel {
    type Result = ();
    fn handle(&mut self, msg: Outbound, _ctx: &mut Context<Self>) {
        let _ = self.outbound.send(msg);
    }
}

impl Handler<Progress> for TestChannel {
    type Result = ();
    fn handle(&mut self, msg: Progress, _ctx: &mut Context<Self>) {
        let _ = self.progress.send(msg);
    }
}

pub struct Harness {
    pub router: Addr<Router>,
    pub runtime: Arc<Runtime>,
    pub replies: UnboundedReceiver<Outbound>,
    pub progress: UnboundedReceiver<Progress>,
    pub _dir: tempfile::TempDir,
}

pub fn config_for(base_url: &str, dir: &std::path::Path, extra: &str) -> Config {
    let text = format!(
        "[llm]\nbase_url = \"{base_url}\"\napi_key = \"sk-test\"\nmodel = \"test-model\"\nretry_delay_seconds = 0.01\n{extra}"
    );
    Config::from_toml(&text, "test.toml", dir, &|_| None).expect("test config")
}

impl Harness {
    pub async fn start(base_url: &str, extra: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        Self::start_in(dir, base_url, extra).await
    }

    pub async fn start_in(dir: tempfile::TempDir, base_url: &str, extra: &str) -> Self {
        let config = config_for(base_url, dir.path(), extra);
        let runtime = Runtime::build(config).await.expect("runtime");
        let router = Router::new(runtime.clone()).start();
        let (out_tx, replies) = unbounded_channel();
        let (progress_tx, progress) = unbounded_channel();
        register(&router, "test", out_tx, progress_tx).await;
        Self { router, runtime, replies, progress, _dir: dir }
    }

    pub fn send(&self, chat_id: i64, text: &str) -> Inbound {
        let inbound = Inbound::new("test", chat_id, Some(7), text);
        self.router.do_send(inbound.clone());
        inbound
    }

    pub async fn reply(&mut self) -> Outbound {
        tokio::time::timeout(Duration::from_secs(10), self.replies.recv())
            .await
            .expect("a reply within 10 s")
            .expect("channel open")
    }

    /// The chat's stored conversation text: user messages and answers (not tool calls or their results).
    pub async fn history(&self, chat_id: i64) -> Vec<String> {
        let rows = self.runtime.store.history(&format!("test:{chat_id}")).await.unwrap();
        rows.into_iter()
            .filter(|m| m.role != minibot_store::Role::Tool && m.tool_calls.is_empty())
            .map(|m| m.content)
            .collect()
    }
}
