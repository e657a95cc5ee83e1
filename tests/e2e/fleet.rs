//! Workers with different abilities on one queue (the SQLite backend: the orchestrator's local worker plus a
//! separately started `minibot-worker` on the same tasks file): a specialist that requires a label only runs
//! on a worker that offers it, the chat hears within seconds when no live worker can take its task, the task
//! tools say which worker ran it, and a worker holding another version of the specialist refuses the task.

use minibot_e2e::{Home, Reply, Script, ScriptedLlm, binary, kill_hard, requests_for};
use serde_json::json;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};

const RENDERER: &str =
    "---\nname: renderer\ndescription: Renders scenes on a GPU\nrequires:\n  - gpu\n---\nYou render.\n";
const CONFIG: &str = "[tasks]\nlocal_workers = 1\nprogress_interval_seconds = 0.01\nworker_timeout_seconds = 60\n\
                      [worker]\nheartbeat_seconds = 1\n";

fn home(llm: &ScriptedLlm) -> Home {
    let home = Home::new(&llm.base_url(), CONFIG);
    std::fs::create_dir_all(home.path().join("agents")).unwrap();
    std::fs::write(home.path().join("agents/renderer.md"), RENDERER).unwrap();
    home
}

/// A `minibot-worker` on the same config, with `[worker] labels` and the worker id set from the environment.
fn gpu_worker(home: &Home, id: &str, extra_env: &[(&str, String)]) -> std::process::Child {
    let mut command = std::process::Command::new(binary("minibot-worker"));
    command
        .arg("--config")
        .arg(home.config())
        .env("MINIBOT_WORKER_ID", id)
        .env("MINIBOT__WORKER__LABELS", r#"["gpu"]"#)
        .env_remove("OPENAI_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (key, value) in extra_env {
        command.env(key, value);
    }
    command.spawn().unwrap()
}

/// Runs `minibot console --once <message>`, calls `on_line` with every stderr line as it comes (it may start
/// things), and returns stdout and stderr once the run ends.
async fn console(home: &Home, message: &str, mut on_line: impl FnMut(&str)) -> (bool, String, String) {
    let mut command = tokio::process::Command::from(home.minibot(&["console", "--once", message]));
    command.stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    let mut child = command.spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reading = tokio::spawn(async move {
        let mut out = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut stdout, &mut out).await.unwrap();
        out
    });
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut err = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    while let Ok(Ok(Some(line))) = tokio::time::timeout_at(deadline, lines.next_line()).await {
        on_line(&line);
        err.push_str(&line);
        err.push('\n');
    }
    let status = tokio::time::timeout_at(deadline, child.wait()).await.expect("the run ends").unwrap();
    let out = reading.await.unwrap();
    (status.success(), out, err)
}

#[tokio::test]
async fn a_labelled_task_waits_for_a_worker_with_the_label_and_the_task_tools_name_it() {
    let llm = ScriptedLlm::start(vec![
        Script::new(
            "render the scene",
            vec![
                Reply::tool("spawn_task", json!({ "prompt": "render frame 7", "agent_name": "renderer" })),
                Reply::text("Rendering in the background."),
            ],
        ),
        Script::new("render frame 7", vec![Reply::text("frame 7 rendered")]),
        Script::new("who rendered it", vec![Reply::tool("list_tasks", json!({})), Reply::text("The GPU box did.")]),
    ])
    .await;
    let home = home(&llm);
    let mut gpu = None;
    let mut told_at = None;
    let started = Instant::now();
    let (ok, out, err) = console(&home, "render the scene", |line| {
        if line.contains("is waiting: no live worker offers the labels gpu") && gpu.is_none() {
            told_at = Some(started.elapsed());
            gpu = Some(gpu_worker(&home, "gpu-box-1", &[]));
        }
    })
    .await;
    let told_at = told_at.unwrap_or_else(|| panic!("the chat is told the task waits: {err}"));
    assert!(told_at < Duration::from_secs(10), "told within seconds, not {told_at:?}");
    assert!(ok, "{out}\n{err}");
    assert_eq!(out, "Rendering in the background.\nframe 7 rendered\n", "{err}");
    assert_eq!(requests_for(&llm, "render frame 7"), 1, "only the GPU worker ran it");

    let (_, out, _) = console(&home, "who rendered it", |_| {}).await;
    if let Some(mut gpu) = gpu {
        kill_hard(gpu.id());
        let _ = gpu.wait();
    }
    assert_eq!(out, "The GPU box did.\n");
    let listed = last_tool_result(&llm);
    let worker = &listed["tasks"][0]["worker"];
    assert_eq!(worker["worker_id"], "gpu-box-1", "{listed}");
    assert!(worker["host"].as_str().is_some_and(|h| !h.is_empty()), "{listed}");
    // The roster: the GPU worker, with what it offers.
    let roster = listed["workers"].as_array().cloned().unwrap_or_default();
    let gpu = roster.iter().find(|w| w["worker_id"] == "gpu-box-1").unwrap_or_else(|| panic!("{listed}"));
    assert_eq!((gpu["labels"].clone(), gpu["specialists"][0]["name"].clone()), (json!(["gpu"]), json!("renderer")));
}

/// The last tool result the model read.
fn last_tool_result(llm: &ScriptedLlm) -> serde_json::Value {
    let requests = llm.requests();
    let tool = requests
        .iter()
        .rev()
        .find_map(|r| r["messages"].as_array()?.iter().rev().find(|m| m["role"] == "tool").cloned())
        .expect("a tool result");
    serde_json::from_str(tool["content"].as_str().unwrap()).unwrap()
}

