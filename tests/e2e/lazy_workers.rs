//! Local workers start with the first task and stop when idle: an idle console or daemon is one process, a task
//! still runs, the workers exit after `[tasks] local_worker_idle_seconds` without an error in the log, and the
//! next task starts them again. Real binaries, the SQLite queue.

use minibot_e2e::{Home, Reply, Script, ScriptedLlm, Terminal, children_of, kill_hard, requests_for};
use minibot_test_support::FakeTelegram;
use minibot_test_support::fake_telegram::sent_texts;
use serde_json::json;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

const IDLE_SECONDS: u64 = 2;

fn tasks_section() -> String {
    format!("[tasks]\nlocal_workers = 2\nlocal_worker_idle_seconds = {IDLE_SECONDS}\n")
}

/// Two turns, each starting one background task.
async fn two_jobs() -> ScriptedLlm {
    ScriptedLlm::start(vec![
        Script::new(
            "start a job",
            vec![Reply::tool("spawn_task", json!({ "prompt": "first job" })), Reply::text("Started.")],
        ),
        Script::new("first job", vec![Reply::text("first result")]),
        Script::new(
            "start another",
            vec![Reply::tool("spawn_task", json!({ "prompt": "second job" })), Reply::text("Again.")],
        ),
        Script::new("second job", vec![Reply::text("second result")]),
    ])
    .await
}

/// Every process's command line, by pid.
fn command_lines() -> Vec<(u32, String)> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_string_lossy().parse::<u32>().ok()?;
            let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            Some((pid, String::from_utf8_lossy(&raw).replace('\0', " ")))
        })
        .collect()
}

/// Every process below `pid`, at any depth.
fn descendants(pid: u32) -> Vec<u32> {
    let mut below = Vec::new();
    let mut frontier = vec![pid];
    while let Some(parent) = frontier.pop() {
        let children = children_of(parent);
        frontier.extend(&children);
        below.extend(children);
    }
    below
}

/// The processes below `pid` whose command line is `… worker …`. At any depth: under `script` a shell may sit
/// between the terminal and `minibot` (dash does not exec a `-c` command), so workers can be grandchildren.
fn workers_of(pid: u32) -> Vec<u32> {
    let lines = command_lines();
    descendants(pid)
        .into_iter()
        .filter(|child| lines.iter().any(|(p, line)| p == child && line.contains(" worker")))
        .collect()
}

