//! Background tasks with the SQLite queue: the real orchestrator starts real worker processes.

use minibot_e2e::{Home, Reply, Script, ScriptedLlm, children_of, requests_for, stderr, stdout};
use serde_json::json;
use std::process::Stdio;
use std::time::{Duration, Instant};

const TASKS: &str = "[tasks]\nlocal_workers = 2\nprogress_interval_seconds = 0.01\n";

async fn attempts(home: &Home) -> Vec<(String, i64)> {
    let url = format!("sqlite://{}", home.path().join("data/tasks.db").display());
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    let rows = sqlx::query_as::<_, (String, i64)>("SELECT status, attempts FROM tasks").fetch_all(&pool).await.unwrap();
    pool.close().await;
    rows
}

/// `(steps, tool_calls)` of every task, as the worker's terminal event reported them.
async fn usage(home: &Home) -> Vec<(Option<i64>, Option<i64>)> {
    let url = format!("sqlite://{}", home.path().join("data/tasks.db").display());
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    let rows = sqlx::query_as("SELECT steps, tool_calls FROM tasks").fetch_all(&pool).await.unwrap();
    pool.close().await;
    rows
}

#[tokio::test]
async fn spawn_task_result_reaches_the_chat_with_progress() {
    let llm = ScriptedLlm::start(vec![
        Script::new(
            "research the answer",
            vec![
                Reply::tool("spawn_task", json!({ "prompt": "find the answer to everything" })),
                Reply::text("I started a background task."),
            ],
        ),
        Script::new(
            "find the answer to everything",
            vec![Reply::tool("calculate_expression", json!({ "expression": "6*7" })), Reply::text("The answer is 42.")],
        ),
    ])
    .await;
    let home = Home::new(&llm.base_url(), TASKS);
    let output = minibot_e2e::run(home.minibot(&["console", "--once", "research the answer"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "I started a background task.\nThe answer is 42.\n");
    assert!(stderr(&output).contains("⋯ task"), "progress shown: {}", stderr(&output));
    // The databases close while the runtime still runs: no sqlx panic on the way out.
    assert!(!stderr(&output).contains("panicked"), "{}", stderr(&output));
    // The worker ran the generic agent with the task prompt, and its tool result went back to its model.
    assert_eq!(requests_for(&llm, "find the answer to everything"), 2);
    assert_eq!(attempts(&home).await, [("done".to_string(), 1)]);
    // Two provider calls and one tool call, as the worker counted them.
    assert_eq!(usage(&home).await, [(Some(2), Some(1))]);
}

#[tokio::test]
async fn a_task_that_finishes_before_the_turn_that_started_it_is_still_shown() {
    // The main agent's second step is slow, so the worker's result reaches the console before the answer that
    // hands the task off. The result must still be shown, after the answer, and the run must end.
    let llm = ScriptedLlm::start(vec![
        Script::new(
            "start something quick",
            vec![Reply::tool("spawn_task", json!({ "prompt": "quick job" })), Reply::text("Started it.")],
        )
        .delay(Duration::from_secs(3)),
        Script::new("quick job", vec![Reply::text("quick job done")]),
    ])
    .await;
    let home = Home::new(&llm.base_url(), &format!("{TASKS}worker_timeout_seconds = 20\n"));
    let output = minibot_e2e::run(home.minibot(&["console", "--once", "start something quick"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "Started it.\nquick job done\n");
    assert_eq!(attempts(&home).await, [("done".to_string(), 1)]);
}

#[tokio::test]
async fn delegate_result_comes_back_to_the_main_agent() {
    let llm = ScriptedLlm::start(vec![
        Script::new(
            "delegate the sum",
            vec![Reply::tool("delegate", json!({ "prompt": "compute 6*7 please" })), Reply::text("Working on it.")],
        ),
        Script::new("compute 6*7 please", vec![Reply::text("42")]),
        Script::containing("<task_output>\n42\n</task_output>", vec![Reply::text("The worker says 42.")]),
    ])
    .await;
    let home = Home::new(&llm.base_url(), TASKS);
    let output = minibot_e2e::run(home.minibot(&["console", "--once", "delegate the sum"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "Working on it.\nThe worker says 42.\n");
    let continuation = llm
        .requests()
        .into_iter()
        .find(|r| r.to_string().contains("<task_output>"))
        .expect("the result came back as a turn");
    assert!(continuation.to_string().contains("untrusted"), "the result is fenced as untrusted data");
}

/// Starts `console --once`, kills its workers each time the slow task reaches the model, returns the output.
async fn run_killing_workers(home: &Home, llm: &ScriptedLlm, kills: usize) -> std::process::Output {
    let mut command = home.minibot(&["console", "--once", "long job"]);
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = command.spawn().unwrap();
    let pid = child.id();
    let waiter = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap());
    for round in 1..=kills {
        let deadline = Instant::now() + Duration::from_secs(60);
        while requests_for(llm, "slow work") < round {
            assert!(Instant::now() < deadline, "the task reached the model {round} time(s)");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        let workers = children_of(pid);
        assert!(!workers.is_empty(), "the orchestrator runs local workers");
        // Freeze them all before killing any, and kill them with one command: the orchestrator releases a dead
        // worker's task at once, and a worker still running would claim it (one more attempt) only to be killed
        // the next moment, before that attempt reached the model.
        let pids: Vec<String> = workers.iter().map(u32::to_string).collect();
        for signal in ["-STOP", "-KILL"] {
            let _ = std::process::Command::new("kill").arg(signal).args(&pids).status();
        }
    }
    waiter.await.unwrap()
}

#[tokio::test]
async fn a_killed_worker_task_is_finished_by_another_worker() {
    let llm = ScriptedLlm::start(vec![
        Script::new(
            "long job",
            vec![Reply::tool("spawn_task", json!({ "prompt": "slow work" })), Reply::text("Started.")],
        ),
        Script::new("slow work", vec![Reply::text("slow result")]).delay(Duration::from_secs(2)),
    ])
    .await;
    let home = Home::new(&llm.base_url(), TASKS);
    let output = run_killing_workers(&home, &llm, 1).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "Started.\nslow result\n", "exactly one result");
    assert_eq!(attempts(&home).await, [("done".to_string(), 2)]);
}

#[tokio::test]
async fn a_task_whose_worker_always_dies_fails_after_max_attempts() {
    let llm = ScriptedLlm::start(vec![
        Script::new(
            "long job",
            vec![Reply::tool("spawn_task", json!({ "prompt": "slow work" })), Reply::text("Started.")],
        ),
        Script::new("slow work", vec![Reply::text("never seen")]).delay(Duration::from_secs(60)),
    ])
    .await;
    let home = Home::new(&llm.base_url(), &format!("{TASKS}[tasks.sqlite]\nmax_attempts = 2\n"));
    let output = run_killing_workers(&home, &llm, 2).await;
    assert_eq!(output.status.code(), Some(1), "stderr: {}", stderr(&output));
    let out = stdout(&output);
    assert!(out.starts_with("Started.\nThe background task failed"), "{out}");
    assert!(out.contains("2 times"), "{out}");
    assert_eq!(attempts(&home).await, [("failed".to_string(), 3)]);
}

#[tokio::test]
async fn bad_task_arguments_are_answered_to_the_model() {
    let llm = ScriptedLlm::start(vec![Script::new(
        "try bad tasks",
        vec![
            Reply::tools_raw(&[
                ("spawn_task", r#"{"prompt":"x","agent_name":"nobody"}"#),
                ("delegate", r#"{"prompt":"x","timeout_seconds":999999}"#),
            ]),
            Reply::text("Those did not work."),
        ],
    )])
    .await;
    let home = Home::new(&llm.base_url(), TASKS);
    let output = minibot_e2e::run(home.minibot(&["console", "--once", "try bad tasks"])).await;
    assert_eq!(stdout(&output), "Those did not work.\n", "stderr: {}", stderr(&output));
    let last = llm.requests().pop().unwrap().to_string();
    assert!(last.contains("task:unknown_agent") && last.contains("nobody"), "{last}");
    assert!(last.contains("above the worker limit"), "{last}");
    assert!(attempts(&home).await.is_empty(), "nothing was queued");
}

#[tokio::test]
async fn a_broken_agent_file_stops_start_up_with_its_name() {
    let home = Home::new("http://127.0.0.1:9/v1", "");
    std::fs::create_dir_all(home.path().join("agents")).unwrap();
    std::fs::write(home.path().join("agents/helper.md"), "---\nname: helper\ncolour: blue\n---\nYou help.\n").unwrap();
    let output = minibot_e2e::run(home.minibot(&["console", "--once", "hi"])).await;
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(err.contains("agents/helper.md") && err.contains("colour"), "{err}");
}

mod in_process {
    //! The orchestrator in-process with real worker processes, to reach the task service directly.

    use minibot_e2e::{Reply, Script, ScriptedLlm, binary};
    use minibot_orchestrator::boot;
    use minibot_orchestrator::tasks::{WorkerCommand, WorkerStart};
    use minibot_tools::tasks::{Delivery, TaskRequest, TaskService, TaskStatus};
    use std::time::{Duration, Instant};

    #[actix::test]
    async fn cancelling_a_running_task_stops_its_worker_and_reports_nothing() {
        let llm = ScriptedLlm::start(vec![
            Script::new("slow work", vec![Reply::text("too late")]).delay(Duration::from_secs(30)),
        ])
        .await;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(
            &path,
            format!("[llm]\nbase_url = \"{}\"\napi_key = \"k\"\n[tasks]\nlocal_workers = 1\n", llm.base_url()),
        )
        .unwrap();
        let config = minibot_config::Config::load(Some(&path)).unwrap();
        let worker = WorkerCommand {
            program: binary("minibot"),
            args: vec!["worker".into(), "--config".into(), path.display().to_string()],
        };
        let rt = boot::start(config, Some(worker), WorkerStart::AtOnce).await.unwrap().runtime;
        let hub = rt.tasks.clone().unwrap();
        let ctx = minibot_agent::ToolContext {
            session_id: "test:1".into(),
            channel: "test".into(),
            chat_id: Some(1),
            owner_id: "primary".into(),
            ..Default::default()
        };
        let request = TaskRequest::new(Delivery::Spawn, "slow work");
        let queued = hub.submit(request, &ctx).await.unwrap();
        let task_id = queued["task_id"].as_str().unwrap().to_string();
        let deadline = Instant::now() + Duration::from_secs(30);
        while llm.requests().is_empty() {
            assert!(Instant::now() < deadline, "the worker started the task");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let cancelled = hub.cancel(&task_id, &ctx).await.unwrap();
        assert_eq!(cancelled["cancelled"], true);
        // The worker drops its run at the next control poll and settles: the queue empties long before the
        // model would have answered.
        let queue = hub.sqlite.clone().unwrap();
        let started = Instant::now();
        while queue.depth().await.unwrap() > 0 {
            assert!(started.elapsed() < Duration::from_secs(5), "the worker stopped the cancelled task");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let record = hub.store.get(&task_id).await.unwrap().unwrap();
        assert_eq!(record.status, TaskStatus::Cancelled);
        assert!(record.result_text.is_none(), "no result");
        let answer = hub.get(&task_id, false, &ctx).await.unwrap();
        assert_eq!(answer["task"]["usage"], serde_json::Value::Null, "the orchestrator ended it; no worker counts");
        let again = hub.cancel(&task_id, &ctx).await.unwrap();
        assert_eq!(again["cancelled"], false);
    }
}
