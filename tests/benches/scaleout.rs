#![allow(clippy::expect_used, clippy::unwrap_used)]
//! Prints numbers; asserts nothing. The multi-host scale-out with hosts as network namespaces
//! (tests/netns/hosts.sh): a private RabbitMQ on the broker host, the orchestrator in-process on the orch host,
//! one `minibot-worker` per worker host. Measured in one run, each next to its target:
//! - the broker's raw rate: persistent messages of a task's size through a quorum queue (publish with
//!   pipelined confirms, consume, ack), from the orch host;
//! - throughput of no-op tasks (the model answers at once) and of 200 ms tasks, with 1, 2 and 4 worker hosts;
//! - dispatch latency across namespaces, submit (record + publish) → the worker's first model request;
//! - worker RSS idle and under load, what one task costs in broker messages, and
//!   the CPU time per no-op task of the orchestrator's process (with the scripted model), the broker and the
//!   workers: on a small machine the no-op rate is the CPU budget divided by that sum.
//!
//! Needs root (ip netns). Run: `cargo build --release -p minibot -p minibot-worker -p minibot-sandbox &&
//! cargo bench -p minibot-e2e --bench scaleout`.

#[allow(dead_code, reason = "shared with the scale-out tests, which use other parts of it")]
#[path = "../netns/mod.rs"]
mod netns;

use actix::System;
use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicGetOptions, BasicPublishOptions, BasicQosOptions, BasicRejectOptions,
    ConfirmSelectOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Connection, ConnectionProperties};
use minibot_e2e::{Reply, Script};
use netns::driver::{Driver, QUEUE};
use netns::lab::{Lab, cpu_ticks, rss_kib};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const RAW_MESSAGES: usize = 5_000;
const RAW_PIPELINE: usize = 512;
const NOOP_TASKS: usize = 300;
const SLOW_TASKS: usize = 40;
const SLOW_DELAY: Duration = Duration::from_millis(200);
const LATENCY_SAMPLES: usize = 60;
/// Tasks submitted at once; each submit writes its record and waits for its publish confirm.
const SUBMITTING: usize = 32;
const HOSTS: [usize; 3] = [1, 2, 4];
const WORKER_HOSTS: [&str; 4] = ["w1", "w2", "w3", "w4"];

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// The size of a task message as the orchestrator queues it: one is submitted while no worker consumes, read
/// with `basic.get` and put back (it runs later, with the first workers).
async fn task_message_size(driver: &Driver, url: &str) -> usize {
    driver.submit("noop size").await;
    let connection = Connection::connect(url, ConnectionProperties::default()).await.unwrap();
    let channel = connection.create_channel().await.unwrap();
    let message = channel.basic_get(QUEUE.into(), BasicGetOptions::default()).await.unwrap().expect("a queued task");
    let size = message.delivery.data.len();
    message.delivery.acker.reject(BasicRejectOptions { requeue: true }).await.unwrap();
    let _ = connection.close(200, "done".into()).await;
    size
}

/// The ceiling: a quorum queue, persistent messages, confirms pipelined, prefetch 64, manual acks.
/// Publishes `RAW_MESSAGES` persistent copies of `body` to `queue`, `RAW_PIPELINE` confirms at a time.
async fn publish_pipelined(publisher: &lapin::Channel, queue: &str, body: &[u8]) {
    for chunk in 0..RAW_MESSAGES.div_ceil(RAW_PIPELINE) {
        let mut confirms = Vec::new();
        for _ in (chunk * RAW_PIPELINE)..((chunk + 1) * RAW_PIPELINE).min(RAW_MESSAGES) {
            let properties = BasicProperties::default().with_delivery_mode(2);
            let options = BasicPublishOptions::default();
            confirms.push(publisher.basic_publish("".into(), queue.into(), options, body, properties).await.unwrap());
        }
        for confirm in confirms {
            assert!(confirm.await.unwrap().is_ack());
        }
    }
}

/// Takes and acknowledges `RAW_MESSAGES` deliveries.
async fn drain(mut consumer: lapin::Consumer) {
    for _ in 0..RAW_MESSAGES {
        let delivery = consumer.next().await.unwrap().unwrap();
        delivery.ack(BasicAckOptions::default()).await.unwrap();
    }
}

