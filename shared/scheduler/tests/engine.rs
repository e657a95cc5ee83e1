#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The engine against a real SQLite file, driven by a manual clock.

use chrono::{DateTime, TimeZone, Utc};
use futures_util::future::BoxFuture;
use minibot_scheduler::{
    Clock, Deliver, Engine, Fire, JobStatus, ListQuery, ManualClock, NewJob, Recurrence, SchedulerStore, StoreSettings,
    Target, Wake,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// A delivered fire: its prompt, its slot, and the lateness the prompt was told of.
type Delivered = (String, DateTime<Utc>, Option<Duration>);

#[derive(Default)]
struct Recorder {
    fires: Mutex<Vec<Delivered>>,
    fail: Mutex<u32>,
    gave_up: Mutex<Vec<String>>,
}

impl Deliver for Recorder {
    fn deliver<'a>(&'a self, fire: &'a Fire, late_by: Option<Duration>) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let mut fail = self.fail.lock().unwrap();
            if *fail > 0 {
                *fail -= 1;
                return Err("the chat store is gone".into());
            }
            self.fires.lock().unwrap().push((fire.content.clone(), fire.due_at, late_by));
            Ok(())
        })
    }

    fn gave_up<'a>(&'a self, fire: &'a Fire, _error: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move { self.gave_up.lock().unwrap().push(fire.content.clone()) })
    }
}

fn target() -> Target {
    Target { owner_id: "primary".into(), channel: "telegram".into(), chat_id: 42, user_id: Some(7) }
}

fn at(h: u32, m: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 4, h, m, s).unwrap()
}

async fn store(path: &std::path::Path) -> SchedulerStore {
    SchedulerStore::open(path, 2, StoreSettings { batch_size: 10, lease: Duration::from_secs(120) }).await.unwrap()
}

fn job(content: &str, run_at: DateTime<Utc>, recurrence: Recurrence) -> NewJob {
    NewJob {
        target: target(),
        role: "user".into(),
        content: content.into(),
        run_at,
        metadata: serde_json::json!({}),
        recurrence,
        end_at: None,
        time_zone: None,
        max_attempts: 3,
    }
}

fn engine(store: SchedulerStore, clock: Arc<ManualClock>, recorder: Arc<Recorder>, claimant: &str) -> Engine {
    Engine {
        store,
        clock,
        deliver: recorder,
        channels: vec!["telegram".into()],
        claimant: claimant.into(),
        is_gone: Arc::new(|_| false),
        wake: Wake::default(),
        poll: Duration::from_secs(60),
    }
}

async fn until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_cron_job_fires_on_the_minute_when_the_clock_gets_there() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir.path().join("s.db")).await;
    let clock = ManualClock::new(at(9, 0, 30));
    let cron = Recurrence::cron("* * * * *", None).unwrap();
    let first = cron.first_at_or_after(clock.now()).unwrap().unwrap();
    assert_eq!(first, at(9, 1, 0));
    store.create(job("stretch", first, cron), clock.now()).await.unwrap();
    let recorder = Arc::new(Recorder::default());
    let (stop_tx, stop) = watch::channel(false);
    let running = tokio::spawn(engine(store.clone(), clock.clone(), recorder.clone(), "a").run(stop));

    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(recorder.fires.lock().unwrap().is_empty(), "nothing before 09:01");
    clock.set(at(9, 0, 59));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(recorder.fires.lock().unwrap().is_empty(), "nothing at 09:00:59");
    clock.set(at(9, 1, 0));
    until("the 09:01 fire", || recorder.fires.lock().unwrap().len() == 1).await;
    clock.set(at(9, 2, 0));
    until("the 09:02 fire", || recorder.fires.lock().unwrap().len() == 2).await;
    let fires = recorder.fires.lock().unwrap().clone();
    assert_eq!(fires.iter().map(|f| f.1).collect::<Vec<_>>(), [at(9, 1, 0), at(9, 2, 0)]);
    assert!(fires.iter().all(|f| f.2.is_none()), "on time: no lateness note");
    stop_tx.send(true).unwrap();
    running.await.unwrap();
}

