//! Scheduled prompts end to end: the real daemon against the fake Bot API and the scripted model, with the
//! scheduler's SQLite file on disk. A job is scheduled through the model's tool call, or written into the file
//! as a job left from earlier; what the user sees is the turn it starts in their chat.

use crate::telegram::{Daemon, OPEN, home};
use chrono::{DateTime, Utc};
use minibot_e2e::{Home, Reply, Script, ScriptedLlm};
use minibot_scheduler::{NewJob, Recurrence, SchedulerStore, StoreSettings, Target};
use minibot_test_support::FakeTelegram;
use serde_json::json;
use std::collections::HashMap;
use std::time::{Duration, Instant};

const USER: i64 = 7;

fn scheduler_db(home: &Home) -> std::path::PathBuf {
    home.path().join("data/scheduled_prompts.db")
}

async fn open_jobs(home: &Home) -> SchedulerStore {
    SchedulerStore::open(&scheduler_db(home), 2, StoreSettings { batch_size: 10, lease: Duration::from_secs(120) })
        .await
        .unwrap()
}

fn job(chat_id: i64, content: &str, run_at: DateTime<Utc>, recurrence: Recurrence) -> NewJob {
    NewJob {
        target: Target { owner_id: "primary".into(), channel: "telegram".into(), chat_id, user_id: Some(USER) },
        role: "user".into(),
        content: content.into(),
        run_at,
        metadata: json!({}),
        recurrence,
        end_at: None,
        time_zone: None,
        max_attempts: 3,
    }
}

/// The user messages each chat's transcript holds, as stored.
async fn transcript_user_messages(home: &Home) -> Vec<(String, String)> {
    let url = format!("sqlite://{}?mode=ro", home.path().join("data/minibot.db").display());
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT session_id, content FROM messages WHERE role = 'user' ORDER BY id")
            .fetch_all(&pool)
            .await
            .unwrap();
    pool.close().await;
    rows
}

/// How many model requests carried a scheduled prompt naming `marker` as their user message.
fn fired_requests(llm: &ScriptedLlm, marker: &str) -> usize {
    llm.requests()
        .iter()
        .filter(|r| {
            r["messages"].as_array().is_some_and(|m| {
                m.iter().rev().find(|m| m["role"] == "user").and_then(|m| m["content"].as_str()).is_some_and(|t| {
                    t.starts_with("The user scheduled a prompt") && t.lines().nth(1).is_some_and(|l| l == marker)
                })
            })
        })
        .count()
}

/// What chat `chat_id` was sent, as the user reads it (MarkdownV2 escapes removed).
fn seen(fake: &FakeTelegram, chat_id: i64) -> Vec<String> {
    fake.calls()
        .iter()
        .filter(|c| c.ok() && c.method.eq_ignore_ascii_case("sendMessage") && c.chat_id() == Some(chat_id))
        .map(crate::telegram::visible)
        .collect()
}

/// A user message that schedules `content` 2 s ahead (the model acknowledges with `ack`), and the model's
/// `answer` when it fires.
fn reminder(message: &str, content: &str, ack: &str, answer: &str) -> Vec<Script> {
    vec![
        Script::new(
            message,
            vec![Reply::tool("schedule_prompt", json!({ "content": content, "delay_seconds": 2 })), Reply::text(ack)],
        ),
        Script::containing(content, vec![Reply::text(answer)]),
    ]
}

/// The wall time a request the fake received at `arrival` came in.
fn wall(arrival: Instant) -> DateTime<Utc> {
    Utc::now() - chrono::Duration::from_std(arrival.elapsed()).unwrap()
}

