//! The scheduler actor: runs the [`Engine`] of `minibot-scheduler` for the channels this process serves, and
//! turns each fire into a turn of the chat that scheduled it. The turn goes through the router's durable intake
//! ([`AcceptUpdates`]) under the fire's id, so the turn and the record that the fire was taken are one
//! transaction of the chat store: a fire delivered again after a crash is recognised and starts nothing.
//!
//! Only jobs of channels this process runs fire here (the daemon: Telegram; the console: the console). A job of
//! another channel waits, and fires once, late and saying so, when a process with its channel starts.

use crate::messages::{AcceptUpdates, Deliver as DeliverToChat, Inbound, Outbound, OutboundRole};
use crate::router::Router;
use crate::runtime::Runtime;
use actix::prelude::*;
use futures_util::future::BoxFuture;
use minibot_scheduler::{Deliver, Engine, Fire, SystemClock, fire_text};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

pub struct Scheduler {
    engine: Option<Engine>,
    stop: watch::Sender<bool>,
    done: Option<tokio::sync::oneshot::Receiver<()>>,
}

impl Scheduler {
    /// The scheduler for `channels`, or `None` when `[scheduler.prompts]` is off.
    pub fn new(
        runtime: &Runtime,
        router: Addr<Router>,
        accept: Recipient<AcceptUpdates>,
        channels: Vec<String>,
    ) -> Option<Self> {
        let parts = runtime.scheduler.clone()?;
        let source = format!("scheduler:{}", parts.store.identity());
        let claimant = Claimant::current();
        let engine = Engine {
            store: parts.store.clone(),
            clock: Arc::new(SystemClock),
            deliver: Arc::new(ToChats { router, accept, source }),
            channels,
            claimant: claimant.to_string(),
            is_gone: Arc::new(move |other| claimant.outlived(other)),
            wake: parts.wake.clone(),
            poll: Duration::from_secs(runtime.config.scheduler.prompts.poll_interval_seconds.max(1)),
        };
        Some(Self { engine: Some(engine), stop: watch::channel(false).0, done: None })
    }
}

impl Actor for Scheduler {
    type Context = Context<Self>;

    fn started(&mut self, _ctx: &mut Context<Self>) {
        let Some(engine) = self.engine.take() else { return };
        let stop = self.stop.subscribe();
        let (done_tx, done) = tokio::sync::oneshot::channel();
        self.done = Some(done);
        tracing::info!(channels = ?engine.channels, "scheduler running");
        actix::spawn(async move {
            engine.run(stop).await;
            let _ = done_tx.send(());
        });
    }
}

/// Stops firing; resolves once the loop has ended (a fire in progress finishes first).
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopScheduler;

impl Handler<StopScheduler> for Scheduler {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: StopScheduler, ctx: &mut Context<Self>) -> Self::Result {
        self.stop.send_replace(true);
        let done = self.done.take();
        ctx.stop();
        Box::pin(async move {
            if let Some(done) = done {
                let _ = tokio::time::timeout(Duration::from_secs(10), done).await;
            }
        })
    }
}

/// Fires become turns of their chats through the router.
struct ToChats {
    router: Addr<Router>,
    /// The durable intake ([`crate::intake_ledger`]).
    accept: Recipient<AcceptUpdates>,
    /// `scheduler:<database identity>`: the chat store records fire ids under it.
    source: String,
}

impl Deliver for ToChats {
    fn deliver<'a>(&'a self, fire: &'a Fire, late_by: Option<Duration>) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let target = &fire.target;
            let mut inbound = Inbound::new(&target.channel, target.chat_id, target.user_id, fire_text(fire, late_by));
            inbound.event_id = format!("{}:{}", self.source, fire.id);
            inbound.scheduled_job = Some(fire.job_id.clone());
            let accepted = self
                .accept
                .send(AcceptUpdates { source: self.source.clone(), updates: vec![(fire.id, Some(inbound.clone()))] })
                .await
                .map_err(|e| format!("the intake is not running: {e}"))??;
            if accepted.first() == Some(&true) {
                self.router.do_send(Inbound { recorded: true, ..inbound });
            } else {
                tracing::info!(job_id = %fire.job_id, fire = fire.id, "scheduled prompt was already delivered");
            }
            Ok(())
        })
    }

    fn gave_up<'a>(&'a self, fire: &'a Fire, error: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let text = format!(
                "A scheduled prompt could not be started and will not be tried again: “{}” (due {}). Last error: {}",
                minibot_agent::excerpt(&fire.content),
                minibot_scheduler::time_text::iso(fire.due_at),
                minibot_agent::excerpt(error),
            );
            let note = Outbound::text(&fire.target.channel, fire.target.chat_id, text, OutboundRole::TaskResult);
            self.router.do_send(DeliverToChat(note));
        })
    }
}

/// This process as fire rows name it: `host:pid:nonce`. The nonce tells a restarted process from its
/// predecessor when the pid is the same (pid 1 in a container).
#[derive(Clone)]
struct Claimant {
    host: String,
    pid: u32,
    nonce: String,
}

impl Claimant {
    fn current() -> Self {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .ok()
            .filter(|h| !h.is_empty() && !h.contains(':'))
            .unwrap_or_else(|| "localhost".into());
        let nonce = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
        Self { host, pid: std::process::id(), nonce }
    }

    /// Whether `other` is a process of this host that no longer runs, so its fires need not wait out their lease.
    fn outlived(&self, other: &str) -> bool {
        let mut parts = other.rsplitn(3, ':');
        let (Some(nonce), Some(pid), Some(host)) = (parts.next(), parts.next(), parts.next()) else { return false };
        let Ok(pid) = pid.parse::<u32>() else { return false };
        if host != self.host || nonce == self.nonce {
            return false;
        }
        pid == self.pid || !std::path::Path::new(&format!("/proc/{pid}")).exists()
    }
}

impl std::fmt::Display for Claimant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}", self.host, self.pid, self.nonce)
    }
}

#[cfg(test)]
mod tests {
    use super::Claimant;

    #[test]
    fn a_dead_or_replaced_process_of_this_host_is_gone() {
        let me = Claimant { host: "box".into(), pid: std::process::id(), nonce: "aaaa".into() };
        assert!(!me.outlived(&me.to_string()), "not itself");
        assert!(me.outlived(&format!("box:{}:bbbb", std::process::id())), "same pid, new start");
        assert!(me.outlived("box:4194304:cccc"), "no such pid");
        assert!(!me.outlived("box:1:cccc"), "pid 1 runs");
        assert!(!me.outlived("other-host:4194304:cccc"), "another host's process is not ours to judge");
        assert!(!me.outlived("garbage"));
    }
}
