#![allow(clippy::expect_used, clippy::unwrap_used)]
//! Prints numbers; asserts nothing. The real release `minibot` daemon (no subcommand) with its Telegram channel,
//! long polling a fake Bot API ([`FakeTelegram`]), against a scripted model that answers any message:
//! - burst: 200 chats write at once and the model takes 0.5 s a request: time until every chat has its answer,
//!   and the peak RSS of the daemon and of the daemon plus its local workers;
//! - soak: 20,000 messages from 50 chats, in waves of one message per chat, with compaction on: the daemon's
//!   RSS every 2,000 messages, messages per second, and the largest request against the compaction budget;
//! - soak1000: the same 20,000 messages from 1,000 distinct chats;
//! - idle: a daemon without workers (`[tasks] enabled = false`) long polling for 60 s: its RSS and CPU.
//!
//! Run: `cargo build --release --workspace --bins && cargo bench -p minibot-e2e --bench telegram [-- burst|soak|soak1000|idle]`.

use minibot_e2e::procfs::{clock_ticks_per_second, cpu_ticks, proc_status_kib, stat_fields};
use minibot_e2e::{Home, ScriptedLlm, binary};
use minibot_test_support::FakeTelegram;
use minibot_test_support::fake_telegram::Call;
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const PARTS: [&str; 4] = ["burst", "soak", "soak1000", "idle"];

const BURST_CHATS: i64 = 200;
const BURST_FIRST_CHAT: i64 = 1001;
const BURST_MODEL_DELAY: Duration = Duration::from_millis(500);
/// MiniBot 0.36 answers one message after the other: 200 × 0.5 s; leave room beyond that.
const BURST_TIMEOUT: Duration = Duration::from_secs(180);

const SOAK_MESSAGES: usize = 20_000;
const SOAK_FIRST_CHAT: i64 = 2001;
/// Messages between two RSS samples.
const SOAK_SAMPLE_MESSAGES: usize = 2_000;
/// The compaction budget of the soak: small, so every chat is compacted several times (the system prompt and
/// the tools' schemas take about 5,000 of it; each chat reaches the budget every ~40 turns).
const SOAK_BUDGET_TOKENS: usize = 6_000;
const SOAK_WAVE_TIMEOUT: Duration = Duration::from_secs(60);
/// After the last wave: longer than the daemon's quiet spell before it releases freed memory.
const QUIET_SAMPLE_AFTER: Duration = Duration::from_secs(4);

const IDLE_FOR: Duration = Duration::from_secs(60);