#[tokio::test]
async fn a_job_missed_while_down_fires_once_and_says_how_late() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir.path().join("s.db")).await;
    let clock = ManualClock::new(at(6, 0, 0));
    store.create(job("hourly", at(7, 0, 0), Recurrence::Interval { seconds: 3600 }), clock.now()).await.unwrap();
    store.create(job("daily", at(8, 0, 0), Recurrence::cron("0 8 * * *", None).unwrap()), clock.now()).await.unwrap();
    store.create(job("once", at(8, 30, 0), Recurrence::None), clock.now()).await.unwrap();
    // The process was down from 06:00 to 12:10.
    clock.set(at(12, 10, 0));
    let recorder = Arc::new(Recorder::default());
    let next = engine(store.clone(), clock.clone(), recorder.clone(), "a").step().await.unwrap();
    let fires = recorder.fires.lock().unwrap().clone();
    assert_eq!(fires.len(), 3, "one fire each, not one per missed slot: {fires:?}");
    let late: Vec<_> = fires.iter().map(|f| (f.0.as_str(), f.2.map(|d| d.as_secs()))).collect();
    assert!(late.contains(&("hourly", Some(5 * 3600 + 600))), "{late:?}");
    assert!(late.contains(&("daily", Some(4 * 3600 + 600))), "{late:?}");
    assert!(late.contains(&("once", Some(3 * 3600 + 2400))), "{late:?}");
    assert_eq!(next, Some(at(13, 0, 0)), "the hourly job's next slot after now");
    let (jobs, _) =
        store.list(&ListQuery { target: &target(), active_only: false, limit: 10, offset: 0 }).await.unwrap();
    let status = |c: &str| jobs.iter().find(|j| j.content == c).map(|j| (j.status, j.run_at)).unwrap();
    assert_eq!(status("once").0, JobStatus::Completed);
    assert_eq!(status("hourly"), (JobStatus::Pending, at(13, 0, 0)));
    assert_eq!(status("daily"), (JobStatus::Pending, Utc.with_ymd_and_hms(2026, 12, 5, 8, 0, 0).unwrap()));
}

#[tokio::test]
async fn two_engines_on_one_file_fire_each_job_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let (a, b) = (store(&path).await, store(&path).await);
    let clock = ManualClock::new(at(9, 0, 0));
    for i in 0..200 {
        a.create(
            job(&format!("job {i}"), at(9, 0, 0) + chrono::Duration::milliseconds(i * 5), Recurrence::None),
            clock.now(),
        )
        .await
        .unwrap();
    }
    clock.set(at(9, 1, 0));
    let recorder = Arc::new(Recorder::default());
    let (ea, eb) = (engine(a, clock.clone(), recorder.clone(), "a"), engine(b, clock.clone(), recorder.clone(), "b"));
    let (ra, rb) = tokio::join!(ea.step(), eb.step());
    ra.unwrap();
    rb.unwrap();
    let mut fired: Vec<String> = recorder.fires.lock().unwrap().iter().map(|f| f.0.clone()).collect();
    fired.sort();
    let before = fired.len();
    fired.dedup();
    assert_eq!((before, fired.len()), (200, 200), "every job once");
}