#[tokio::test]
async fn a_reminder_two_seconds_ahead_fires_on_time_into_the_chat() {
    let llm = ScriptedLlm::start(reminder(
        "remind me to stretch in 2 seconds",
        "STRETCH-NOW",
        "Reminder set.",
        "Time to stretch!",
    ))
    .await;
    let fake = FakeTelegram::start().await;
    let home = home(&llm, &fake, OPEN, "");
    let mut daemon = Daemon::start(&home);
    fake.push_text(100, USER, "remind me to stretch in 2 seconds");
    daemon.until(&fake, "the reminder is set", || seen(&fake, 100).iter().any(|t| t == "Reminder set.")).await;
    let result = crate::approvals::last_tool_result(&llm.requests()[1]);
    assert_eq!(result["scheduled"], true, "{result}");
    assert_eq!(result["channel"], "telegram");
    let run_at: DateTime<Utc> = result["run_at"].as_str().unwrap().parse().unwrap();

    daemon.until(&fake, "the reminder", || seen(&fake, 100).iter().any(|t| t == "Time to stretch!")).await;
    let arrival = llm.arrivals()[2];
    let late = wall(arrival) - run_at;
    // run_at is whole seconds (ISO without fractions), so the fire may look up to 1 s early by it.
    assert!(late < chrono::Duration::seconds(1), "fired {late} after its time");
    assert!(late > chrono::Duration::milliseconds(-1000), "fired before its time: {late}");
    assert_eq!(fired_requests(&llm, "STRETCH-NOW"), 1);
    let transcript = transcript_user_messages(&home).await;
    let scheduled: Vec<_> = transcript.iter().filter(|(_, text)| text.contains("STRETCH-NOW")).collect();
    assert_eq!(scheduled.len(), 1, "{transcript:?}");
    assert_eq!(scheduled[0].0, "telegram:100", "in the chat that scheduled it");
    assert!(scheduled[0].1.starts_with("The user scheduled a prompt for this time"), "{}", scheduled[0].1);

    // The model sees the job as completed.
    llm.add_script(Script::new(
        "what reminders do I have?",
        vec![Reply::tool("list_scheduled_prompts", json!({ "active_only": false })), Reply::text("Listed.")],
    ));
    fake.push_text(100, USER, "what reminders do I have?");
    daemon.until(&fake, "the list", || seen(&fake, 100).iter().any(|t| t == "Listed.")).await;
    let last = llm.requests().last().cloned().unwrap();
    let listed = crate::approvals::last_tool_result(&last);
    assert_eq!(listed["count"], 1, "{listed}");
    assert_eq!(listed["jobs"][0]["status"], "completed", "{listed}");
    assert_eq!(listed["jobs"][0]["text"], "STRETCH-NOW");
}

#[tokio::test]
async fn jobs_due_while_the_daemon_was_down_fire_once_at_start_saying_how_late() {
    let llm = ScriptedLlm::start(vec![]).await;
    let fake = FakeTelegram::start().await;
    let home = home(&llm, &fake, OPEN, "");
    let store = open_jobs(&home).await;
    let now = Utc::now();
    let hours = |h: i64| now - chrono::Duration::hours(h);
    store.create(job(200, "ONE-OFF", hours(2), Recurrence::None), hours(3)).await.unwrap();
    store.create(job(200, "HOURLY", hours(3), Recurrence::Interval { seconds: 3600 }), hours(4)).await.unwrap();
    let daily = Recurrence::cron("0 9 * * *", Some("Europe/Madrid")).unwrap();
    store.create(job(200, "DAILY", now - chrono::Duration::days(3), daily), hours(80)).await.unwrap();
    store.close().await;

    let mut daemon = Daemon::start(&home);
    daemon.until(&fake, "three scheduled turns", || seen(&fake, 200).len() >= 3).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    daemon.signal("-TERM");
    daemon.exit_status(Duration::from_secs(30)).await;
    for marker in ["ONE-OFF", "HOURLY", "DAILY"] {
        assert_eq!(fired_requests(&llm, marker), 1, "{marker} fired once, not once per missed slot");
    }
    let texts = seen(&fake, 200);
    let one_off = texts.iter().find(|t| t.contains("ONE-OFF")).unwrap();
    assert!(one_off.contains("runs 2 h late"), "{one_off}");
    let daily = texts.iter().find(|t| t.contains("DAILY")).unwrap();
    assert!(daily.contains("runs 3 d") && daily.contains("late"), "{daily}");

    // Started again: nothing fires a second time.
    let _again = Daemon::start(&home);
    tokio::time::sleep(Duration::from_secs(3)).await;
    for marker in ["ONE-OFF", "HOURLY", "DAILY"] {
        assert_eq!(fired_requests(&llm, marker), 1, "{marker} after the restart");
    }
    let store = open_jobs(&home).await;
    let (jobs, _) = store
        .list(&minibot_scheduler::ListQuery {
            target: &job(200, "", now, Recurrence::None).target,
            active_only: false,
            limit: 10,
            offset: 0,
        })
        .await
        .unwrap();
    let by_text: HashMap<_, _> = jobs.iter().map(|j| (j.content.as_str(), j)).collect();
    assert_eq!(by_text["ONE-OFF"].status.as_str(), "completed");
    assert_eq!(by_text["HOURLY"].status.as_str(), "pending");
    assert!(by_text["HOURLY"].run_at > now, "the next hourly slot is ahead");
    assert!(by_text["DAILY"].run_at > now);
    store.close().await;
}

