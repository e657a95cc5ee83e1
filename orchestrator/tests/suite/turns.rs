use super::harness::Harness;
use minibot_agent::AgentEvent;
use minibot_orchestrator::messages::{Inbound, STOPPED_HISTORY_NOTE, StopTurn};
use minibot_test_support::{Reply, Script, ScriptedLlm};
use serde_json::json;
use std::time::{Duration, Instant};

#[actix::test]
async fn two_chats_run_concurrently_while_one_chat_stays_in_order() {
    let llm = ScriptedLlm::start(vec![
        Script::new("chat two", vec![Reply::text("answer two")]),
        Script::new("first of one", vec![Reply::text("answer first")]),
        Script::new("second of one", vec![Reply::text("answer second")]),
    ])
    .await;
    llm.set_default_delay(Duration::from_millis(500));
    let mut h = Harness::start(&llm.base_url(), "").await;
    let started = Instant::now();
    h.send(1, "first of one");
    h.send(1, "second of one");
    h.send(2, "chat two");
    let mut chat_two_at = None;
    let mut chat_one = Vec::new();
    while chat_two_at.is_none() || chat_one.is_empty() {
        let reply = h.reply().await;
        if reply.chat_id == 2 {
            chat_two_at = Some(started.elapsed());
            assert_eq!(reply.text, "answer two");
        } else {
            chat_one.push(reply.text);
        }
    }
    let chat_two_at = chat_two_at.unwrap();
    assert!(chat_two_at < Duration::from_millis(900), "chat two waited for chat one: {chat_two_at:?}");
    // Chat one's messages were handled one after the other, first before second.
    let history = h.history(1).await;
    let first = history.iter().position(|m| m == "first of one").expect("first stored");
    let second = history.iter().position(|m| m == "second of one").expect("second stored");
    assert!(first < second, "{history:?}");
    let mut requests_with_second = 0;
    for request in llm.requests() {
        let users: Vec<String> = request["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "user")
            .map(|m| m["content"].as_str().unwrap().to_string())
            .collect();
        if let Some(s) = users.iter().position(|u| u == "second of one") {
            requests_with_second += 1;
            assert!(users[..s].contains(&"first of one".to_string()), "order kept: {users:?}");
        }
    }
    assert!(requests_with_second > 0, "no request to the model carried \"second of one\": {:?}", llm.requests());
}

#[actix::test]
async fn tool_calls_run_and_results_go_back_to_the_model() {
    let llm = ScriptedLlm::start(vec![Script::new(
        "what is 12345*6789?",
        vec![
            Reply::tools_raw(&[
                ("calculate_expression", r#"{"expression":"12345*6789"}"#),
                ("current_datetime", r#"{"format":"%Y"}"#),
            ]),
            Reply::text("It is 83810205."),
        ],
    )])
    .await;
    let mut h = Harness::start(&llm.base_url(), "").await;
    h.send(1, "what is 12345*6789?");
    let reply = h.reply().await;
    assert_eq!(reply.text, "It is 83810205.");
    let mut started = Vec::new();
    while let Ok(progress) = h.progress.try_recv() {
        if let AgentEvent::ToolStarted { name, .. } = progress.event {
            started.push(name);
        }
    }
    assert_eq!(started, ["calculate_expression", "current_datetime"]);
    let requests = llm.requests();
    assert_eq!(requests.len(), 2);
    let tool_messages: Vec<&serde_json::Value> =
        requests[1]["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tool_messages.len(), 2);
    assert!(tool_messages[0]["content"].as_str().unwrap().contains("\"83810205\""));
    let year = chrono_year();
    assert!(tool_messages[1]["content"].as_str().unwrap().contains(&year));
    assert_eq!(h.history(1).await, ["what is 12345*6789?", "It is 83810205."]);
}

fn chrono_year() -> String {
    // The year from the system clock without another dependency: `date +%Y`.
    let out = std::process::Command::new("date").arg("-u").arg("+%Y").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[actix::test]
async fn invalid_tool_arguments_and_unknown_tools_are_answered_to_the_model() {
    let llm = ScriptedLlm::start(vec![Script::new(
        "compute please",
        vec![
            Reply::tools_raw(&[("calculate_expression", r#"{"expression": "#), ("no_such_tool", "{}")]),
            Reply::text("Sorry, let me explain instead."),
        ],
    )])
    .await;
    let mut h = Harness::start(&llm.base_url(), "").await;
    h.send(1, "compute please");
    assert_eq!(h.reply().await.text, "Sorry, let me explain instead.");
    let requests = llm.requests();
    let tools: Vec<serde_json::Value> = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| serde_json::from_str(m["content"].as_str().unwrap()).unwrap())
        .collect();
    assert_eq!(tools[0]["error_code"], "invalid_arguments");
    assert_eq!(tools[1]["error_code"], "unknown_tool");
    assert!(tools[1]["error"].as_str().unwrap().contains("no_such_tool"));
}

#[actix::test]
async fn provider_errors_are_retried_and_garbage_is_reported_without_stopping() {
    let llm = ScriptedLlm::start(vec![
        Script::new("flaky", vec![Reply::text("recovered")])
            .fail_first(vec![Reply::Status(500, "upstream exploded".into())]),
        Script::new("garbage", vec![Reply::Raw("<html>not json".into())]),
        Script::new("after garbage", vec![Reply::text("still here")]),
    ])
    .await;
    let mut h = Harness::start(&llm.base_url(), "").await;
    h.send(1, "flaky");
    let reply = h.reply().await;
    assert_eq!(reply.text, "recovered");
    assert!(!reply.is_error);
    h.send(2, "garbage");
    let reply = h.reply().await;
    assert!(reply.is_error);
    assert!(reply.text.contains("not valid"), "{}", reply.text);
    h.send(2, "after garbage");
    assert_eq!(h.reply().await.text, "still here");
    // The failed turn left no half-stored messages and no pending row behind.
    assert_eq!(h.history(2).await, ["after garbage", "still here"]);
    assert!(h.runtime.store.pending_turns().await.unwrap().is_empty());
}

#[actix::test]
async fn stop_cancels_the_running_turn() {
    let llm =
        ScriptedLlm::start(vec![Script::new("slow job", vec![Reply::text("too late")]).delay(Duration::from_secs(5))])
            .await;
    let mut h = Harness::start(&llm.base_url(), "").await;
    h.send(1, "slow job");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    h.router.do_send(StopTurn { channel: "test".into(), chat_id: 1 });
    let reply = h.reply().await;
    assert_eq!(reply.text, "Stopped.");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(h.history(1).await, ["slow job", STOPPED_HISTORY_NOTE]);
    h.router.do_send(StopTurn { channel: "test".into(), chat_id: 1 });
    assert_eq!(h.reply().await.text, "Nothing is running.");
}

#[actix::test]
async fn pending_turns_are_replayed_after_a_restart() {
    let llm = ScriptedLlm::start(vec![Script::new("interrupted", vec![Reply::text("done now")])]).await;
    let dir = tempfile::tempdir().unwrap();
    {
        // A previous process accepted the message and died before answering.
        let store = minibot_store::Store::open(&dir.path().join("data/minibot.db"), None).await.unwrap();
        let inbound = Inbound::new("test", 3, Some(7), "interrupted");
        store.mark_pending(&inbound.event_id, "test:3", &serde_json::to_string(&inbound).unwrap()).await.unwrap();
        store.close().await;
    }
    let mut h = Harness::start_in(dir, &llm.base_url(), "").await;
    let replayed = h.router.send(minibot_orchestrator::messages::ReplayPending).await.unwrap();
    assert_eq!(replayed.len(), 1);
    assert_eq!(h.reply().await.text, "done now");
    assert_eq!(h.history(3).await, ["interrupted", "done now"]);
    assert!(h.runtime.store.pending_turns().await.unwrap().is_empty());
}

#[actix::test]
async fn step_limit_ends_the_turn_with_the_reference_message() {
    let llm = ScriptedLlm::start(vec![Script::new(
        "loop forever",
        vec![
            Reply::tool("calculate_expression", json!({"expression": "1+1"})),
            Reply::tool("calculate_expression", json!({"expression": "1+2"})),
            Reply::tool("calculate_expression", json!({"expression": "1+3"})),
        ],
    )])
    .await;
    let mut h = Harness::start(&llm.base_url(), "max_tool_iterations = 2\n").await;
    h.send(1, "loop forever");
    assert_eq!(h.reply().await.text, minibot_agent::MAX_STEPS_REPLY);
    assert_eq!(llm.requests().len(), 2);
}

#[actix::test]
async fn the_guardrail_reruns_a_turn_that_needed_tools() {
    let llm = ScriptedLlm::start(vec![
        // First attempt answers from memory; the rerun uses the clock.
        Script::new(
            "what time is it?",
            vec![Reply::tool("current_datetime", json!({})), Reply::text("It is exactly now.")],
        )
        .fail_first(vec![Reply::text("It is probably noon.")]),
        Script::containing(
            "Decide whether tools were required",
            vec![Reply::text(r#"{"requires_tools": true, "reason": "needs the clock"}"#)],
        ),
        Script::new("tell me a joke", vec![Reply::text("A joke.")]),
    ])
    .await;
    let extra = "[orchestration]\nmain_tool_use_guardrail = \"llm_classifier\"\n";
    let mut h = Harness::start(&llm.base_url(), extra).await;
    h.send(1, "what time is it?");
    assert_eq!(h.reply().await.text, "It is exactly now.");
    let system = llm.requests().last().unwrap()["messages"][0]["content"].as_str().unwrap().to_string();
    assert!(system.contains("Tool use check"), "the rerun carries the reminder");
    // A request that needs no tools: the classifier is asked, says yes again, the rerun still uses none.
    h.send(2, "tell me a joke");
    assert_eq!(h.reply().await.text, minibot_orchestrator::guardrail::GUARDRAIL_REPLY);
}

#[actix::test]
async fn a_message_sent_during_a_turn_is_read_by_it_and_answered_once() {
    let llm = ScriptedLlm::start(vec![
        Script::new("look up the time", vec![Reply::tool("current_datetime", json!({}))])
            .delay(Duration::from_millis(400)),
        Script::new("and the date too", vec![Reply::text("both, answered together")]),
    ])
    .await;
    let mut h = Harness::start(&llm.base_url(), "").await;
    let first = h.send(1, "look up the time");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let second = h.send(1, "and the date too");
    let reply = h.reply().await;
    assert_eq!(reply.text, "both, answered together");
    assert_eq!(reply.answers, [first.event_id, second.event_id], "one reply answers both messages");
    let requests = llm.requests();
    assert_eq!(requests.len(), 2, "the steered message joined the running turn: {requests:?}");
    let last = requests[1]["messages"].as_array().unwrap();
    assert_eq!(last.last().unwrap()["content"], "and the date too", "read after the tool result: {last:?}");
    assert_eq!(h.history(1).await, ["look up the time", "and the date too", "both, answered together"]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(h.replies.try_recv().is_err(), "no second turn for the steered message");
    assert!(h.runtime.store.pending_turns().await.unwrap().is_empty());
}

#[actix::test]
async fn task_results_for_a_channel_that_registers_later_are_held_for_it() {
    use minibot_orchestrator::messages::{Deliver, Outbound, OutboundRole};
    let llm = ScriptedLlm::start(Vec::new()).await;
    let mut h = Harness::start(&llm.base_url(), "").await;
    let early = Outbound::text("late", 5, "a task result from before start-up", OutboundRole::TaskResult);
    h.router.do_send(Deliver(early));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    super::harness::register(&h.router, "late", tx, tokio::sync::mpsc::unbounded_channel().0).await;
    let delivered = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.unwrap().unwrap();
    assert_eq!(delivered.text, "a task result from before start-up");
    assert!(h.replies.try_recv().is_err(), "nothing went to the other channel");
}

/// A chat flooded with long messages while its turns store theirs: every message is recorded, answered and
/// stored, and another chat is answered meanwhile. (Recording a message once waited inside the chat's actor,
/// which then stopped polling its own turn while that turn held the store's write lock: both stalled for the
/// busy timeout, and other chats' writes failed.)
#[actix::test]
async fn a_flood_of_long_messages_stalls_no_chat_and_loses_nothing() {
    let llm = ScriptedLlm::start(vec![
        Script::containing("flood", vec![Reply::text("noted")]),
        Script::new("meanwhile", vec![Reply::text("still here")]),
    ])
    .await;
    let mut h = Harness::start(&llm.base_url(), "").await;
    let filler = "x".repeat(32_000);
    let mut flood = std::collections::HashSet::new();
    let mut others = 0;
    for n in 0..60 {
        flood.insert(h.send(1, &format!("flood {n} {filler}")).event_id);
        if n % 15 == 7 {
            h.send(2, "meanwhile");
            others += 1;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut answered = std::collections::HashSet::new();
    let mut other_answers = 0;
    while !flood.is_subset(&answered) || other_answers < others {
        // `reply` allows 10 s: a stall behind the write lock lasts at least the 10 s busy timeout.
        let reply = h.reply().await;
        if reply.chat_id == 2 {
            assert_eq!(reply.text, "still here");
            other_answers += 1;
        } else {
            answered.extend(reply.answers);
        }
    }
    let stored = h.history(1).await;
    for n in 0..60 {
        let text = format!("flood {n} {filler}");
        assert_eq!(stored.iter().filter(|m| **m == text).count(), 1, "message {n} stored once");
    }
    assert_eq!(h.history(2).await.iter().filter(|m| *m == "still here").count(), others);
    assert!(h.runtime.store.pending_turns().await.unwrap().is_empty(), "every pending row cleared");
}