#[tokio::test]
async fn a_worker_with_another_version_of_the_specialist_refuses_the_task() {
    let llm = ScriptedLlm::start(vec![
        Script::new(
            "render again",
            vec![
                Reply::tool("spawn_task", json!({ "prompt": "render frame 8", "agent_name": "renderer" })),
                Reply::text("Started."),
            ],
        ),
        Script::new("render frame 8", vec![Reply::text("rendered with the old prompt")]),
    ])
    .await;
    let home = home(&llm);
    // This worker's agents folder holds an older renderer.
    let old = home.path().join("old-agents");
    std::fs::create_dir_all(&old).unwrap();
    std::fs::write(old.join("renderer.md"), RENDERER.replace("You render.", "You render slowly.")).unwrap();
    let mut worker = gpu_worker(&home, "gpu-old", &[("MINIBOT__ORCHESTRATION__DIRECTORY", old.display().to_string())]);
    let (ok, out, err) = console(&home, "render again", |_| {}).await;
    assert!(!ok, "a run whose task failed exits non-zero");
    kill_hard(worker.id());
    let _ = worker.wait();
    assert!(
        out.starts_with(
            "Started.\nThe background task failed: worker gpu-old refused the task: the task was sent for version"
        ),
        "{out}\n{err}"
    );
    assert!(out.contains("of specialist `renderer`"), "{out}");
    assert_eq!(requests_for(&llm, "render frame 8"), 0, "the stale prompt never reached the model");
}

#[tokio::test]
async fn a_task_no_worker_can_take_times_out_instead_of_waiting_forever() {
    let llm = ScriptedLlm::start(vec![Script::new(
        "render quickly",
        vec![
            Reply::tool(
                "spawn_task",
                json!({ "prompt": "render frame 9", "agent_name": "renderer", "timeout_seconds": 2 }),
            ),
            Reply::text("Queued."),
        ],
    )])
    .await;
    let home = home(&llm);
    let started = Instant::now();
    let (ok, out, err) = console(&home, "render quickly", |_| {}).await;
    assert!(!ok, "a timed-out task ends the run with an error");
    assert_eq!(out, "Queued.\nThe background task exceeded its time limit and was cancelled.\n", "{err}");
    assert!(err.contains("is waiting: no live worker offers the labels gpu"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(20), "timed out after its 2 s, not later");
    let url = format!("sqlite://{}", home.path().join("data/tasks.db").display());
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    let (status, error): (String, String) =
        sqlx::query_as("SELECT status, last_error FROM tasks").fetch_one(&pool).await.unwrap();
    let queued: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM queue_tasks").fetch_one(&pool).await.unwrap();
    pool.close().await;
    assert_eq!(status, "timed_out");
    assert!(
        error.starts_with("no worker could take the task within 2 s: no live worker offers the labels gpu"),
        "{error}"
    );
    assert_eq!(queued, 0, "and it is off the queue: a GPU worker joining later does not run it");
}

#[tokio::test]
async fn a_running_task_whose_only_capable_worker_dies_is_reported_and_times_out() {
    let llm = ScriptedLlm::start(vec![
        Script::new(
            "render and crash",
            vec![
                Reply::tool(
                    "spawn_task",
                    json!({ "prompt": "render frame 10", "agent_name": "renderer", "timeout_seconds": 3 }),
                ),
                Reply::text("Queued."),
            ],
        ),
        // Long enough for the worker to be killed while it waits for the model.
        Script::new("render frame 10", vec![Reply::text("too late")]).delay(Duration::from_secs(30)),
    ])
    .await;
    let home = home(&llm);
    let mut gpu = gpu_worker(&home, "gpu-doomed", &[]);
    let pid = gpu.id();
    // Once the task runs on the GPU worker (it asked the model), the worker dies without a word.
    let killer = async {
        let deadline = Instant::now() + Duration::from_secs(30);
        while requests_for(&llm, "render frame 10") == 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        kill_hard(pid);
    };
    let ((ok, out, err), ()) = tokio::join!(console(&home, "render and crash", |_| {}), killer);
    let _ = gpu.wait();
    assert_eq!(requests_for(&llm, "render frame 10"), 1, "it ran on the GPU worker before it died");
    assert!(!ok, "{out}\n{err}");
    assert!(err.contains("is waiting: no live worker offers the labels gpu"), "{err}");
    assert_eq!(out, "Queued.\nThe background task exceeded its time limit and was cancelled.\n", "{err}");
}

#[tokio::test]
async fn minibot_queue_workers_lists_the_live_workers() {
    let llm = ScriptedLlm::start(vec![]).await;
    let home = home(&llm);
    let none = minibot_e2e::run(home.minibot(&["queue", "workers"])).await;
    assert_eq!(none.status.code(), Some(1), "no worker: exit 1");
    assert!(minibot_e2e::stdout(&none).starts_with("no worker sent a heartbeat in 1.5 s"), "{none:?}");
    let mut gpu = gpu_worker(&home, "gpu-box-7", &[]);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let listed = minibot_e2e::run(home.minibot(&["queue", "workers"])).await;
    kill_hard(gpu.id());
    let _ = gpu.wait();
    let out = minibot_e2e::stdout(&listed);
    assert!(listed.status.success(), "{listed:?}");
    assert!(out.starts_with("gpu-box-7  host="), "{out}");
    assert!(out.contains("labels=[gpu] load=0/1 specialists=[renderer@"), "{out}");
}
