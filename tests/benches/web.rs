#![allow(clippy::expect_used, clippy::unwrap_used)]
//! Prints numbers; asserts nothing. The real release `minibot` daemon with its web UI on, against a scripted
//! model that answers any message:
//! - chat: 100 WebSocket clients, each on its own chat (`web:1`…`web:100`), send a message at once and the model
//!   takes 0.5 s a request: time until every client has its answer, and the daemon's peak RSS;
//! - health: `GET /health` from 8 clients at once for 5 s, a new connection for each request (the server takes
//!   one request per connection): requests per second;
//! - idle: the daemon with only the web UI, idle for 30 s: its RSS and CPU (the Telegram-only daemon's idle RSS
//!   is in `cargo bench --bench telegram -- idle`).
//!
//! Run: `cargo build --release --workspace --bins && cargo bench -p minibot-e2e --bench web [-- chat|health|idle]`.

use futures_util::{SinkExt, StreamExt};
use minibot_e2e::procfs::{clock_ticks_per_second, cpu_ticks, proc_status_kib};
use minibot_e2e::web::{WebDaemon, http_config};
use minibot_e2e::{Home, ScriptedLlm, binary};
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::Message;

const PARTS: [&str; 3] = ["chat", "health", "idle"];
const CLIENTS: i64 = 100;
const MODEL_DELAY: Duration = Duration::from_millis(500);
const CHAT_TIMEOUT: Duration = Duration::from_secs(120);
const HEALTH_FOR: Duration = Duration::from_secs(5);
const HEALTH_CONNECTIONS: usize = 8;
const IDLE_FOR: Duration = Duration::from_secs(30);

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let chosen: Vec<String> = std::env::args().skip(1).filter(|arg| !arg.starts_with('-')).collect();
    if let Some(unknown) = chosen.iter().find(|part| !PARTS.contains(&part.as_str())) {
        eprintln!("unknown part {unknown:?}; usage: cargo bench -p minibot-e2e --bench web -- [chat|health|idle]");
        std::process::exit(2);
    }
    let wanted = |part: &str| chosen.is_empty() || chosen.iter().any(|c| c == part);
    println!("binary: {}", binary("minibot").display());
    minibot_llm::install_crypto_provider();
    if wanted("chat") {
        report("chat", chat().await);
    }
    if wanted("health") {
        report("health", health().await);
    }
    if wanted("idle") {
        report("idle", idle().await);
    }
}