async fn raw_rate(url: &str, size: usize) -> f64 {
    let connection = Connection::connect(url, ConnectionProperties::default()).await.unwrap();
    let queue = "bench-raw";
    let publisher = connection.create_channel().await.unwrap();
    let mut args = FieldTable::default();
    args.insert("x-queue-type".into(), AMQPValue::LongString("quorum".into()));
    publisher.queue_declare(queue.into(), QueueDeclareOptions::durable(), args).await.unwrap();
    publisher.confirm_select(ConfirmSelectOptions::default()).await.unwrap();
    let consuming = connection.create_channel().await.unwrap();
    consuming.basic_qos(64, BasicQosOptions::default()).await.unwrap();
    let consumer = consuming
        .basic_consume(queue.into(), "".into(), BasicConsumeOptions::default(), FieldTable::default())
        .await
        .unwrap();
    let body = vec![b'x'; size];
    let started = Instant::now();
    let consume = actix::spawn(drain(consumer));
    publish_pipelined(&publisher, queue, &body).await;
    consume.await.unwrap();
    let rate = RAW_MESSAGES as f64 / started.elapsed().as_secs_f64();
    publisher.queue_delete(queue.into(), QueueDeleteOptions::default()).await.unwrap();
    let _ = connection.close(200, "done".into()).await;
    rate
}

/// The broker's raw rate for the least exchange a task needs: a request and its reply, both persistent and
/// confirmed on quorum queues, the request acknowledged once its reply is confirmed (as a worker does), pipelined.
async fn raw_round_trips(url: &str, size: usize) -> f64 {
    let connection = Connection::connect(url, ConnectionProperties::default()).await.unwrap();
    let (requests, replies) = ("bench-raw-requests", "bench-raw-replies");
    let publisher = connection.create_channel().await.unwrap();
    for queue in [requests, replies] {
        let mut args = FieldTable::default();
        args.insert("x-queue-type".into(), AMQPValue::LongString("quorum".into()));
        publisher.queue_declare(queue.into(), QueueDeclareOptions::durable(), args).await.unwrap();
    }
    publisher.confirm_select(ConfirmSelectOptions::default()).await.unwrap();
    let responder = connection.create_channel().await.unwrap();
    responder.confirm_select(ConfirmSelectOptions::default()).await.unwrap();
    responder.basic_qos(64, BasicQosOptions::default()).await.unwrap();
    let mut incoming = responder
        .basic_consume(requests.into(), "".into(), BasicConsumeOptions::default(), FieldTable::default())
        .await
        .unwrap();
    let collector = connection.create_channel().await.unwrap();
    collector.basic_qos(64, BasicQosOptions::default()).await.unwrap();
    let answers = collector
        .basic_consume(replies.into(), "".into(), BasicConsumeOptions::default(), FieldTable::default())
        .await
        .unwrap();
    let body = vec![b'x'; size];
    let reply_body = vec![b'y'; 256];
    let started = Instant::now();
    let respond = actix::spawn(async move {
        let mut acks = Vec::with_capacity(RAW_MESSAGES);
        for _ in 0..RAW_MESSAGES {
            let delivery = incoming.next().await.unwrap().unwrap();
            let properties = BasicProperties::default().with_delivery_mode(2);
            let confirm = responder
                .basic_publish("".into(), replies.into(), BasicPublishOptions::default(), &reply_body, properties)
                .await
                .unwrap();
            acks.push(actix::spawn(async move {
                assert!(confirm.await.unwrap().is_ack());
                delivery.ack(BasicAckOptions::default()).await.unwrap();
            }));
        }
        for ack in acks {
            ack.await.unwrap();
        }
    });
    let collect = actix::spawn(drain(answers));
    publish_pipelined(&publisher, requests, &body).await;
    respond.await.unwrap();
    collect.await.unwrap();
    let rate = RAW_MESSAGES as f64 / started.elapsed().as_secs_f64();
    for queue in [requests, replies] {
        publisher.queue_delete(queue.into(), QueueDeleteOptions::default()).await.unwrap();
    }
    let _ = connection.close(200, "done".into()).await;
    rate
}