#[tokio::test]
async fn two_daemons_on_one_database_fire_each_job_once() {
    let llm = ScriptedLlm::start(vec![]).await;
    let fake = FakeTelegram::start().await;
    let home = home(&llm, &fake, OPEN, "");
    let store = open_jobs(&home).await;
    let start = Utc::now() + chrono::Duration::seconds(3);
    let count = 60;
    for i in 0..count {
        let at = start + chrono::Duration::milliseconds(i * 50);
        store.create(job(300 + i % 6, &format!("PAIR-{i}"), at, Recurrence::None), Utc::now()).await.unwrap();
    }
    store.close().await;
    let mut first = Daemon::start(&home);
    let _second = Daemon::start(&home);
    first
        .until(&fake, "every job's turn", || (300..306).map(|chat| seen(&fake, chat).len()).sum::<usize>() >= 60)
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    for i in 0..count {
        assert_eq!(fired_requests(&llm, &format!("PAIR-{i}")), 1, "PAIR-{i}");
    }
    let transcript = transcript_user_messages(&home).await;
    assert_eq!(transcript.iter().filter(|(_, t)| t.contains("\nPAIR-")).count(), 60);
}

/// kill -9 of the daemon, again and again, while 200 jobs come due: every job's turn is in its chat's
/// transcript exactly once.
#[tokio::test]
async fn kill_9_in_a_loop_while_200_jobs_come_due_fires_each_exactly_once() {
    let llm = ScriptedLlm::start(vec![]).await;
    let fake = FakeTelegram::start().await;
    // Short leases, so that a fire a killed process had claimed is not left for 2 minutes when its pid lives on.
    let home = home(&llm, &fake, OPEN, "[scheduler.prompts]\nlease_timeout_seconds = 5\n");
    let store = open_jobs(&home).await;
    let start = Utc::now() + chrono::Duration::seconds(2);
    let count: i64 = 200;
    for i in 0..count {
        let at = start + chrono::Duration::milliseconds(i * 30);
        store.create(job(400 + i % 20, &format!("KILL-{i}"), at, Recurrence::None), Utc::now()).await.unwrap();
    }
    let target = |chat: i64| job(chat, "", start, Recurrence::None).target;
    let active = || async {
        let mut active = 0;
        for chat in 400..420 {
            active += store.count_active(&target(chat)).await.unwrap();
        }
        active
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut kills = 0;
    let mut daemon = Daemon::start(&home);
    while active().await > 0 {
        assert!(Instant::now() < deadline, "jobs still active after 2 min; log:\n{}", daemon.log_tail());
        tokio::time::sleep(Duration::from_millis(150 + fastrand_ms(600))).await;
        daemon.kill_hard();
        kills += 1;
        daemon = Daemon::start(&home);
    }
    // Let the last process finish the turns it replays.
    let transcript_count =
        || async { transcript_user_messages(&home).await.iter().filter(|(_, t)| t.contains("\nKILL-")).count() };
    let settle = Instant::now() + Duration::from_secs(60);
    while transcript_count().await < count as usize && Instant::now() < settle {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    daemon.signal("-TERM");
    daemon.exit_status(Duration::from_secs(30)).await;
    let transcript = transcript_user_messages(&home).await;
    let mut per_job: HashMap<String, usize> = HashMap::new();
    for (_, text) in &transcript {
        if let Some(marker) = text.lines().nth(1).filter(|l| l.starts_with("KILL-")) {
            *per_job.entry(marker.to_string()).or_default() += 1;
        }
    }
    let twice: Vec<_> = per_job.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "fired more than once: {twice:?}");
    assert_eq!(per_job.len(), count as usize, "every job fired ({kills} kills)");
    assert!(kills >= 3, "the loop killed the daemon {kills} times");
    store.close().await;
}

fn fastrand_ms(max: u64) -> u64 {
    u64::from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos()) % max
}