fn report(part: &str, outcome: anyhow::Result<()>) {
    if let Err(error) = outcome {
        println!("{part}: FAILED: {error:#}");
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn pid(daemon: &WebDaemon) -> u32 {
    daemon.child.id()
}

async fn chat_token(daemon: &WebDaemon) -> anyhow::Result<String> {
    let page = reqwest::get(daemon.url("/chat")).await?.text().await?;
    let token = page.split("data-token=\"").nth(1).and_then(|rest| rest.split('"').next());
    token.map(str::to_string).ok_or_else(|| anyhow::anyhow!("the chat page has no token"))
}

async fn chat() -> anyhow::Result<()> {
    let llm = ScriptedLlm::start(Vec::new()).await;
    llm.set_default_delay(MODEL_DELAY);
    let home = Home::new(&llm.base_url(), &format!("{}[tasks]\nenabled = false\n", http_config("")));
    let daemon = WebDaemon::start(&home);
    let token = chat_token(&daemon).await?;
    let began = Instant::now();
    let mut clients = Vec::new();
    for chat in 1..=CLIENTS {
        let (url, origin, token) =
            (format!("ws://{}/chat/ws?c={chat}", daemon.authority()), daemon.base.clone(), token.clone());
        clients.push(tokio::spawn(async move { one_client(&url, &origin, &token, chat).await }));
    }
    let mut answered = 0;
    let mut slowest = Duration::ZERO;
    for client in clients {
        match tokio::time::timeout(CHAT_TIMEOUT, client).await {
            Ok(Ok(Ok(took))) => {
                answered += 1;
                slowest = slowest.max(took);
            }
            Ok(Ok(Err(error))) => println!("chat: a client failed: {error:#}"),
            other => println!("chat: a client did not finish: {other:?}"),
        }
    }
    let all = began.elapsed();
    println!(
        "chat: {answered} of {CLIENTS} WebSocket clients answered in {:.2} s (model {} ms a request; slowest client {:.2} s \
         from its connect); daemon RSS now {:.1} MiB, peak (VmHWM) {:.1} MiB; model requests {}",
        all.as_secs_f64(),
        MODEL_DELAY.as_millis(),
        slowest.as_secs_f64(),
        mib(proc_status_kib(pid(&daemon), "VmRSS").unwrap_or(0)),
        mib(proc_status_kib(pid(&daemon), "VmHWM").unwrap_or(0)),
        llm.requests().len()
    );
    Ok(())
}

/// Connects, sends one message, waits for the answer; answers how long that took.
async fn one_client(url: &str, origin: &str, token: &str, chat: i64) -> anyhow::Result<Duration> {
    let began = Instant::now();
    let mut request = url.into_client_request()?;
    request
        .headers_mut()
        .insert("Sec-WebSocket-Protocol", HeaderValue::from_str(&format!("minibot.chat, auth.{token}"))?);
    request.headers_mut().insert("Origin", HeaderValue::from_str(origin)?);
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await?;
    let message = serde_json::json!({ "kind": "message", "text": format!("hello from client {chat}") });
    socket.send(Message::Text(message.to_string().into())).await?;
    while let Some(frame) = socket.next().await {
        if let Message::Text(text) = frame? {
            let value: serde_json::Value = serde_json::from_str(&text)?;
            if value["kind"] == "message" && value["role"] == "assistant" {
                return Ok(began.elapsed());
            }
        }
    }
    anyhow::bail!("the socket closed before the answer")
}

async fn health() -> anyhow::Result<()> {
    let llm = ScriptedLlm::start(Vec::new()).await;
    let home = Home::new(&llm.base_url(), &format!("{}[tasks]\nenabled = false\n", http_config("")));
    let daemon = WebDaemon::start(&home);
    let url = daemon.url("/health");
    let deadline = Instant::now() + HEALTH_FOR;
    let mut workers = Vec::new();
    for _ in 0..HEALTH_CONNECTIONS {
        let url = url.clone();
        workers.push(tokio::spawn(async move {
            let client = reqwest::Client::builder().pool_max_idle_per_host(1).build().unwrap();
            let mut done = 0u64;
            while Instant::now() < deadline {
                if client.get(&url).send().await.and_then(|r| r.error_for_status()).is_ok() {
                    done += 1;
                }
            }
            done
        }));
    }
    let mut total = 0;
    for worker in workers {
        total += worker.await?;
    }
    println!(
        "health: {total} requests in {:.0} s from {HEALTH_CONNECTIONS} clients, a connection each = {:.0} requests/s \
         (client and server share this machine's cores); daemon RSS {:.1} MiB",
        HEALTH_FOR.as_secs_f64(),
        total as f64 / HEALTH_FOR.as_secs_f64(),
        mib(proc_status_kib(pid(&daemon), "VmRSS").unwrap_or(0))
    );
    Ok(())
}

async fn idle() -> anyhow::Result<()> {
    let llm = ScriptedLlm::start(Vec::new()).await;
    let home = Home::new(&llm.base_url(), &format!("{}[tasks]\nenabled = false\n", http_config("")));
    let daemon = WebDaemon::start(&home);
    // One page view first, as a user would have opened it.
    reqwest::get(daemon.url("/")).await?.error_for_status()?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pid = pid(&daemon);
    let before = cpu_ticks(pid).unwrap_or(0);
    let began = Instant::now();
    tokio::time::sleep(IDLE_FOR).await;
    let cpu = cpu_ticks(pid).unwrap_or(0).saturating_sub(before) as f64 / clock_ticks_per_second();
    println!(
        "idle: daemon with the web UI alone, RSS after {:.0} s idle: {:.1} MiB (VmHWM {:.1} MiB); CPU {:.2} s = {:.3} % of \
         one core",
        began.elapsed().as_secs_f64(),
        mib(proc_status_kib(pid, "VmRSS").unwrap_or(0)),
        mib(proc_status_kib(pid, "VmHWM").unwrap_or(0)),
        cpu,
        cpu / began.elapsed().as_secs_f64() * 100.0
    );
    Ok(())
}