/// The root of the console's process tree (the `script` process the terminal started), once `minibot console`
/// runs below it, so "no worker yet" is not read from a tree that has not started.
async fn console_pid(terminal: &Terminal, home: &Home) -> u32 {
    let config = home.config().display().to_string();
    let root = terminal.pid();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let lines = command_lines();
        let below = descendants(root);
        if lines.iter().any(|(p, line)| below.contains(p) && line.contains(" console ") && line.contains(&config)) {
            return root;
        }
        assert!(Instant::now() < deadline, "no minibot console process for {config}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until `pid` runs no worker.
async fn until_no_worker(pid: u32, within: Duration) {
    let start = Instant::now();
    while !workers_of(pid).is_empty() {
        assert!(start.elapsed() < within, "the workers were still running after {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Watches the workers of `pid` in the background from now on: when they were first seen and when they were
/// last seen. A one-off look after the answer shows can miss workers that already stopped on a loaded machine.
struct WorkerWatch {
    seen: std::sync::Arc<std::sync::Mutex<Option<(Instant, Instant)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl WorkerWatch {
    fn start(pid: u32) -> Self {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(None::<(Instant, Instant)>));
        let shared = seen.clone();
        let task = tokio::spawn(async move {
            loop {
                if !workers_of(pid).is_empty() {
                    let now = Instant::now();
                    let mut seen = shared.lock().unwrap();
                    *seen = Some(seen.map_or((now, now), |(first, _)| (first, now)));
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        Self { seen, task }
    }

    /// Waits until no worker runs, then how long workers were seen running (first to last sighting).
    async fn lifetime(self, pid: u32, within: Duration) -> Duration {
        until_no_worker(pid, within).await;
        self.task.abort();
        let seen = *self.seen.lock().unwrap();
        let (first, last) = seen.expect("the task started the local workers");
        last - first
    }
}

/// Checks the log of a run whose workers stopped when idle: they stopped, and nothing went wrong on the way.
fn assert_quiet_stops(home: &Home) {
    let log = std::fs::read_to_string(home.path().join("logs/minibot.log")).unwrap();
    assert!(log.contains("local worker stopped"), "{log}");
    for bad in ["level=error", "level=warn", "exited unexpectedly", "restarting"] {
        let lines: Vec<&str> = log.lines().filter(|line| line.contains(bad)).collect();
        assert!(lines.is_empty(), "the log has `{bad}`:\n{}", lines.join("\n"));
    }
}

#[tokio::test]
async fn an_idle_console_runs_no_worker_and_a_task_starts_them_again_after_they_stopped() {
    let llm = two_jobs().await;
    let home = Home::new(&llm.base_url(), &tasks_section());
    let mut terminal = Terminal::start(&home);
    terminal.wait_for("you> ").await;
    let pid = console_pid(&terminal, &home).await;
    // Longer than a worker takes to start: one started at boot would show by now.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(workers_of(pid), Vec::<u32>::new(), "an idle console starts no worker");

    let watch = WorkerWatch::start(pid);
    terminal.type_line("start a job");
    terminal.wait_for("first result").await;
    assert_eq!(requests_for(&llm, "first job"), 1);
    // They stop after the idle period (not at once: a task coming right after finds them running). The task
    // itself takes milliseconds, so most of their life is the idle wait.
    let lifetime = watch.lifetime(pid, Duration::from_secs(IDLE_SECONDS + 10)).await;
    assert!(lifetime >= Duration::from_millis(IDLE_SECONDS * 1000 / 2), "workers ran for {lifetime:?}");

    terminal.type_line("start another");
    terminal.wait_for("second result").await;
    assert_eq!(requests_for(&llm, "second job"), 1);
    until_no_worker(pid, Duration::from_secs(IDLE_SECONDS + 10)).await;
    terminal.exit().await;
    assert_quiet_stops(&home);
}

/// A running daemon; killed when dropped.
struct Daemon(std::process::Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn until_sent(fake: &FakeTelegram, text: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !sent_texts(&fake.calls(), 1).iter().any(|sent| sent.contains(text)) {
        assert!(Instant::now() < deadline, "the chat never got {text:?}: {:?}", sent_texts(&fake.calls(), 1));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn an_idle_daemon_runs_no_worker_and_a_task_starts_them_again_after_they_stopped() {
    let llm = two_jobs().await;
    let fake = FakeTelegram::start().await;
    let telegram = format!(
        "[channels.telegram]\nbot_token = \"{}\"\napi_base_url = \"{}\"\npoll_timeout_seconds = 1\nrequire_authorized = false\n",
        FakeTelegram::TOKEN,
        fake.base_url()
    );
    let home = Home::new(&llm.base_url(), &format!("{telegram}{}", tasks_section()));
    let mut command = home.minibot(&[]);
    command.stdout(Stdio::null()).stderr(Stdio::null());
    let daemon = Daemon(command.spawn().unwrap());
    let pid = daemon.0.id();
    // Serving: the daemon polls for updates. Then longer than a worker takes to start.
    let deadline = Instant::now() + Duration::from_secs(30);
    while fake.calls_of("getUpdates").is_empty() {
        assert!(Instant::now() < deadline, "the daemon never polled Telegram");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(workers_of(pid), Vec::<u32>::new(), "an idle daemon starts no worker");

    let watch = WorkerWatch::start(pid);
    fake.push_text(1, 1, "start a job");
    until_sent(&fake, "first result").await;
    watch.lifetime(pid, Duration::from_secs(IDLE_SECONDS + 10)).await;

    fake.push_text(1, 1, "start another");
    until_sent(&fake, "second result").await;
    assert_eq!((requests_for(&llm, "first job"), requests_for(&llm, "second job")), (1, 1));
    until_no_worker(pid, Duration::from_secs(IDLE_SECONDS + 10)).await;
    drop(daemon);
    assert_quiet_stops(&home);
}

async fn task_statuses(home: &Path) -> Vec<String> {
    let url = format!("sqlite://{}", home.join("data/tasks.db").display());
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    let rows = sqlx::query_scalar("SELECT status FROM tasks").fetch_all(&pool).await.unwrap();
    pool.close().await;
    rows
}

#[tokio::test]
async fn a_task_left_queued_by_an_earlier_run_starts_the_workers_at_boot() {
    let llm = two_jobs().await;
    // The first run has no local workers: its task stays queued, and the run is killed as a crash would.
    let home = Home::new(&llm.base_url(), "[tasks]\nlocal_workers = 0\n");
    let mut command = home.minibot(&["console", "--once", "start a job"]);
    command.stdout(Stdio::null()).stderr(Stdio::null());
    let mut first = command.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while requests_for(&llm, "start a job") < 2 {
        assert!(Instant::now() < deadline, "the first run never queued its task");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    kill_hard(first.id());
    first.wait().unwrap();
    assert_eq!(task_statuses(home.path()).await, ["pending"]);

    std::fs::write(
        home.config(),
        std::fs::read_to_string(home.config()).unwrap().replace("[tasks]\nlocal_workers = 0\n", &tasks_section()),
    )
    .unwrap();
    let terminal = Terminal::start(&home);
    terminal.wait_for("you> ").await;
    // Nobody types: the queued task alone starts the workers, and one of them runs it.
    let deadline = Instant::now() + Duration::from_secs(30);
    while task_statuses(home.path()).await != ["done"] {
        assert!(Instant::now() < deadline, "the queued task never ran: {:?}", task_statuses(home.path()).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(requests_for(&llm, "first job"), 1);
    let pid = console_pid(&terminal, &home).await;
    until_no_worker(pid, Duration::from_secs(IDLE_SECONDS + 10)).await;
    terminal.exit().await;
}

/// New-user report (#22): an assistant that quit or died while a local worker ran a task left the task claimed
/// by a worker that died with it, so the next start waited out the lease (half an hour). The claim is released
/// at the next start and the task runs again at once.
#[tokio::test]
async fn a_task_whose_assistant_died_mid_run_runs_again_at_the_next_start() {
    let llm = ScriptedLlm::start(vec![
        Script::new(
            "start a job",
            vec![Reply::tool("spawn_task", json!({ "prompt": "slow job" })), Reply::text("Started.")],
        ),
        Script::new("slow job", vec![Reply::text("slow result")]).delay(Duration::from_secs(3)),
    ])
    .await;
    let home = Home::new(&llm.base_url(), &tasks_section());
    let mut command = home.minibot(&["console", "--once", "start a job"]);
    command.stdout(Stdio::null()).stderr(Stdio::null());
    let mut first = command.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while requests_for(&llm, "slow job") < 1 {
        assert!(Instant::now() < deadline, "the worker never started the task");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    kill_hard(first.id());
    first.wait().unwrap();
    let url = format!("sqlite://{}", home.path().join("data/tasks.db").display());
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    let claims: Vec<String> = sqlx::query_scalar("SELECT status FROM queue_tasks").fetch_all(&pool).await.unwrap();
    pool.close().await;
    assert_eq!(claims, ["leased"], "the dead assistant's worker held the task");

    let terminal = Terminal::start(&home);
    terminal.wait_for("you> ").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while task_statuses(home.path()).await != ["done"] {
        assert!(
            Instant::now() < deadline,
            "the task never ran again: {:?}\n{}",
            task_statuses(home.path()).await,
            std::fs::read_to_string(home.path().join("logs/minibot.log")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    terminal.exit().await;
}

mod in_process {
    //! The orchestrator in-process with real worker processes, to submit tasks at chosen moments.

    use minibot_e2e::{Reply, Script, ScriptedLlm, binary};
    use minibot_orchestrator::boot;
    use minibot_orchestrator::tasks::{WorkerCommand, WorkerStart};
    use minibot_tools::tasks::{Delivery, TaskRequest, TaskService, TaskStatus};
    use std::time::{Duration, Instant};

    /// Pauses between a task's end and the next task, around the worker's idle period of 1 s: some tasks find
    /// the worker idle, some find it exiting or gone.
    const GAPS_MS: [u64; 9] = [600, 900, 960, 990, 1000, 1010, 1040, 1100, 1400];

    #[actix::test]
    async fn tasks_submitted_around_a_worker_s_idle_exit_all_run_without_waiting_longer_than_a_start() {
        let texts: Vec<String> = (0..GAPS_MS.len()).map(|i| format!("job {i}")).collect();
        let llm = ScriptedLlm::start(texts.iter().map(|t| Script::new(t, vec![Reply::text("ok")])).collect()).await;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        let tasks = "[tasks]\nlocal_workers = 1\nlocal_worker_idle_seconds = 1\n";
        std::fs::write(&path, format!("[llm]\nbase_url = \"{}\"\napi_key = \"k\"\n{tasks}", llm.base_url())).unwrap();
        let config = minibot_config::Config::load(Some(&path)).unwrap();
        let args = vec!["worker".into(), "--config".into(), path.display().to_string()];
        let worker = WorkerCommand { program: binary("minibot"), args };
        let booted = boot::start(config, Some(worker), WorkerStart::OnDemand).await.unwrap();
        let hub = booted.runtime.tasks.clone().unwrap();
        let ctx = minibot_agent::ToolContext {
            session_id: "test:1".into(),
            channel: "test".into(),
            chat_id: Some(1),
            owner_id: "primary".into(),
            ..Default::default()
        };
        let mut workers = Vec::new();
        for (text, gap) in texts.iter().zip(GAPS_MS) {
            let before = llm.requests().len();
            let queued = hub.submit(TaskRequest::new(Delivery::Spawn, text.clone()), &ctx).await.unwrap();
            assert!(queued.get("waiting_for_worker").is_none(), "a starting worker is no missing worker: {queued}");
            let submitted = Instant::now();
            while llm.requests().len() == before {
                // A start takes well under a second; a task left waiting for the next submission would never run.
                assert!(submitted.elapsed() < Duration::from_secs(5), "{text} waited for a worker for 5 s");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let task_id = queued["task_id"].as_str().unwrap();
            let record = loop {
                let record = hub.store.get(task_id).await.unwrap().unwrap();
                if record.is_terminal() {
                    break record;
                }
                assert!(submitted.elapsed() < Duration::from_secs(20), "{text} never ended");
                tokio::time::sleep(Duration::from_millis(5)).await;
            };
            assert_eq!(record.status, TaskStatus::Done, "{text}");
            workers.push(record.worker_id.unwrap());
            tokio::time::sleep(Duration::from_millis(gap)).await;
        }
        workers.dedup();
        // The short pauses found the worker still there, the long ones a new one.
        assert!(workers.len() > 1 && workers.len() < GAPS_MS.len(), "workers by task: {workers:?}");
        booted.runtime.close().await;
    }
}
