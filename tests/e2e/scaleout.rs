//! The multi-host scale-out, with hosts as network namespaces (tests/netns/hosts.sh): a private RabbitMQ on
//! the broker host, the real orchestrator in-process on the orch host, `minibot-worker` processes on worker
//! hosts, restarted whenever they exit. They need root for `ip netns` and fail (never skip) without it. Each
//! test has its own hosts and broker; they run one at a time, so their timeouts do not fight over the CPU.

#[allow(dead_code, reason = "shared with the scale-out benchmark, which uses other parts of it")]
#[path = "../netns/mod.rs"]
mod netns;

use actix::System;
use minibot_e2e::{Reply, Script, requests_for};
use netns::driver::{Driver, QUEUE};
use netns::lab::Lab;
use serde_json::json;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Waits until `done` holds, checking every 50 ms; panics with `what` after `within`.
async fn until<F: AsyncFnMut() -> bool>(what: &str, within: Duration, mut done: F) {
    let deadline = Instant::now() + within;
    while !done().await {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn cutting_a_worker_hosts_link_mid_task_runs_every_task_once_and_the_worker_comes_back() {
    const SLOW: usize = 4;
    let _serial = serial();
    let lab = Lab::up(2);
    lab.in_orch(|| {
        System::new().block_on(async {
            let mut scripts: Vec<Script> = (0..SLOW)
                .map(|i| {
                    Script::new(&format!("slow {i}"), vec![Reply::text(&format!("slow {i} done"))])
                        .delay(Duration::from_millis(1500))
                })
                .collect();
            // Longer than the quarter second after which a worker reports its start, so each attempt names its
            // worker in the task's events.
            scripts
                .push(Script::containing("after ", vec![Reply::text("after done")]).delay(Duration::from_millis(800)));
            let mut driver = Driver::start(&lab, scripts, 3, "").await;
            lab.start_worker("w1", &driver.worker_config());
            lab.start_worker("w2", &driver.worker_config());
            driver.wait_consumers(2, Duration::from_secs(30)).await;

            let mut ids = Vec::new();
            for i in 0..SLOW {
                ids.push(driver.submit(&format!("slow {i}")).await);
            }
            // The task w1 is running, once the model has its request: the link goes down in the middle of it.
            let mut cut = None;
            until("w1 runs a task", Duration::from_secs(30), async || {
                for (i, id) in ids.iter().enumerate() {
                    let on_w1 = driver.attempts(id).await.iter().any(|(_, worker)| worker == "w1-1");
                    if on_w1 && requests_for(&driver.llm, &format!("slow {i}")) == 1 {
                        cut = Some(i);
                        return true;
                    }
                }
                false
            })
            .await;
            let cut = cut.unwrap();
            lab.cut("w1");
            // Only missed heartbeats tell the broker: then the task goes back to the queue and w2 runs it.
            until("the cut worker's task runs again on w2", Duration::from_secs(40), async || {
                driver.attempts(&ids[cut]).await.iter().any(|(_, worker)| worker == "w2-1")
            })
            .await;
            lab.restore("w1");
            driver.wait_results(&ids, Duration::from_secs(60)).await;

            // The same w1 process (never restarted) reconnects and takes tasks again.
            let mut after = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(40);
            loop {
                let pair = [
                    driver.submit(&format!("after {}", after.len())).await,
                    driver.submit(&format!("after {}", after.len() + 1)).await,
                ];
                driver.wait_results(&pair, Duration::from_secs(30)).await;
                after.extend(pair);
                let mut on_w1 = false;
                for id in &after {
                    on_w1 |= driver.attempts(id).await.iter().any(|(_, worker)| worker == "w1-1");
                }
                if on_w1 {
                    break;
                }
                assert!(Instant::now() < deadline, "w1 took no task in the 40 s after its link came back");
            }
            driver.linger(Duration::from_millis(1500)).await;

            for (i, id) in ids.iter().enumerate() {
                let results = driver.results(id);
                assert_eq!(results.len(), 1, "task slow {i} has exactly one result in the chat: {results:?}");
                assert_eq!(results[0].text, format!("slow {i} done"));
                assert!(!results[0].is_error);
                assert_eq!(driver.endings(id).await, 1, "slow {i} was ended once in the task store");
                let expected = if i == cut { 2 } else { 1 };
                assert_eq!(requests_for(&driver.llm, &format!("slow {i}")), expected, "model requests of slow {i}");
            }
            assert_eq!(
                driver.attempts(&ids[cut]).await,
                [(1, "w1-1".to_string()), (2, "w2-1".to_string())],
                "the cut task ran on w1, then again on w2"
            );
            for (n, id) in after.iter().enumerate() {
                assert_eq!(driver.results(id).len(), 1, "task after {n} has exactly one result");
                assert_eq!(requests_for(&driver.llm, &format!("after {n}")), 1);
            }
            assert_eq!(lab.worker("w1").map(|(_, starts)| starts), Some(1), "w1 reconnected; it was not restarted");
            driver.close().await;
        })
    });
}

#[test]
fn a_broker_restart_with_200_tasks_in_flight_loses_none_and_answers_none_twice() {
    const TASKS: usize = 200;
    let _serial = serial();
    let lab = Lab::up(4);
    lab.in_orch(|| {
        System::new().block_on(async {
            let scripts = (0..TASKS)
                .map(|i| {
                    Script::new(&format!("job {i}"), vec![Reply::text(&format!("answer {i}"))])
                        .delay(Duration::from_millis(100))
                })
                .collect();
            let mut driver = Driver::start(&lab, scripts, 3, "").await;
            for host in ["w1", "w2", "w3", "w4"] {
                lab.start_worker(host, &driver.worker_config());
            }
            driver.wait_consumers(4, Duration::from_secs(30)).await;
            let mut ids = Vec::with_capacity(TASKS);
            for i in 0..TASKS {
                ids.push(driver.submit(&format!("job {i}")).await);
            }
            // A fifth of them answered: the rest are queued or running when the broker goes away.
            driver.wait_results(&ids[..TASKS / 5], Duration::from_secs(60)).await;
            driver.linger(Duration::ZERO).await;
            let done_before = ids.iter().filter(|id| !driver.results(id).is_empty()).count();
            assert!(done_before < TASKS, "tasks still in flight when the broker restarts");
            lab.restart_broker();
            driver.wait_results(&ids, Duration::from_secs(90)).await;
            driver.linger(Duration::from_secs(2)).await;

            for (i, id) in ids.iter().enumerate() {
                let results = driver.results(id);
                assert_eq!(results.len(), 1, "job {i} has exactly one result in the chat: {results:?}");
                assert_eq!(results[0].text, format!("answer {i}"), "job {i}");
                assert_eq!(driver.endings(id).await, 1, "job {i} was ended once in the task store");
                assert!(requests_for(&driver.llm, &format!("job {i}")) >= 1);
            }
            let runs = driver.llm.requests().len();
            println!("{TASKS} tasks, {done_before} answered before the broker restart, {runs} model requests");
            let (ready, _) = driver.queue_counts(QUEUE).await;
            assert_eq!(ready, 0, "nothing left in the task queue");
            let (dead, _) = driver.queue_counts(&format!("{QUEUE}.dead")).await;
            assert_eq!(dead, 0, "nothing dead-lettered");
            driver.close().await;
        })
    });
}

#[test]
fn a_task_that_kills_its_worker_every_time_fails_after_its_attempts_into_the_dead_letter_queue() {
    const MAX_ATTEMPTS: u32 = 2;
    let _serial = serial();
    let lab = Lab::up(2);
    lab.in_orch(|| {
        System::new().block_on(async {
            let scripts = vec![
                // `bash -c` is the worker's own child (sandbox_mode none, no wrapper): $PPID is the worker.
                Script::new(
                    "poison",
                    vec![Reply::tool("bash", json!({ "command": "kill -9 $PPID" })), Reply::text("survived")],
                ),
                Script::new("healthy", vec![Reply::text("healthy done")]),
            ];
            let bash = "[tools.bash]\nenabled = true\nsandbox_mode = \"none\"\n";
            let mut driver = Driver::start(&lab, scripts, MAX_ATTEMPTS, bash).await;
            lab.start_worker("w1", &driver.worker_config());
            lab.start_worker("w2", &driver.worker_config());
            driver.wait_consumers(2, Duration::from_secs(30)).await;

            let id = driver.submit("poison").await;
            driver.wait_results(std::slice::from_ref(&id), Duration::from_secs(60)).await;
            let results = driver.results(&id);
            assert_eq!(results.len(), 1, "one failure report in the chat: {results:?}");
            assert!(results[0].is_error, "reported as a failure: {:?}", results[0]);
            assert!(
                results[0].text.contains(&format!("started {MAX_ATTEMPTS} times")),
                "the report says why: {}",
                results[0].text
            );
            assert_eq!(driver.endings(&id).await, 1, "the task was ended once in the task store");
            assert_eq!(requests_for(&driver.llm, "poison"), MAX_ATTEMPTS as usize, "one model request per attempt");
            // The supervisor restarts a killed worker on its next round, which may come after the report.
            let starts = || -> u32 { ["w1", "w2"].iter().filter_map(|h| lab.worker(h)).map(|(_, n)| n).sum() };
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while starts() < 2 + MAX_ATTEMPTS && std::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            assert_eq!(starts(), 2 + MAX_ATTEMPTS, "each attempt killed its worker, which was started again");

            // The restarted workers still run tasks.
            driver.wait_consumers(2, Duration::from_secs(30)).await;
            let healthy = driver.submit("healthy").await;
            driver.wait_results(std::slice::from_ref(&healthy), Duration::from_secs(30)).await;
            assert_eq!(driver.results(&healthy)[0].text, "healthy done");
            driver.linger(Duration::from_millis(500)).await;
            assert_eq!(driver.results(&id).len(), 1, "still one failure report");

            // The over-limit delivery is rejected into the dead-letter queue, not acknowledged away.
            let dead_queue = format!("{QUEUE}.dead");
            let mut dead = 0;
            let deadline = Instant::now() + Duration::from_secs(5);
            while dead == 0 && Instant::now() < deadline {
                dead = driver.queue_counts(&dead_queue).await.0;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            assert_eq!(dead, 1, "the poison task's message is in {dead_queue}");
            driver.close().await;
        })
    });
}