#[tokio::test]
async fn a_failed_delivery_is_retried_then_the_chat_is_told() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir.path().join("s.db")).await;
    let clock = ManualClock::new(at(9, 0, 0));
    store.create(job("water the plants", at(9, 0, 0), Recurrence::None), clock.now()).await.unwrap();
    let recorder = Arc::new(Recorder::default());
    *recorder.fail.lock().unwrap() = 1;
    let engine = engine(store.clone(), clock.clone(), recorder.clone(), "a");
    let retry = engine.step().await.unwrap().expect("a retry time");
    let wait = (retry - clock.now()).num_seconds();
    assert!((30..=40).contains(&wait), "first retry after 30-40 s, got {wait}");
    let (jobs, _) =
        store.list(&ListQuery { target: &target(), active_only: true, limit: 10, offset: 0 }).await.unwrap();
    assert_eq!((jobs[0].status, jobs[0].retry_count), (JobStatus::Leased, 1));
    clock.set(retry);
    engine.step().await.unwrap();
    assert_eq!(recorder.fires.lock().unwrap().len(), 1, "delivered on the retry");
    let job = store.get(&target(), &jobs[0].id).await.unwrap().unwrap();
    assert_eq!(job.status, JobStatus::Completed);

    // A job whose every delivery fails ends `failed`, and its chat hears of it.
    store.create(job_max("doomed", clock.now(), 2), clock.now()).await.unwrap();
    *recorder.fail.lock().unwrap() = 10;
    let retry = engine.step().await.unwrap().unwrap();
    clock.set(retry);
    engine.step().await.unwrap();
    assert_eq!(recorder.gave_up.lock().unwrap().clone(), ["doomed"]);
    let (jobs, _) =
        store.list(&ListQuery { target: &target(), active_only: false, limit: 10, offset: 0 }).await.unwrap();
    let doomed = jobs.iter().find(|j| j.content == "doomed").unwrap();
    assert_eq!(doomed.status, JobStatus::Failed);
    assert_eq!(doomed.last_error.as_deref(), Some("the chat store is gone"));
}

fn job_max(content: &str, run_at: DateTime<Utc>, max_attempts: u32) -> NewJob {
    NewJob { max_attempts, ..job(content, run_at, Recurrence::None) }
}

#[tokio::test]
async fn a_bad_row_fails_alone_and_the_others_fire() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let store = store(&path).await;
    let clock = ManualClock::new(at(9, 0, 0));
    store.create(job("good", at(9, 0, 0), Recurrence::None), clock.now()).await.unwrap();
    let bad = store.create(job("bad", at(8, 59, 0), Recurrence::None), clock.now()).await.unwrap();
    // A row edited by hand (or by an older version) with a cron expression that does not parse.
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display())).await.unwrap();
    sqlx::query(
        "UPDATE scheduled_prompts SET recurrence = 'cron', recurrence_cron_expression = 'every day' WHERE id = ?1",
    )
    .bind(&bad.id)
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    let recorder = Arc::new(Recorder::default());
    engine(store.clone(), clock.clone(), recorder.clone(), "a").step().await.unwrap();
    assert_eq!(recorder.fires.lock().unwrap().iter().map(|f| f.0.clone()).collect::<Vec<_>>(), ["good"]);
    let bad = store.get(&target(), &bad.id).await.unwrap().unwrap();
    assert_eq!(bad.status, JobStatus::Failed);
    assert!(bad.last_error.unwrap().contains("every day"));
}

#[tokio::test]
async fn a_fire_left_by_a_dead_process_is_delivered_by_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir.path().join("s.db")).await;
    let clock = ManualClock::new(at(9, 0, 0));
    store.create(job("left behind", at(9, 0, 0), Recurrence::None), clock.now()).await.unwrap();
    // Process "dead" fired it and died before delivering.
    let fires = store.fire_due(clock.now(), &["telegram".into()], "dead").await.unwrap();
    assert_eq!(fires.len(), 1);
    let recorder = Arc::new(Recorder::default());
    let mut next = engine(store.clone(), clock.clone(), recorder.clone(), "alive");
    next.is_gone = Arc::new(|claimant| claimant == "dead");
    next.step().await.unwrap();
    assert_eq!(recorder.fires.lock().unwrap().len(), 1, "taken over at once, not after the lease");
    // A live claimant's fire is left to it until its lease runs out.
    store.create(job("in flight", at(9, 0, 0), Recurrence::None), clock.now()).await.unwrap();
    store.fire_due(clock.now(), &["telegram".into()], "busy").await.unwrap();
    next.step().await.unwrap();
    assert_eq!(recorder.fires.lock().unwrap().len(), 1);
    clock.set(at(9, 2, 1));
    next.step().await.unwrap();
    assert_eq!(recorder.fires.lock().unwrap().len(), 2, "after the 120 s lease");
}