/// Runs `count` tasks (`<prefix> <n>`), submitted `SUBMITTING` at a time; tasks per second from the first
/// submit to the last result in the chat.
async fn throughput(driver: &mut Driver, prefix: &str, count: usize) -> f64 {
    let prompts: Vec<String> = (0..count).map(|n| format!("{prefix} {n}")).collect();
    let started = Instant::now();
    let ids: Vec<String> = futures_util::stream::iter(&prompts)
        .map(|prompt| driver.submit(prompt))
        .buffer_unordered(SUBMITTING)
        .collect()
        .await;
    driver.wait_results(&ids, Duration::from_secs(300)).await;
    let last = ids.iter().filter_map(|id| driver.arrival(id)).max().unwrap();
    count as f64 / last.duration_since(started).as_secs_f64()
}

/// Samples the workers' RSS every 50 ms on a thread of its own until told to stop; the highest seen.
struct RssSampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl RssSampler {
    fn start(pids: Vec<u32>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut peak = 0;
            while !flag.load(Ordering::Relaxed) {
                peak = pids.iter().map(|&pid| rss_kib(pid)).fold(peak, u64::max);
                std::thread::sleep(Duration::from_millis(50));
            }
            peak
        });
        Self { stop, thread }
    }

    fn peak_kib(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

fn worker_pids(lab: &Lab, hosts: usize) -> Vec<u32> {
    WORKER_HOSTS[..hosts].iter().filter_map(|h| lab.worker(h).and_then(|(pid, _)| pid)).collect()
}

/// CPU ticks (10 ms) used so far by this process (orchestrator, scripted model, forwarder), by everything in
/// the broker's namespace, and by the workers.
fn cpu(lab: &Lab, workers: &[u32]) -> [u64; 3] {
    [
        cpu_ticks(std::process::id()),
        lab.pids("broker").into_iter().map(cpu_ticks).sum(),
        workers.iter().copied().map(cpu_ticks).sum(),
    ]
}

/// Restarts the workers on the first `hosts` hosts with `config`; returns once they all consume.
async fn workers(lab: &Lab, driver: &Driver, config: &std::path::Path, hosts: usize) {
    lab.stop_workers();
    for host in &WORKER_HOSTS[..hosts] {
        lab.start_worker(host, config);
    }
    driver.wait_consumers(hosts as u32, Duration::from_secs(30)).await;
    // Settled: connections open, consumers registered, nothing in flight.
    tokio::time::sleep(Duration::from_secs(2)).await;
}

fn max_rss_kib(pids: Vec<u32>) -> u64 {
    pids.into_iter().map(rss_kib).max().unwrap_or(0)
}

async fn run(lab: &Lab) {
    let scripts = vec![
        Script::containing("noop ", vec![Reply::text("ok")]),
        Script::containing("slow ", vec![Reply::text("ok")]).delay(SLOW_DELAY),
        Script::containing("ping ", vec![Reply::text("ok")]),
    ];
    let mut driver = Driver::start(lab, scripts, 3, "").await;
    let size = task_message_size(&driver, &lab.broker_url()).await;
    let raw = raw_rate(&lab.broker_url(), size).await;
    println!(
        "broker raw rate, orch → broker namespace: {raw:.0} msg/s ({RAW_MESSAGES} persistent {size}-byte messages, \
         quorum queue, confirms pipelined {RAW_PIPELINE}, prefetch 64, manual acks)"
    );
    let raw_pairs = raw_round_trips(&lab.broker_url(), size).await;
    println!(
        "broker raw rate of request/reply pairs (a task's least exchange: request and reply persistent and \
         confirmed, request acked after its reply's confirm): {raw_pairs:.0} pairs/s"
    );
    let mut noop = Vec::new();
    let mut slow = Vec::new();
    let (mut idle_kib, mut loaded_kib) = (0, 0);
    let mut cpu_per_task = Vec::new();
    for (round, hosts) in HOSTS.into_iter().enumerate() {
        workers(lab, &driver, &driver.worker_config(), hosts).await;
        let pids = worker_pids(lab, hosts);
        if hosts == 4 {
            idle_kib = max_rss_kib(pids.clone());
        }
        let before = cpu(lab, &pids);
        let rate = throughput(&mut driver, &format!("noop r{round}"), NOOP_TASKS).await;
        let after = cpu(lab, &pids);
        // Milliseconds of CPU per task: 10 ms ticks.
        let used: Vec<f64> = (0..3).map(|i| (after[i] - before[i]) as f64 * 10.0 / NOOP_TASKS as f64).collect();
        println!(
            "no-op tasks, {hosts} worker host(s): {rate:.1} tasks/s ({NOOP_TASKS} tasks); CPU per task: orchestrator \
             process {:.2} ms, broker {:.2} ms, workers {:.2} ms",
            used[0], used[1], used[2]
        );
        cpu_per_task.push(used);
        noop.push(rate);
        let sampler = RssSampler::start(worker_pids(lab, hosts));
        let rate = throughput(&mut driver, &format!("slow r{round}"), SLOW_TASKS).await;
        let peak = sampler.peak_kib();
        println!(
            "200 ms tasks, {hosts} worker host(s): {rate:.2} tasks/s ({SLOW_TASKS} tasks; ideal {:.1})",
            hosts as f64 / SLOW_DELAY.as_secs_f64()
        );
        slow.push(rate);
        loaded_kib = loaded_kib.max(peak);
    }

    // One task at a time on idle workers (4 hosts).
    let mut from_submit = Vec::with_capacity(LATENCY_SAMPLES);
    let mut from_confirm = Vec::with_capacity(LATENCY_SAMPLES);
    for n in 0..LATENCY_SAMPLES {
        let before = driver.llm.requests().len();
        let submitted = Instant::now();
        let id = driver.submit(&format!("ping {n}")).await;
        let confirmed = Instant::now();
        driver.wait_results(std::slice::from_ref(&id), Duration::from_secs(30)).await;
        let arrived = driver.llm.arrivals()[before];
        from_submit.push(arrived.saturating_duration_since(submitted));
        from_confirm.push(arrived.saturating_duration_since(confirmed));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    from_submit.sort();
    from_confirm.sort();

    // What one no-op task costs on the broker: its envelope plus the events its worker published ("queued" is
    // the orchestrator's own record).
    let sample = driver.submit("noop cost").await;
    driver.wait_results(std::slice::from_ref(&sample), Duration::from_secs(30)).await;
    let events: Vec<String> = driver.events(&sample).await.into_iter().filter(|kind| kind != "queued").collect();

    println!();
    println!("summary (targets in brackets)");
    println!("  broker raw rate: {raw:.0} msg/s; {raw_pairs:.0} request/reply pairs/s");
    let best = noop.iter().copied().fold(0.0, f64::max);
    println!(
        "  no-op tasks/s, 1/2/4 hosts: {:.1} / {:.1} / {:.1}; best = {:.1} % of the raw message rate [≥ 50 %], \
         {:.1} % of the raw request/reply rate",
        noop[0],
        noop[1],
        noop[2],
        100.0 * best / raw,
        100.0 * best / raw_pairs
    );
    println!(
        "  200 ms tasks/s, 1/2/4 hosts: {:.2} / {:.2} / {:.2}; 1→2 ×{:.2} [≥ 1.7], 1→4 ×{:.2} [≥ 3]",
        slow[0],
        slow[1],
        slow[2],
        slow[1] / slow[0],
        slow[2] / slow[0]
    );
    println!(
        "  dispatch latency, submit → worker's first model request, {LATENCY_SAMPLES} tasks: p50 {:.2} ms, p99 {:.2} ms \
         (from the publish confirm: p50 {:.2} ms, p99 {:.2} ms)",
        ms(percentile(&from_submit, 0.5)),
        ms(percentile(&from_submit, 0.99)),
        ms(percentile(&from_confirm, 0.5)),
        ms(percentile(&from_confirm, 0.99))
    );
    println!("  worker RSS: idle {:.1} MiB [< 15 MiB], under load {:.1} MiB", mib(idle_kib), mib(loaded_kib));
    let cpu4 = &cpu_per_task[2];
    let total: f64 = cpu4.iter().sum();
    println!(
        "  CPU per no-op task, 4 hosts: orchestrator process {:.2} ms + broker {:.2} ms + workers {:.2} ms = \
         {total:.2} ms; {} cores → at most {:.0} tasks/s",
        cpu4[0],
        cpu4[1],
        cpu4[2],
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        std::thread::available_parallelism().map_or(1, |n| n.get()) as f64 * 1000.0 / total
    );
    println!(
        "  broker messages per no-op task: 1 task + {} worker events ({}), each published with a confirm and \
         acknowledged by its consumer",
        events.len(),
        events.join(", ")
    );
    println!("  binary: {}", minibot_e2e::binary("minibot-worker").display());
    lab.stop_workers();
    driver.close().await;
}

fn main() {
    let lab = Lab::up(4);
    lab.in_orch(|| System::new().block_on(run(&lab)));
}
