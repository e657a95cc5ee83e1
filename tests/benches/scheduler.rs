#![allow(clippy::expect_used, clippy::unwrap_used)]
//! Prints numbers; asserts nothing. The real release `minibot` daemon with its Telegram channel against a fake
//! Bot API and a scripted model that answers any message, and a scheduled prompts file written beforehand:
//! - lateness: 1,000 one-off jobs in 50 chats, due evenly within 10 s: how late each fired (the scheduler's own
//!   `lateness_ms` log field: due time to the turn taken into the chat's store) and how late its turn reached the
//!   model (due time to the model's request), p50 / p99 / max;
//! - idle: 10,000 jobs due tomorrow and later: the daemon's CPU and RSS over 60 s.
//!
//! Run: `cargo build --release --workspace --bins && cargo bench -p minibot-e2e --bench scheduler [-- lateness|idle]`.

use chrono::{DateTime, Utc};
use minibot_e2e::procfs::{clock_ticks_per_second, cpu_ticks, proc_status_kib};
use minibot_e2e::{Home, ScriptedLlm, binary};
use minibot_scheduler::{NewJob, Recurrence, SchedulerStore, StoreSettings, Target};
use minibot_test_support::FakeTelegram;
use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const PARTS: [&str; 2] = ["lateness", "idle"];
const JOBS: i64 = 1_000;
const CHATS: i64 = 50;
const SPREAD: Duration = Duration::from_secs(10);
/// Time for the daemon to start before the first job is due.
const LEAD: Duration = Duration::from_secs(4);
const IDLE_JOBS: i64 = 10_000;
const IDLE_FOR: Duration = Duration::from_secs(60);

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let chosen: Vec<String> = std::env::args().skip(1).filter(|arg| !arg.starts_with('-')).collect();
    if let Some(unknown) = chosen.iter().find(|part| !PARTS.contains(&part.as_str())) {
        eprintln!("unknown part {unknown:?}; usage: cargo bench -p minibot-e2e --bench scheduler -- [lateness|idle]");
        std::process::exit(2);
    }
    let wanted = |part: &str| chosen.is_empty() || chosen.iter().any(|c| c == part);
    println!("binary: {}", binary("minibot").display());
    if wanted("lateness") {
        lateness().await;
    }
    if wanted("idle") {
        idle().await;
    }
}

struct Setup {
    llm: ScriptedLlm,
    _fake: FakeTelegram,
    home: Home,
}

async fn setup() -> Setup {
    let llm = ScriptedLlm::start(vec![]).await;
    let fake = FakeTelegram::start().await;
    let telegram = format!(
        "[channels.telegram]\nbot_token = \"{}\"\napi_base_url = \"{}\"\npoll_timeout_seconds = 1\n\
         require_authorized = false\n[tasks]\nenabled = false\n",
        FakeTelegram::TOKEN,
        fake.base_url()
    );
    let home = Home::new(&llm.base_url(), &telegram);
    Setup { llm, _fake: fake, home }
}

async fn store(home: &Home) -> SchedulerStore {
    let path = home.path().join("data/scheduled_prompts.db");
    SchedulerStore::open(&path, 2, StoreSettings { batch_size: 10, lease: Duration::from_secs(120) }).await.unwrap()
}

fn job(i: i64, run_at: DateTime<Utc>) -> NewJob {
    NewJob {
        target: Target {
            owner_id: "primary".into(),
            channel: "telegram".into(),
            chat_id: 1_000 + i % CHATS,
            user_id: Some(7),
        },
        role: "user".into(),
        content: format!("JOB-{i}"),
        run_at,
        metadata: serde_json::json!({}),
        recurrence: Recurrence::None,
        end_at: None,
        time_zone: None,
        max_attempts: 3,
    }
}