/// A fire this process claimed but could not finish (its store failed after the hand-over) is taken up again by
/// the same process once its lease runs out.
#[tokio::test]
async fn an_own_fire_left_half_done_is_picked_up_again_after_its_lease() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir.path().join("s.db")).await;
    let clock = ManualClock::new(at(9, 0, 0));
    store.create(job("again", at(9, 0, 0), Recurrence::None), clock.now()).await.unwrap();
    assert_eq!(store.fire_due(clock.now(), &["telegram".into()], "me").await.unwrap().len(), 1);
    let recorder = Arc::new(Recorder::default());
    let me = engine(store.clone(), clock.clone(), recorder.clone(), "me");
    me.step().await.unwrap();
    assert!(recorder.fires.lock().unwrap().is_empty(), "still within its lease");
    clock.set(at(9, 2, 1));
    me.step().await.unwrap();
    assert_eq!(recorder.fires.lock().unwrap().len(), 1);
}

/// Rows written by hand or by other programs: an id that is not text, a time that is not a time, an interval no
/// date can hold. Each fails on its own with a reason; the good job fires; the loop goes back to sleep.
#[tokio::test]
async fn garbage_rows_fail_alone_and_never_keep_the_loop_awake() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let store = store(&path).await;
    let clock = ManualClock::new(at(9, 0, 0));
    store.create(job("good", at(9, 0, 0), Recurrence::None), clock.now()).await.unwrap();
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display())).await.unwrap();
    let insert = "INSERT INTO scheduled_prompts (id, owner_id, channel, chat_id, user_id, content, status, run_at,
                      recurrence, recurrence_interval_seconds, created_at, updated_at)
                  VALUES (?1, 'primary', 'telegram', 42, 7, ?2, 'pending', ?3, ?4, ?5, '2026-01-01', '2026-01-01')";
    for i in 0..12 {
        sqlx::query(insert)
            .bind(vec![0xffu8, i])
            .bind("blob id")
            .bind("2020-01-01 00:00:00.000000")
            .bind("none")
            .bind(None::<i64>)
            .execute(&pool)
            .await
            .unwrap();
    }
    for (id, content, run_at, kind, interval) in [
        ("t1", "tomorrow", "tomorrow", "none", None),
        ("t2", "huge interval", "2020-01-01 00:00:00.000000", "interval", Some(10_000_000_000_000_000i64)),
    ] {
        sqlx::query(insert).bind(id).bind(content).bind(run_at).bind(kind).bind(interval).execute(&pool).await.unwrap();
    }
    sqlx::query(
        "INSERT INTO scheduled_fires (job_id, due_at, fired_at, lease_until) SELECT id, 'bad', 'bad',
             '2020-01-01 00:00:00.000000' FROM scheduled_prompts WHERE content = 'good'",
    )
    .execute(&pool)
    .await
    .unwrap();
    let recorder = Arc::new(Recorder::default());
    let engine = engine(store.clone(), clock.clone(), recorder.clone(), "a");
    let mut next = None;
    for _ in 0..3 {
        next = engine.step().await.unwrap();
    }
    assert_eq!(recorder.fires.lock().unwrap().iter().map(|f| f.0.clone()).collect::<Vec<_>>(), ["good"]);
    assert_eq!(next, None, "nothing left to wake for: the loop sleeps until its poll");
    let failed: Vec<(String, String)> =
        sqlx::query_as("SELECT content, last_error FROM scheduled_prompts WHERE status = 'failed' ORDER BY content")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(failed.len(), 14, "{failed:?}");
    assert!(failed.iter().any(|(c, e)| c == "huge interval" && e.contains("315360000")), "{failed:?}");
    assert!(failed.iter().any(|(c, _)| c == "tomorrow"), "{failed:?}");
    let fires: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM scheduled_fires").fetch_one(&pool).await.unwrap();
    assert_eq!(fires, 0, "the unreadable fire is dropped");
    pool.close().await;
}

/// A job cancelled while its fire waits for a retry is not delivered after all.
#[tokio::test]
async fn a_job_cancelled_while_its_fire_waits_for_a_retry_is_not_delivered() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir.path().join("s.db")).await;
    let clock = ManualClock::new(at(9, 0, 0));
    let created = store.create(job("call mum", at(9, 0, 0), Recurrence::None), clock.now()).await.unwrap();
    let recorder = Arc::new(Recorder::default());
    *recorder.fail.lock().unwrap() = 1;
    let engine = engine(store.clone(), clock.clone(), recorder.clone(), "a");
    let retry = engine.step().await.unwrap().unwrap();
    store.cancel(&target(), &created.id, clock.now()).await.unwrap().unwrap();
    clock.set(retry);
    engine.step().await.unwrap();
    assert!(recorder.fires.lock().unwrap().is_empty());
    assert_eq!(store.get(&target(), &created.id).await.unwrap().unwrap().status, JobStatus::Cancelled);
}

