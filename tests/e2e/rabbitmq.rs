//! Background tasks over a real RabbitMQ broker: the orchestrator publishes, separately started
//! `minibot-worker` processes consume. Each test uses its own queue and exchange names and removes them.

use minibot_e2e::{Home, Reply, Script, ScriptedLlm, binary, kill_hard, requests_for, stderr, stdout};
use minibot_queue::amqp::{AmqpQueue, AmqpSettings};
use serde_json::json;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The key the tests' orchestrator and workers share.
pub(crate) const MESSAGE_KEY: &str = "test-message-key-0123456789abcdef0123456789";

pub(crate) fn broker_url() -> String {
    std::env::var("MINIBOT_TEST_AMQP_URL").unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into())
}

pub(crate) struct Broker {
    pub(crate) settings: AmqpSettings,
    pub(crate) config: String,
}

impl Broker {
    pub(crate) async fn new() -> Self {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let settings = AmqpSettings {
            broker_url: broker_url(),
            queue_name: format!("minibot-e2e-{id}"),
            exchange_name: format!("minibot-e2e-{id}.tasks"),
            prefetch_count: 1,
            ..AmqpSettings::new("", minibot_protocol::MessageKey::new(MESSAGE_KEY).unwrap())
        };
        let probe = AmqpQueue::connect(&settings, "e2e-probe").await.unwrap_or_else(|e| {
            panic!(
                "RabbitMQ is not reachable at {} ({e}); start it with `rabbitmq-server -detached && rabbitmqctl \
                 await_startup` or set MINIBOT_TEST_AMQP_URL",
                settings.broker_url
            )
        });
        probe.close().await;
        let config = format!(
            "[tasks]\nbackend = \"rabbitmq\"\nprogress_interval_seconds = 0.01\n[rabbitmq]\nbroker_url = \"{}\"\n\
             queue_name = \"{}\"\nexchange_name = \"{}\"\nmessage_key = \"{MESSAGE_KEY}\"\n",
            settings.broker_url, settings.queue_name, settings.exchange_name
        );
        Self { settings, config }
    }

    pub(crate) async fn remove(self) {
        if let Ok(queue) = AmqpQueue::connect(&self.settings, "e2e-cleanup").await {
            let _ = queue.delete_topology().await;
            queue.close().await;
        }
    }
}

struct Workers(Vec<Child>);

impl Workers {
    fn start(home: &Home, count: usize) -> Self {
        Self(
            (0..count)
                .map(|n| {
                    Command::new(binary("minibot-worker"))
                        .arg("--config")
                        .arg(home.config())
                        .env("MINIBOT_WORKER_ID", format!("e2e-worker-{n}"))
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .spawn()
                        .unwrap()
                })
                .collect(),
        )
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[tokio::test]
async fn spawn_and_delegate_over_rabbitmq() {
    let broker = Broker::new().await;
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
        )
        .delay(Duration::from_millis(400)),
        Script::new(
            "delegate the sum",
            vec![Reply::tool("delegate", json!({ "prompt": "compute 6*7 please" })), Reply::text("Working on it.")],
        ),
        Script::new("compute 6*7 please", vec![Reply::text("42")]),
        Script::containing("<task_output>\n42\n</task_output>", vec![Reply::text("The worker says 42.")]),
    ])
    .await;
    let home = Home::new(&llm.base_url(), &broker.config);
    let _workers = Workers::start(&home, 2);

    let output = minibot_e2e::run(home.minibot(&["console", "--once", "research the answer"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "I started a background task.\nThe answer is 42.\n");
    assert!(stderr(&output).contains("⋯ task"), "progress shown: {}", stderr(&output));

    let output = minibot_e2e::run(home.minibot(&["console", "--once", "delegate the sum"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "Working on it.\nThe worker says 42.\n");
    broker.remove().await;
}

#[tokio::test]
async fn a_worker_killed_mid_task_hands_it_to_another_over_rabbitmq() {
    let broker = Broker::new().await;
    let llm = ScriptedLlm::start(vec![
        Script::new(
            "long job",
            vec![Reply::tool("spawn_task", json!({ "prompt": "slow work" })), Reply::text("Started.")],
        ),
        Script::new("slow work", vec![Reply::text("slow result")]).delay(Duration::from_secs(2)),
    ])
    .await;
    let home = Home::new(&llm.base_url(), &broker.config);
    // One worker takes the task; a second one starts only after that, so the redelivery can only go to it.
    let mut first = Workers::start(&home, 1);
    let mut command = home.minibot(&["console", "--once", "long job"]);
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = command.spawn().unwrap();
    let waiter = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap());
    let deadline = Instant::now() + Duration::from_secs(60);
    while requests_for(&llm, "slow work") < 1 {
        assert!(Instant::now() < deadline, "a worker took the task");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let _second = Workers::start(&home, 1);
    kill_hard(first.0[0].id());
    let _ = first.0[0].wait();
    let output = tokio::time::timeout(Duration::from_secs(90), waiter).await.expect("finished").unwrap();
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "Started.\nslow result\n", "exactly one result");
    assert_eq!(requests_for(&llm, "slow work"), 2, "the second worker ran it again");
    let url = format!("sqlite://{}", home.path().join("data/tasks.db").display());
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    let rows: Vec<(String, i64)> = sqlx::query_as("SELECT status, attempts FROM tasks").fetch_all(&pool).await.unwrap();
    pool.close().await;
    assert_eq!(rows, [("done".to_string(), 2)]);
    broker.remove().await;
}