/// The daemon, its log lines collected.
fn daemon(home: &Home) -> (Child, Arc<Mutex<Vec<String>>>) {
    let mut command = home.minibot(&["--verbose"]);
    command.stdout(Stdio::null()).stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let stderr = child.stderr.take().unwrap();
    let sink = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            sink.lock().unwrap().push(line);
        }
    });
    (child, lines)
}

fn percentiles(mut values: Vec<f64>) -> String {
    if values.is_empty() {
        return "no samples".into();
    }
    values.sort_by(f64::total_cmp);
    let at = |q: f64| values[((values.len() as f64 - 1.0) * q).round() as usize];
    format!("p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms (n = {})", at(0.5), at(0.99), at(1.0), values.len())
}

async fn lateness() {
    let setup = setup().await;
    let store = store(&setup.home).await;
    let first = Utc::now() + chrono::Duration::from_std(LEAD).unwrap();
    let step = SPREAD.as_micros() as i64 / JOBS;
    let due: Vec<DateTime<Utc>> = (0..JOBS).map(|i| first + chrono::Duration::microseconds(i * step)).collect();
    for (i, at) in due.iter().enumerate() {
        store.create(job(i as i64, *at), Utc::now()).await.unwrap();
    }
    store.close().await;
    let (mut child, lines) = daemon(&setup.home);
    let deadline = Instant::now() + LEAD + SPREAD + Duration::from_secs(60);
    let mut reached: Vec<f64> = Vec::new();
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let requests = setup.llm.requests();
        let arrivals = setup.llm.arrivals();
        reached = requests
            .iter()
            .zip(arrivals.iter())
            .filter_map(|(request, arrival)| {
                let text = request["messages"].as_array()?.iter().rev().find(|m| m["role"] == "user")?["content"]
                    .as_str()?
                    .to_string();
                let index: usize = text.lines().nth(1)?.strip_prefix("JOB-")?.parse().ok()?;
                let wall = Utc::now() - chrono::Duration::from_std(arrival.elapsed()).ok()?;
                Some((wall - due[index]).num_microseconds()? as f64 / 1000.0)
            })
            .collect();
        if reached.len() >= JOBS as usize {
            break;
        }
    }
    let fired: Vec<f64> = lines
        .lock()
        .unwrap()
        .iter()
        .filter(|line| line.contains("scheduled prompt fired"))
        .filter_map(|line| line.split("lateness_ms=").nth(1)?.split_whitespace().next()?.parse().ok())
        .collect();
    let _ = child.kill();
    let _ = child.wait();
    println!("lateness: {JOBS} jobs in {CHATS} chats due within {} s", SPREAD.as_secs());
    println!("  fired (due → turn in the chat's store):  {}  [target p99 < 200 ms]", percentiles(fired));
    println!("  turn reached the model (due → request): {}", percentiles(reached));
}

async fn idle() {
    let setup = setup().await;
    let store = store(&setup.home).await;
    let tomorrow = Utc::now() + chrono::Duration::days(1);
    for i in 0..IDLE_JOBS {
        store.create(job(i, tomorrow + chrono::Duration::seconds(i * 7)), Utc::now()).await.unwrap();
    }
    store.close().await;
    let (mut child, _lines) = daemon(&setup.home);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let pid = child.id();
    let (ticks_before, started) = (cpu_ticks(pid).unwrap_or(0), Instant::now());
    tokio::time::sleep(IDLE_FOR).await;
    let ticks = cpu_ticks(pid).unwrap_or(0).saturating_sub(ticks_before);
    let seconds = started.elapsed().as_secs_f64();
    let cpu = ticks as f64 / clock_ticks_per_second() / seconds * 100.0;
    let rss = proc_status_kib(pid, "VmRSS").unwrap_or(0) as f64 / 1024.0;
    let _ = child.kill();
    let _ = child.wait();
    println!(
        "idle: {IDLE_JOBS} future jobs, {:.0} s: CPU {cpu:.2} % ({ticks} ticks) [target ~0 %], RSS {rss:.1} MiB",
        seconds
    );
}