/// A time another program wrote with an offset is read as the instant it names: due now, not hours later.
#[tokio::test]
async fn a_stored_time_with_an_offset_fires_at_the_instant_it_names() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let store = store(&path).await;
    let clock = ManualClock::new(at(9, 0, 0));
    let created = store.create(job("offset", at(23, 0, 0), Recurrence::None), clock.now()).await.unwrap();
    store.close().await;
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display())).await.unwrap();
    // 09:00 UTC, written as 14:00 at +05:00: as text it sorts after "2026-12-04 09:…".
    sqlx::query("UPDATE scheduled_prompts SET run_at = '2026-12-04T14:00:00+05:00' WHERE id = ?1")
        .bind(&created.id)
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    let store = self::store(&path).await;
    let recorder = Arc::new(Recorder::default());
    engine(store, clock, recorder.clone(), "a").step().await.unwrap();
    assert_eq!(recorder.fires.lock().unwrap().len(), 1);
}

/// Times another process writes while the scheduler runs are read as the instants they name: one due by its
/// instant fires although its text sorts later, one not due yet does not fire although its text sorts earlier.
#[tokio::test]
async fn times_written_with_offsets_while_running_fire_at_their_instant() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let store = store(&path).await;
    let clock = ManualClock::new(at(9, 0, 0));
    let due = store.create(job("due", at(23, 0, 0), Recurrence::None), clock.now()).await.unwrap();
    let later = store.create(job("later", at(23, 0, 0), Recurrence::None), clock.now()).await.unwrap();
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display())).await.unwrap();
    for (id, text) in [(&due.id, "2026-12-04T14:00:00+05:00"), (&later.id, "2026-12-03T23:59:00-23:59")] {
        sqlx::query("UPDATE scheduled_prompts SET run_at = ?2 WHERE id = ?1")
            .bind(id)
            .bind(text)
            .execute(&pool)
            .await
            .unwrap();
    }
    pool.close().await;
    let recorder = Arc::new(Recorder::default());
    let next = engine(store, clock, recorder.clone(), "a").step().await.unwrap();
    assert_eq!(recorder.fires.lock().unwrap().iter().map(|f| f.0.clone()).collect::<Vec<_>>(), ["due"]);
    // 2026-12-03 23:59 at -23:59 is 2026-12-04 23:58 UTC.
    assert_eq!(next, Some(at(23, 58, 0)));
}

/// A time past the year 9999 (only another program can write one) fails its job; it never fires.
#[tokio::test]
async fn a_time_past_the_year_9999_fails_its_job_and_never_fires() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let store = store(&path).await;
    let clock = ManualClock::new(at(9, 0, 0));
    let once = store.create(job("far once", at(23, 0, 0), Recurrence::None), clock.now()).await.unwrap();
    let every =
        store.create(job("far every", at(23, 0, 0), Recurrence::Interval { seconds: 60 }), clock.now()).await.unwrap();
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display())).await.unwrap();
    for id in [&once.id, &every.id] {
        sqlx::query("UPDATE scheduled_prompts SET run_at = '+10000-01-01 00:00:00' WHERE id = ?1")
            .bind(id)
            .execute(&pool)
            .await
            .unwrap();
    }
    pool.close().await;
    let recorder = Arc::new(Recorder::default());
    let engine = engine(store.clone(), clock, recorder.clone(), "a");
    for _ in 0..3 {
        engine.step().await.unwrap();
    }
    assert!(recorder.fires.lock().unwrap().is_empty(), "{:?}", recorder.fires.lock().unwrap());
    for id in [&once.id, &every.id] {
        assert_eq!(store.get(&target(), id).await.unwrap().unwrap().status, JobStatus::Failed);
    }
}
