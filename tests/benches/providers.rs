#![allow(clippy::expect_used, clippy::unwrap_used)]
//! Prints numbers; it asserts nothing. For every API format this build calls, against that API's scripted fake:
//! - the per-turn overhead of a turn with two tool calls (in-process actors, two model requests over loopback
//!   HTTP, SQLite writes), p50/p99, as `benches/turn.rs` measures Chat Completions;
//! - the time to the first streamed character added by the project: a raw socket server writes the stream's
//!   first text event at a recorded instant, and the client's `on_text` sees it at another; the difference is
//!   what the client (HTTP, SSE parsing, JSON, the wrappers) adds, p50/p99 over many requests.
//!
//! Run: `cargo bench -p minibot-e2e --bench providers`.

use actix::prelude::*;
use minibot_config::Config;
use minibot_e2e::{Reply, Script, ScriptedLlm};
use minibot_llm::{ChatRequest, Message};
use minibot_orchestrator::messages::{ChannelCapabilities, ChannelHandle, RegisterChannel};
use minibot_orchestrator::messages::{Inbound, Outbound, Progress};
use minibot_orchestrator::router::Router;
use minibot_orchestrator::runtime::Runtime;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

const TURNS: usize = 500;
const FIRST_CHARS: usize = 200;
/// `[llm] provider` values and the model each is asked for.
const FORMATS: [(&str, &str); 5] = [
    ("openai", "gpt-4o-mini"),
    ("openrouter", "openai/gpt-4o-mini"),
    ("openai_responses", "gpt-4.1-mini"),
    ("claude", "claude-sonnet-4-5"),
    ("google", "gemini-2.5-flash"),
];

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

fn config_for(provider: &str, model: &str, base_url: &str, dir: &std::path::Path) -> Config {
    let text =
        format!("[llm]\nprovider = \"{provider}\"\nmodel = \"{model}\"\nbase_url = \"{base_url}\"\napi_key = \"k\"\n");
    Config::from_toml(&text, "bench.toml", dir, &|_| None).unwrap()
}

async fn turns(provider: &str, model: &str) -> Option<Vec<Duration>> {
    let scripts: Vec<Script> = (0..TURNS).map(|i| two_call_script(&format!("bench {i}"))).collect();
    let llm = ScriptedLlm::start(scripts).await;
    // The fake keeps no copy of each request: its bookkeeping is not the project's overhead.
    llm.forget_bodies();
    let dir = tempfile::tempdir().unwrap();
    let config = config_for(provider, model, &llm.base_url(), dir.path());
    let runtime = match Runtime::build(config).await {
        Ok(runtime) => runtime,
        Err(error) => {
            println!("{provider}: not measured: {error:#}");
            return None;
        }
    };
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
        assert_eq!(reply.text, "83810205", "{provider}");
    }
    times.sort();
    Some(times)
}

/// The bytes a streaming answer of each API starts with, up to and including its first text piece (`H`).
fn first_event(provider: &str) -> String {
    let data = |json: &str| format!("data: {json}\n\n");
    let named = |name: &str, json: &str| format!("event: {name}\ndata: {json}\n\n");
    match provider {
        "openai" | "openrouter" => data(r#"{"choices":[{"index":0,"delta":{"content":"H"},"finish_reason":null}]}"#),
        "openai_responses" => named(
            "response.output_text.delta",
            r#"{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"H"}"#,
        ),
        "claude" => [
            named(
                "message_start",
                r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1}}}"#,
            ),
            named("content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#),
            named(
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"H"}}"#,
            ),
        ]
        .concat(),
        _ => data(r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"H"}]},"index":0}]}"#),
    }
}

/// A server that answers each request with a stream's first text event, written at a recorded instant, then
/// closes the connection. Returns its base URL and the instants.
async fn first_byte_server(provider: &'static str) -> (String, Arc<Mutex<Vec<Instant>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let written = Arc::new(Mutex::new(Vec::new()));
    let record = written.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let record = record.clone();
            tokio::spawn(async move {
                // Read the request head and its body (by Content-Length).
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 8192];
                loop {
                    let Ok(n) = socket.read(&mut chunk).await else { return };
                    if n == 0 {
                        return;
                    }
                    buffer.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buffer);
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text[..end]
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string())
                            })
                            .and_then(|v| v.parse::<usize>().ok())
                            .unwrap_or(0);
                        if buffer.len() >= end + 4 + length {
                            break;
                        }
                    }
                }
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
                let _ = socket.write_all(head.as_bytes()).await;
                let event = first_event(provider);
                record.lock().unwrap().push(Instant::now());
                let _ = socket.write_all(event.as_bytes()).await;
                let _ = socket.flush().await;
                tokio::time::sleep(Duration::from_millis(20)).await;
            });
        }
    });
    (base, written)
}

async fn first_chars(provider: &'static str, model: &str) -> Option<Vec<Duration>> {
    let (base, written) = first_byte_server(provider).await;
    let dir = tempfile::tempdir().unwrap();
    let config = config_for(provider, model, &base, dir.path());
    let client = minibot_llm::provider_for(&config.main_llm()).ok()?;
    let request =
        ChatRequest { model: model.into(), messages: vec![Message::User("hi".into())], ..ChatRequest::default() };
    let mut added = Vec::with_capacity(FIRST_CHARS);
    for i in 0..FIRST_CHARS {
        let seen = Mutex::new(None::<Instant>);
        let on_text = |_: &str| {
            seen.lock().unwrap().get_or_insert_with(Instant::now);
        };
        // The stream is cut after its first event: the call's own result does not matter here.
        let _ = client.stream(&request, &on_text).await;
        let seen = seen.into_inner().unwrap()?;
        let at = written.lock().unwrap()[i];
        added.push(seen.saturating_duration_since(at));
    }
    added.sort();
    Some(added)
}

fn main() {
    let system = System::new();
    system.block_on(async {
        for (provider, model) in FORMATS {
            if let Some(times) = turns(provider, model).await {
                println!(
                    "{provider:>16}: turn with two tool calls, {TURNS} turns: p50 {:.2} ms, p99 {:.2} ms",
                    percentile(&times, 0.5).as_secs_f64() * 1e3,
                    percentile(&times, 0.99).as_secs_f64() * 1e3
                );
            }
            match first_chars(provider, model).await {
                Some(added) => println!(
                    "{provider:>16}: first streamed character, time added over the server's first byte, {FIRST_CHARS} \
                     requests: p50 {:.3} ms, p99 {:.3} ms",
                    percentile(&added, 0.5).as_secs_f64() * 1e3,
                    percentile(&added, 0.99).as_secs_f64() * 1e3
                ),
                None => println!("{provider:>16}: first streamed character: not measured (no text reached on_text)"),
            }
        }
    });
}
