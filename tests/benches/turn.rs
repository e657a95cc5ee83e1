#![allow(clippy::expect_used, clippy::unwrap_used)]
//! Prints numbers; it asserts nothing. Against a scripted model that answers at once:
//! - per-turn orchestration overhead of a turn with two tool calls (in-process actors, p50/p99),
//! - cold start of `minibot console --once` to exit (the same two-call turn), and its peak RSS.
//!
//! Run: `cargo bench -p minibot-e2e`.

use actix::prelude::*;
use minibot_config::Config;
use minibot_e2e::{Home, Reply, Script, ScriptedLlm, binary};
use minibot_orchestrator::messages::{ChannelCapabilities, ChannelHandle, RegisterChannel};
use minibot_orchestrator::messages::{Inbound, Outbound, Progress};
use minibot_orchestrator::router::Router;
use minibot_orchestrator::runtime::Runtime;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

const TURNS: usize = 300;
const COLD_STARTS: usize = 20;

struct Sink(UnboundedSender<Outbound>);
impl Actor for Sink {
    type Context = Context<Self>;
}
impl Handler<Outbound> for Sink {
    type Result = ();
    fn handle(&mut self, msg: Outbound, _: &mut Context<Self>) {
        let _ = self.0.send(msg);
    }
}
impl Handler<Progress> for Sink {
    type Result = ();
    fn handle(&mut self, _: Progress, _: &mut Context<Self>) {}
}

fn two_call_script(text: &str) -> Script {
    Script::new(
        text,
        vec![
            Reply::tools_raw(&[("calculate_expression", r#"{"expression":"12345*6789"}"#), ("current_datetime", "{}")]),
            Reply::text("83810205"),
        ],
    )
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

fn main() {
    let system = System::new();
    system.block_on(async {
        let scripts: Vec<Script> = (0..TURNS).map(|i| two_call_script(&format!("bench {i}"))).collect();
        let llm = ScriptedLlm::start(scripts).await;
        // The fake keeps no copy of each request: its bookkeeping is not the project's overhead.
        llm.forget_bodies();
        let dir = tempfile::tempdir().unwrap();
        let text = format!("[llm]\nbase_url = \"{}\"\napi_key = \"k\"\n", llm.base_url());
        let config = Config::from_toml(&text, "bench.toml", dir.path(), &|_| None).unwrap();
        let runtime = Runtime::build(config).await.unwrap();
        let router = Router::new(runtime).start();
        let (tx, mut rx) = unbounded_channel();
        let sink = Sink(tx).start();
        router
            .send(RegisterChannel {
                name: "bench".into(),
                handle: ChannelHandle {
                    outbound: sink.clone().recipient(),
                    progress: sink.recipient(),
                    capabilities: ChannelCapabilities::default(),
                    files: None,
                    approvals: None,
                    confirms_delivery: false,
                },
            })
            .await
            .unwrap();
        let mut times = Vec::with_capacity(TURNS);
        for i in 0..TURNS {
            let started = Instant::now();
            router.do_send(Inbound::new("bench", i as i64, Some(1), format!("bench {i}")));
            let reply = rx.recv().await.unwrap();
            times.push(started.elapsed());
            assert_eq!(reply.text, "83810205");
        }
        times.sort();
        println!(
            "turn with two tool calls (2 model requests over loopback HTTP, SQLite writes), {TURNS} turns: \
             p50 {:.2} ms, p99 {:.2} ms",
            percentile(&times, 0.5).as_secs_f64() * 1e3,
            percentile(&times, 0.99).as_secs_f64() * 1e3
        );

        let cold_llm = ScriptedLlm::start((0..COLD_STARTS).map(|i| two_call_script(&format!("cold {i}"))).collect()).await;
        let mut cold = Vec::with_capacity(COLD_STARTS);
        let mut peak_rss_kb = 0i64;
        for i in 0..COLD_STARTS {
            let home = Home::new(&cold_llm.base_url(), "");
            let mut command = home.minibot(&["console", "--once", &format!("cold {i}")]);
            let (elapsed, rss) = tokio::task::spawn_blocking(move || {
                let started = Instant::now();
                let child = command.stdout(std::process::Stdio::null()).spawn().unwrap();
                let rss = wait_rss(child);
                (started.elapsed(), rss)
            })
            .await
            .unwrap();
            cold.push(elapsed);
            peak_rss_kb = peak_rss_kb.max(rss);
        }
        cold.sort();
        println!(
            "cold start `minibot console --once` (two tool calls) to exit, {COLD_STARTS} runs: p50 {:.1} ms, p99 {:.1} ms",
            percentile(&cold, 0.5).as_secs_f64() * 1e3,
            percentile(&cold, 0.99).as_secs_f64() * 1e3
        );
        println!("peak RSS of `minibot console --once`: {:.1} MB", peak_rss_kb as f64 / 1024.0);
        println!("binary: {}", binary("minibot").display());
    });
}

/// Waits for the child and returns its peak resident set size in KiB, read from `VmHWM` while it runs.
/// (`wait4`'s `ru_maxrss` would also count the parent's pages the child had before `exec`.)
fn wait_rss(mut child: std::process::Child) -> i64 {
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    loop {
        if let Ok(status) = std::fs::read_to_string(&status_path)
            && let Some(kb) = status
                .lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<i64>().ok())
        {
            peak = peak.max(kb);
        }
        if child.try_wait().ok().flatten().is_some() {
            return peak;
        }
        std::thread::sleep(Duration::from_micros(500));
    }
}