const KIB_PER_MIB: f64 = 1024.0;

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    // `cargo bench` adds `--bench`; every other word names a part.
    let chosen: Vec<String> = std::env::args().skip(1).filter(|arg| !arg.starts_with('-')).collect();
    if let Some(unknown) = chosen.iter().find(|part| !PARTS.contains(&part.as_str())) {
        eprintln!("unknown part {unknown:?}; usage: cargo bench -p minibot-e2e --bench telegram -- [burst|soak|idle]");
        std::process::exit(2);
    }
    let wanted = |part: &str| chosen.is_empty() || chosen.iter().any(|c| c == part);
    println!("binary: {}", binary("minibot").display());
    if wanted("burst") {
        report("burst", burst().await);
    }
    if wanted("soak") {
        report("soak", soak(50).await);
    }
    if wanted("soak1000") {
        report("soak1000", soak(1000).await);
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

// ---- The parts ----

async fn burst() -> anyhow::Result<()> {
    let llm = ScriptedLlm::start(Vec::new()).await;
    // Unscripted messages get `unscripted: <text>` after the default delay.
    llm.set_default_delay(BURST_MODEL_DELAY);
    let fake = FakeTelegram::start().await;
    let home = Home::new(&llm.base_url(), &telegram_config(&fake, 1, ""));
    let mut daemon = Daemon::start(&home);
    let outcome = burst_run(&fake, &llm, &mut daemon).await;
    finish("burst", daemon, outcome)
}

async fn burst_run(fake: &FakeTelegram, llm: &ScriptedLlm, daemon: &mut Daemon) -> anyhow::Result<()> {
    daemon.wait_until_polling(fake).await?;
    let workers = daemon.wait_for_children(2, Duration::from_secs(15)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = daemon.memory();
    println!(
        "burst: before the burst: daemon {:.1} MiB, {} child processes, total {:.1} MiB",
        mib(before.daemon_kib),
        workers,
        mib(before.total_kib)
    );

    let sampler = Sampler::start(daemon.pid());
    let start = fake_len(fake).await;
    let pushed = Instant::now();
    for chat in BURST_FIRST_CHAT..BURST_FIRST_CHAT + BURST_CHATS {
        fake.push_text(chat, chat, &format!("burst message from chat {chat}"));
    }
    let answers = loop {
        let answers = first_answers(fake, start, BURST_FIRST_CHAT, BURST_CHATS).await;
        let answered = answers.iter().flatten().count();
        if answered == answers.len() {
            break answers;
        }
        if let Some(status) = daemon.exited() {
            sampler.finish();
            anyhow::bail!("the daemon exited ({status}) with {answered}/{BURST_CHATS} chats answered");
        }
        if pushed.elapsed() > BURST_TIMEOUT {
            sampler.finish();
            anyhow::bail!(
                "{answered}/{BURST_CHATS} chats answered {:.0} s after the push; {} updates still unconfirmed, {} \
                 model requests so far",
                BURST_TIMEOUT.as_secs_f64(),
                fake.pending_updates(),
                llm.requests().len()
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let peaks = sampler.finish();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = daemon.memory();

    let mut latencies: Vec<Duration> =
        answers.iter().flatten().map(|at| at.saturating_duration_since(pushed)).collect();
    latencies.sort();
    println!(
        "burst: {BURST_CHATS} chats, one message each, model {:.1} s per request: all answered {:.3} s after the \
         push (target < 1.5 s; MiniBot 0.36 answers one at a time, about 100 s); first answer {:.3} s, median {:.3} s",
        BURST_MODEL_DELAY.as_secs_f64(),
        latencies.last().map_or(0.0, Duration::as_secs_f64),
        latencies.first().map_or(0.0, Duration::as_secs_f64),
        percentile(&latencies, 0.5).as_secs_f64()
    );
    let mut arrivals: Vec<Duration> =
        llm.arrivals().iter().filter(|at| **at >= pushed).map(|at| at.saturating_duration_since(pushed)).collect();
    arrivals.sort();
    println!(
        "burst: model requests after the push: {}, the first arrived {:.3} s and the last {:.3} s after the push",
        arrivals.len(),
        arrivals.first().map_or(0.0, Duration::as_secs_f64),
        arrivals.last().map_or(0.0, Duration::as_secs_f64)
    );
    println!(
        "burst: peak RSS during the burst (sampled every 20 ms, {} samples): daemon {:.1} MiB, daemon + its child \
         processes (up to {}) {:.1} MiB; daemon VmHWM since start {:.1} MiB",
        peaks.samples,
        mib(peaks.daemon_kib),
        peaks.children,
        mib(peaks.total_kib),
        mib(proc_status_kib(daemon.pid(), "VmHWM").unwrap_or(0))
    );
    println!(
        "burst: 1 s after the last answer: daemon {:.1} MiB, total {:.1} MiB",
        mib(after.daemon_kib),
        mib(after.total_kib)
    );
    Ok(())
}

async fn soak(chats: i64) -> anyhow::Result<()> {
    let llm = ScriptedLlm::start(vec![minibot_test_support::Script::containing(
        "Please compact the current conversation memory.",
        vec![minibot_test_support::Reply::text("Summary: the user sent numbered soak messages and got them back.")],
    )])
    .await;
    llm.forget_bodies();
    let fake = FakeTelegram::start().await;
    let memory = format!("[memory]\nmax_history_tokens = {SOAK_BUDGET_TOKENS}\n");
    let home = Home::new(&llm.base_url(), &telegram_config(&fake, 1, &memory));
    let mut daemon = Daemon::start(&home);
    let outcome = soak_run(&fake, &llm, &mut daemon, &home, chats).await;
    finish("soak", daemon, outcome)
}

async fn soak_run(
    fake: &FakeTelegram,
    llm: &ScriptedLlm,
    daemon: &mut Daemon,
    home: &Home,
    soak_chats: i64,
) -> anyhow::Result<()> {
    let (chats, waves) = (soak_chats, SOAK_MESSAGES / soak_chats as usize);
    let sample_every = (SOAK_SAMPLE_MESSAGES / soak_chats as usize).max(1);
    daemon.wait_until_polling(fake).await?;
    daemon.wait_for_children(2, Duration::from_secs(15)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    println!("soak: daemon RSS before the first message: {:.1} MiB", mib(daemon.memory().daemon_kib));

    let mut samples_kib = Vec::new();
    let mut breakdowns = Vec::new();
    let mut wave_times = Vec::with_capacity(waves);
    let began = Instant::now();
    for wave in 0..waves {
        let start = fake_len(fake).await;
        let pushed = Instant::now();
        for chat in SOAK_FIRST_CHAT..SOAK_FIRST_CHAT + chats {
            fake.push_text(chat, chat, &format!("soak message {wave} from chat {chat}"));
        }
        loop {
            let answers = first_answers(fake, start, SOAK_FIRST_CHAT, chats).await;
            let answered = answers.iter().flatten().count();
            if answered == answers.len() {
                let last = answers.iter().flatten().max().copied().unwrap_or(pushed);
                wave_times.push(last.saturating_duration_since(pushed));
                break;
            }
            if let Some(status) = daemon.exited() {
                anyhow::bail!(
                    "the daemon exited ({status}) in wave {wave} ({} messages answered before it, {answered}/{chats} \
                     of this wave)",
                    wave * chats as usize
                );
            }
            if pushed.elapsed() > SOAK_WAVE_TIMEOUT {
                let missing: Vec<i64> = answers
                    .iter()
                    .enumerate()
                    .filter(|(_, at)| at.is_none())
                    .map(|(i, _)| SOAK_FIRST_CHAT + i as i64)
                    .collect();
                anyhow::bail!(
                    "wave {wave}: {answered}/{chats} chats answered after {:.0} s ({} messages answered \
                     before); unanswered chats {missing:?}; {} updates still unconfirmed; {} model requests so far",
                    SOAK_WAVE_TIMEOUT.as_secs_f64(),
                    wave * chats as usize,
                    fake.pending_updates(),
                    llm.requests().len()
                );
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        if (wave + 1) % sample_every == 0 {
            samples_kib.push(proc_status_kib(daemon.pid(), "VmRSS").unwrap_or(0));
            breakdowns.push(rss_breakdown(daemon.pid()));
        }
    }
    let elapsed = began.elapsed();
    // What the daemon holds once the chats go quiet: it gives freed memory back after a quiet spell.
    tokio::time::sleep(QUIET_SAMPLE_AFTER).await;
    let quiet_kib = proc_status_kib(daemon.pid(), "VmRSS").unwrap_or(0);

    let messages = waves * chats as usize;
    let per_sample = sample_every * chats as usize;
    let listed: Vec<String> =
        samples_kib.iter().enumerate().map(|(i, kib)| format!("{}: {:.1}", (i + 1) * per_sample, mib(*kib))).collect();
    println!("soak: daemon RSS (MiB) after N messages: {}", listed.join(", "));
    let first = samples_kib.first().copied().unwrap_or(0);
    let last = samples_kib.last().copied().unwrap_or(0);
    let (largest, requests) = llm.largest_request();
    println!(
        "soak: largest model request {largest} bytes of JSON body ({} tokens as the fake counts, 4 bytes a token) \
         in {requests} requests; compaction budget {SOAK_BUDGET_TOKENS} tokens, the most a request may carry {} \
         (a quarter above, for a model the table does not know)",
        largest.div_ceil(4),
        SOAK_BUDGET_TOKENS + SOAK_BUDGET_TOKENS / 4
    );
    println!(
        "soak: RSS growth from the first sample ({per_sample} messages) to the last ({messages}): {:+.1} MiB \
         (target < 2 MiB); daemon VmHWM {:.1} MiB",
        (last as f64 - first as f64) / KIB_PER_MIB,
        mib(proc_status_kib(daemon.pid(), "VmHWM").unwrap_or(0))
    );
    println!(
        "soak: RSS make-up at the first sample: {}; at the last: {}; data folder {:.1} MiB",
        breakdowns.first().map_or("", String::as_str),
        breakdowns.last().map_or("", String::as_str),
        folder_kib(&home.path().join("data")) as f64 / KIB_PER_MIB
    );
    println!(
        "soak: daemon RSS {:.0} s after the last answer: {:.1} MiB ({:+.1} MiB from the first sample)",
        QUIET_SAMPLE_AFTER.as_secs_f64(),
        mib(quiet_kib),
        (quiet_kib as f64 - first as f64) / KIB_PER_MIB
    );
    wave_times.sort();
    println!(
        "soak: {messages} messages from {chats} chats (model answers at once) in {:.1} s: {:.0} messages/s \
         overall ({waves} waves of one message per chat, each waiting for its {chats} answers; wave p50 \
         {:.1} ms, p99 {:.1} ms); model requests: {}",
        elapsed.as_secs_f64(),
        messages as f64 / elapsed.as_secs_f64(),
        percentile(&wave_times, 0.5).as_secs_f64() * 1e3,
        percentile(&wave_times, 0.99).as_secs_f64() * 1e3,
        llm.largest_request().1
    );
    Ok(())
}

async fn idle() -> anyhow::Result<()> {
    let llm = ScriptedLlm::start(Vec::new()).await;
    let fake = FakeTelegram::start().await;
    // The default poll timeout, as a real deployment has it.
    let home = Home::new(&llm.base_url(), &telegram_config(&fake, 25, "[tasks]\nenabled = false\n"));
    let mut daemon = Daemon::start(&home);
    let outcome = idle_run(&fake, &mut daemon).await;
    finish("idle", daemon, outcome)
}

async fn idle_run(fake: &FakeTelegram, daemon: &mut Daemon) -> anyhow::Result<()> {
    daemon.wait_until_polling(fake).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pid = daemon.pid();
    let ticks_before = cpu_ticks(pid).unwrap_or(0);
    let polls_before = fake_polls(fake).await;
    let began = Instant::now();
    tokio::time::sleep(IDLE_FOR).await;
    let ticks_after = cpu_ticks(pid).unwrap_or(0);
    let window = began.elapsed();
    if let Some(status) = daemon.exited() {
        anyhow::bail!("the daemon exited ({status}) while idle");
    }
    let polls = fake_polls(fake).await - polls_before;
    let memory = daemon.memory();
    println!(
        "idle: daemon RSS after {:.0} s idle: {:.1} MiB (target < 15 MiB, workers not counted; {} child processes, \
         total {:.1} MiB); VmHWM {:.1} MiB; {}",
        window.as_secs_f64(),
        mib(memory.daemon_kib),
        memory.children,
        mib(memory.total_kib),
        mib(proc_status_kib(pid, "VmHWM").unwrap_or(0)),
        rss_breakdown(pid)
    );
    let hz = clock_ticks_per_second();
    let cpu = ticks_after.saturating_sub(ticks_before) as f64 / hz;
    println!(
        "idle: CPU used over {:.0} s: {:.2} s (utime+stime, {} ticks at {hz} Hz) = {:.3} % of one core (target ~0 %); \
         getUpdates calls in that time: {polls}; CPU since start: {:.2} s",
        window.as_secs_f64(),
        cpu,
        ticks_after.saturating_sub(ticks_before),
        cpu / window.as_secs_f64() * 100.0,
        ticks_after as f64 / hz
    );
    Ok(())
}

/// Stops the daemon, prints how it went, and adds the daemon's last log lines to a failure.
fn finish(part: &str, mut daemon: Daemon, outcome: anyhow::Result<()>) -> anyhow::Result<()> {
    let outcome = outcome.map_err(|error| error.context(format!("daemon stderr tail:\n{}", daemon.stderr_tail(40))));
    let stopped = daemon.stop();
    println!("{part}: {stopped}");
    outcome
}

fn telegram_config(fake: &FakeTelegram, poll_timeout_seconds: u64, extra: &str) -> String {
    format!(
        "[channels.telegram]\nbot_token = \"{}\"\napi_base_url = \"{}\"\nrequire_authorized = false\n\
         poll_timeout_seconds = {poll_timeout_seconds}\n{extra}",
        FakeTelegram::TOKEN,
        fake.base_url()
    )
}

// ---- Looking at the fake's calls ----

/// Runs `look` on the calls so far under the fake's lock, without copying them (the fake keeps every call, and
/// [`FakeTelegram::wait_for`] clones them all when it succeeds, which would weigh on the soak). `wait_for` runs its
/// predicate once before it first sleeps; the zero timeout drops it there.
async fn inspect<T>(fake: &FakeTelegram, look: impl Fn(&[Call]) -> T) -> T {
    let seen = RefCell::new(None);
    let probe = fake.wait_for(
        |calls| {
            *seen.borrow_mut() = Some(look(calls));
            false
        },
        Duration::from_secs(86_400),
    );
    let _ = tokio::time::timeout(Duration::ZERO, probe).await;
    seen.into_inner().expect("wait_for runs its predicate on the first poll")
}

async fn fake_len(fake: &FakeTelegram) -> usize {
    inspect(fake, <[Call]>::len).await
}

async fn fake_polls(fake: &FakeTelegram) -> usize {
    inspect(fake, |calls| calls.iter().filter(|c| is_poll(c)).count()).await
}

fn is_poll(call: &Call) -> bool {
    call.method.eq_ignore_ascii_case("getUpdates")
}

/// When each of the chats `first_chat..first_chat + chats` got its first successful `sendMessage` among the calls
/// from index `start` on.
async fn first_answers(fake: &FakeTelegram, start: usize, first_chat: i64, chats: i64) -> Vec<Option<Instant>> {
    inspect(fake, |calls| {
        let mut first = vec![None; chats as usize];
        for call in calls.get(start..).unwrap_or_default() {
            if !call.ok() || !call.method.eq_ignore_ascii_case("sendMessage") {
                continue;
            }
            let Some(index) = call.chat_id().map(|id| id - first_chat).filter(|i| (0..chats).contains(i)) else {
                continue;
            };
            first[index as usize].get_or_insert(call.at);
        }
        first
    })
    .await
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

// ---- The daemon process ----

/// A running `minibot --verbose --config <home>`, its stderr going to a file in the home folder.
struct Daemon {
    child: Child,
    stderr: PathBuf,
    spawned: Instant,
}

impl Daemon {
    fn start(home: &Home) -> Self {
        let stderr = home.path().join("daemon.stderr");
        let mut command = home.minibot(&["--verbose"]);
        command.stdout(Stdio::null()).stderr(std::fs::File::create(&stderr).unwrap());
        Self { child: command.spawn().unwrap(), stderr, spawned: Instant::now() }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Waits until the fake has answered a first `getUpdates`, which the channel sends once it is up.
    async fn wait_until_polling(&mut self, fake: &FakeTelegram) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if inspect(fake, |calls| calls.iter().any(is_poll)).await {
                // The fake records a call once it has answered it: an empty poll ends after its timeout.
                println!(
                    "daemon {}: first getUpdates answered {:.0} ms after spawn (an empty poll lasts poll_timeout_seconds)",
                    self.pid(),
                    self.spawned.elapsed().as_secs_f64() * 1e3
                );
                return Ok(());
            }
            if let Some(status) = self.exited() {
                anyhow::bail!("the daemon exited ({status}) before its first getUpdates");
            }
            if Instant::now() > deadline {
                anyhow::bail!("no getUpdates within 30 s of the daemon's start");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Waits until the daemon has `count` child processes (its local workers) or `within` passed: how many it has.
    async fn wait_for_children(&self, count: usize, within: Duration) -> usize {
        let deadline = Instant::now() + within;
        loop {
            let children = descendants(self.pid()).len();
            if children >= count || Instant::now() > deadline {
                return children;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn memory(&self) -> Memory {
        Memory::of(self.pid())
    }

    fn stderr_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// SIGTERM, then SIGKILL after 10 s; local workers still alive after the daemon are killed too. What happened.
    fn stop(&mut self) -> String {
        if let Some(status) = self.exited() {
            return format!("the daemon had already exited ({status})");
        }
        let workers = descendants(self.pid());
        let _ = Command::new("kill").arg("-TERM").arg(self.pid().to_string()).status();
        let signalled = Instant::now();
        let mut outcome = loop {
            if let Some(status) = self.exited() {
                break format!("daemon exited {:.2} s after SIGTERM ({status})", signalled.elapsed().as_secs_f64());
            }
            if signalled.elapsed() > Duration::from_secs(10) {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break "daemon still running 10 s after SIGTERM: SIGKILLed".to_string();
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while workers.iter().any(|pid| is_minibot(*pid)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let lingering: Vec<u32> = workers.into_iter().filter(|pid| is_minibot(*pid)).collect();
        for pid in &lingering {
            let _ = Command::new("kill").arg("-KILL").arg(pid.to_string()).status();
        }
        if !lingering.is_empty() {
            outcome.push_str(&format!("; SIGKILLed {} child processes that outlived it", lingering.len()));
        }
        outcome
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.exited().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

// ---- /proc ----

#[derive(Debug, Clone, Copy, Default)]
struct Memory {
    daemon_kib: u64,
    total_kib: u64,
    children: usize,
}

impl Memory {
    /// VmRSS of `pid`, and of `pid` plus every process below it.
    fn of(pid: u32) -> Self {
        let daemon_kib = proc_status_kib(pid, "VmRSS").unwrap_or(0);
        let below = descendants(pid);
        let others: u64 = below.iter().filter_map(|child| proc_status_kib(*child, "VmRSS")).sum();
        Self { daemon_kib, total_kib: daemon_kib + others, children: below.len() }
    }
}

/// The highest RSS seen by a thread sampling every 20 ms until [`Sampler::finish`].
struct Sampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Peaks>,
}

#[derive(Debug, Default)]
struct Peaks {
    daemon_kib: u64,
    total_kib: u64,
    children: usize,
    samples: usize,
}

impl Sampler {
    fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut peaks = Peaks::default();
            loop {
                let memory = Memory::of(pid);
                peaks.daemon_kib = peaks.daemon_kib.max(memory.daemon_kib);
                peaks.total_kib = peaks.total_kib.max(memory.total_kib);
                peaks.children = peaks.children.max(memory.children);
                peaks.samples += 1;
                if flag.load(Ordering::Relaxed) {
                    return peaks;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        Self { stop, thread }
    }

    fn finish(self) -> Peaks {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / KIB_PER_MIB
}

/// RssAnon / RssFile / RssShmem of `pid`, in MiB: whether growth is heap or mapped files.
fn rss_breakdown(pid: u32) -> String {
    let part = |field| mib(proc_status_kib(pid, field).unwrap_or(0));
    format!("anon {:.1}, file {:.1}, shmem {:.1} MiB", part("RssAnon"), part("RssFile"), part("RssShmem"))
}

/// The size of the files in `dir` and below, in KiB.
fn folder_kib(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(meta) if meta.is_dir() => folder_kib(&entry.path()),
            Ok(meta) => meta.len() / 1024,
            Err(_) => 0,
        })
        .sum()
}

/// Every process below `pid` (children, their children…), from one pass over /proc.
fn descendants(pid: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Ok(process) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
            if let Some(parent) = stat_fields(process).and_then(|f| f.get(1).and_then(|p| p.parse::<u32>().ok())) {
                children.entry(parent).or_default().push(process);
            }
        }
    }
    let mut found = Vec::new();
    let mut queue = vec![pid];
    while let Some(next) = queue.pop() {
        for child in children.get(&next).into_iter().flatten() {
            found.push(*child);
            queue.push(*child);
        }
    }
    found
}

/// The process is alive and runs a minibot binary (so a reused pid is never killed).
fn is_minibot(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains("minibot"))
        && stat_fields(pid).is_some_and(|f| f.first().is_some_and(|state| state != "Z"))
}