/// The interactive console fires the console chat's jobs: the answer appears without the user typing.
#[tokio::test]
async fn the_interactive_console_shows_a_reminder_when_it_comes_due() {
    let llm = ScriptedLlm::start(reminder(
        "ping me in 2 seconds",
        "PING-CONSOLE",
        "Will do.",
        "Ping! This is your reminder.",
    ))
    .await;
    let home = Home::new(&llm.base_url(), "");
    let mut terminal = minibot_e2e::Terminal::start(&home);
    terminal.wait_for("you> ").await;
    terminal.type_line("ping me in 2 seconds");
    terminal.wait_for("Will do.").await;
    let screen = terminal.wait_for("Ping! This is your reminder.").await;
    terminal.exit().await;
    assert_eq!(screen.matches("Ping! This is your reminder.").count(), 1, "{screen}");
    assert_eq!(fired_requests(&llm, "PING-CONSOLE"), 1);
}

/// Arguments the model gets wrong are refused, each with a reason that names the argument, and nothing is stored.
#[tokio::test]
async fn bad_arguments_from_the_model_are_refused_by_name() {
    let bad = [
        (json!({ "content": "x" }), "run_at or delay_seconds"),
        (json!({ "content": "x", "delay_seconds": 0 }), "delay_seconds must be 1 or more"),
        (json!({ "content": "x", "delay_seconds": 5, "run_at": "2030-01-01T00:00:00Z" }), "not both"),
        (json!({ "content": "x", "run_at": "tomorrow at nine" }), "run_at `tomorrow at nine`"),
        (json!({ "content": "x", "recurrence_cron_expression": "0 0 9 * * *" }), "not a 5-field cron"),
        (json!({ "content": "x", "recurrence_cron_expression": "0 25 * * *" }), "not a valid cron"),
        (
            json!({ "content": "x", "recurrence_cron_expression": "0 9 * * *", "time_zone": "Mars/Base" }),
            "time_zone `Mars/Base`",
        ),
        (json!({ "content": "x", "recurrence_interval_seconds": 10 }), "at least 60"),
        (json!({ "content": "x", "recurrence_interval_seconds": i64::MAX }), "at most 315360000"),
        (json!({ "content": "x", "recurrence_type": "weekly" }), "recurrence_type `weekly`"),
        (
            json!({ "content": "x", "delay_seconds": 60, "recurrence_interval_seconds": 3600, "recurrence_end_at": "2000-01-01T00:00:00Z" }),
            "recurrence_end_at",
        ),
        (json!({ "content": "   " }), "content is empty"),
        (json!({ "content": "x", "delay_seconds": 5, "metadata": [1, 2] }), "metadata must be a JSON object"),
    ];
    let mut replies: Vec<Reply> = bad.iter().map(|(args, _)| Reply::tool("schedule_prompt", args.clone())).collect();
    replies.push(Reply::tool("cancel_scheduled_prompt", json!({ "job_id": "0123456789abcdef0123456789abcdef" })));
    replies.push(Reply::tool("cancel_scheduled_prompt", json!({ "job_id": "'; DROP TABLE scheduled_prompts; --" })));
    replies.push(Reply::tool("list_scheduled_prompts", json!({ "limit": 0 })));
    replies.push(Reply::tool("list_scheduled_prompts", json!({})));
    replies.push(Reply::text("done"));
    let llm = ScriptedLlm::start(vec![Script::new("schedule badly", replies)]).await;
    // Room for every call in one turn (the default is 15 model calls).
    let home = Home::new(&llm.base_url(), "max_tool_iterations = 30\n");
    let output = minibot_e2e::run(home.minibot(&["console", "--once", "schedule badly"])).await;
    assert!(output.status.success(), "{}", minibot_e2e::stderr(&output));
    let last = llm.requests().last().cloned().unwrap();
    let results = crate::files::tool_results(&last);
    assert_eq!(results.len(), bad.len() + 4);
    for ((args, reason), result) in bad.iter().zip(&results) {
        assert_eq!(result["scheduled"], false, "{args} → {result}");
        assert_eq!(result["ok"], false, "{args} → {result}");
        let error = result["error"].as_str().unwrap();
        assert!(error.contains(reason), "{args}: expected `{reason}` in `{error}`");
    }
    let tail = &results[bad.len()..];
    assert_eq!(tail[0]["error_code"], "scheduler:not_found", "{}", tail[0]);
    assert_eq!(tail[1]["error_code"], "invalid_arguments", "{}", tail[1]);
    assert_eq!(tail[2]["error_code"], "invalid_arguments", "{}", tail[2]);
    assert_eq!(tail[3]["total"], 0, "nothing was stored: {}", tail[3]);
}

/// A chat sees and changes only its own jobs: another chat's job id is not found there.
#[tokio::test]
async fn a_chat_cannot_see_or_cancel_another_chats_jobs() {
    let llm = ScriptedLlm::start(vec![]).await;
    let fake = FakeTelegram::start().await;
    let home = home(&llm, &fake, OPEN, "");
    let store = open_jobs(&home).await;
    let theirs = store
        .create(job(501, "THEIRS", Utc::now() + chrono::Duration::hours(5), Recurrence::None), Utc::now())
        .await
        .unwrap();
    store.close().await;
    llm.add_script(Script::new(
        "cancel that",
        vec![
            Reply::tool("list_scheduled_prompts", json!({ "active_only": false })),
            Reply::tool("cancel_scheduled_prompt", json!({ "job_id": theirs.id })),
            Reply::tool("delete_scheduled_prompt", json!({ "job_id": theirs.id })),
            Reply::text("Tried."),
        ],
    ));
    let mut daemon = Daemon::start(&home);
    fake.push_text(502, USER, "cancel that");
    daemon.until(&fake, "the reply", || seen(&fake, 502).iter().any(|t| t == "Tried.")).await;
    let last = llm.requests().last().cloned().unwrap();
    let results = crate::files::tool_results(&last);
    assert_eq!(results[0]["total"], 0, "{}", results[0]);
    assert_eq!(results[1]["error_code"], "scheduler:not_found");
    assert_eq!(results[2]["error_code"], "scheduler:not_found");
    let store = open_jobs(&home).await;
    let job = store.get(&theirs.target, &theirs.id).await.unwrap().unwrap();
    assert_eq!(job.status.as_str(), "pending", "the other chat's job is untouched");
    store.close().await;
}
