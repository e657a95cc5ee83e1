//! The next turn remembers which tools ran: the request carries the earlier turns' tool calls and results
//! (older results shortened, readable in full with `chat_history_info`), and a turn cut off between a call and
//! its result leaves nothing a provider would reject.

use super::harness::Harness;
use minibot_agent::TIMEOUT_REPLY;
use minibot_store::Role;
use minibot_test_support::{Reply, Script, ScriptedLlm};
use serde_json::{Value, json};

const FILES: &str = "[tools.file_storage]\nenabled = true\nroot_dir = \"files\"\n";

fn messages(request: &Value) -> Vec<Value> {
    request["messages"].as_array().cloned().unwrap_or_default()
}

/// `(role, content or tool names)` of each message, for readable comparisons.
fn outline(request: &Value) -> Vec<(String, String)> {
    messages(request)
        .iter()
        .map(|m| {
            let role = m["role"].as_str().unwrap_or_default().to_string();
            let text = match m["tool_calls"].as_array() {
                Some(calls) => calls.iter().map(|c| c["function"]["name"].as_str().unwrap_or_default()).collect(),
                None => m["content"].as_str().unwrap_or_default().chars().take(40).collect(),
            };
            (role, text)
        })
        .collect()
}

/// Every tool call of an assistant message is answered by a tool message right after it, and every tool
/// message answers such a call: what providers require.
fn assert_no_orphans(request: &Value) {
    let all = messages(request);
    let mut open: Vec<String> = Vec::new();
    for (i, m) in all.iter().enumerate() {
        if m["role"] == "tool" {
            let id = m["tool_call_id"].as_str().unwrap_or_default();
            let at = open.iter().position(|o| o == id);
            assert!(at.is_some(), "tool message {i} answers no open call: {:#?}", outline(request));
            open.retain(|o| o != id);
            continue;
        }
        assert!(open.is_empty(), "calls {open:?} unanswered before message {i}: {:#?}", outline(request));
        if let Some(calls) = m["tool_calls"].as_array() {
            open = calls.iter().map(|c| c["id"].as_str().unwrap_or_default().to_string()).collect();
        }
    }
    assert!(open.is_empty(), "calls {open:?} unanswered at the end");
}

fn pair(role: &str, text: &str) -> (String, String) {
    (role.to_string(), text.to_string())
}

#[actix::test]
async fn the_next_turn_carries_the_tool_calls_and_results_of_the_previous_one() {
    let write = json!({ "path": "note.txt", "content": "remember the milk" });
    let llm = ScriptedLlm::start(vec![
        Script::new("save a note", vec![Reply::tool("write_file", write), Reply::text("Saved it.")]),
        Script::new("which file did you write?", vec![Reply::text("note.txt")]),
    ])
    .await;
    let mut h = Harness::start(&llm.base_url(), FILES).await;
    h.send(1, "save a note");
    assert_eq!(h.reply().await.text, "Saved it.");
    h.send(1, "which file did you write?");
    assert_eq!(h.reply().await.text, "note.txt");

    let requests = llm.requests();
    let second_turn = requests.last().unwrap();
    let outline = outline(second_turn);
    assert_eq!(
        outline[1..],
        [
            pair("user", "save a note"),
            pair("assistant", "write_file"),
            outline[3].clone(),
            pair("assistant", "Saved it."),
            pair("user", "which file did you write?"),
        ],
        "{outline:#?}"
    );
    let all = messages(second_turn);
    let call = &all[2]["tool_calls"][0];
    assert!(call["function"]["arguments"].as_str().unwrap().contains("remember the milk"), "{call}");
    assert_eq!(all[3]["role"], "tool");
    assert_eq!(all[3]["tool_call_id"], call["id"]);
    assert!(all[3]["content"].as_str().unwrap().contains("note.txt"), "{}", all[3]["content"]);
    assert_eq!(
        all.iter().filter(|m| m["content"] == "which file did you write?").count(),
        1,
        "the current message is sent once"
    );
    assert_no_orphans(second_turn);
    assert_eq!(h.history(1).await, ["save a note", "Saved it.", "which file did you write?", "note.txt"]);
}

#[actix::test]
async fn older_results_are_shortened_in_the_request_and_read_in_full_on_request() {
    let text = |n: usize| format!("report {n}: {}", "lorem ipsum ".repeat(100));
    let write = |n: usize| json!({ "path": format!("r{n}.txt"), "content": text(n) });
    let read = |n: usize| json!({ "path": format!("r{n}.txt") });
    let llm = ScriptedLlm::start(vec![
        Script::new(
            "read report 1",
            vec![Reply::tool("write_file", write(1)), Reply::tool("read_file", read(1)), Reply::text("one")],
        ),
        Script::new(
            "read report 2",
            vec![Reply::tool("write_file", write(2)), Reply::tool("read_file", read(2)), Reply::text("two")],
        ),
    ])
    .await;
    let mut h = Harness::start(&llm.base_url(), FILES).await;
    h.send(1, "read report 1");
    assert_eq!(h.reply().await.text, "one");
    h.send(1, "read report 2");
    assert_eq!(h.reply().await.text, "two");

    let stored = h.runtime.store.history("test:1").await.unwrap();
    let read_results: Vec<_> = stored.iter().filter(|m| m.tool_name.as_deref() == Some("read_file")).collect();
    assert_eq!(read_results.len(), 2);
    assert!(read_results[0].content.contains(&serde_json::to_string(&text(1)).unwrap()), "stored whole");
    let first_id = read_results[0].id;
    // The model follows the pointer of the shortened result.
    llm.add_script(Script::new(
        "what did report 1 say?",
        vec![Reply::tool("chat_history_info", json!({ "message_id": first_id })), Reply::text("it said lorem")],
    ));
    h.send(1, "what did report 1 say?");
    assert_eq!(h.reply().await.text, "it said lorem");

    let requests = llm.requests();
    let third_turn = &requests[requests.len() - 2];
    let tool_texts: Vec<String> = messages(third_turn)
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(tool_texts.len(), 4, "{:#?}", outline(third_turn));
    let pointer = format!(r#"call chat_history_info with {{"message_id": {first_id}}}"#);
    assert!(tool_texts[1].contains(&pointer), "{}", tool_texts[1]);
    assert!(tool_texts[1].len() < 800, "turn 1's read result is shortened: {} bytes", tool_texts[1].len());
    assert!(tool_texts[3].contains(&serde_json::to_string(&text(2)).unwrap()), "the latest turn's result is whole");
    assert_no_orphans(third_turn);

    let answer = messages(requests.last().unwrap()).last().cloned().unwrap();
    assert_eq!(answer["role"], "tool");
    let full: Value = serde_json::from_str(answer["content"].as_str().unwrap()).unwrap();
    assert_eq!(full["message_id"], first_id);
    assert_eq!(full["tool_name"], "read_file");
    assert!(full["content"].as_str().unwrap().contains(&serde_json::to_string(&text(1)).unwrap()), "{full}");
}

#[actix::test]
async fn a_turn_cut_off_between_a_call_and_its_result_leaves_a_replayable_history() {
    let llm = ScriptedLlm::start(vec![
        Script::new(
            "wait a while",
            vec![Reply::tool("current_datetime", json!({})), Reply::tool("wait", json!({ "milliseconds": 5000 }))],
        ),
        Script::new("are you there?", vec![Reply::text("yes")]),
    ])
    .await;
    let extra = "[runtime]\nagent_timeout_seconds = 1\n[tools.wait]\nenabled = true\n";
    let mut h = Harness::start(&llm.base_url(), extra).await;
    h.send(1, "wait a while");
    assert_eq!(h.reply().await.text, TIMEOUT_REPLY, "the time limit stopped the turn inside the call");
    h.send(1, "are you there?");
    assert_eq!(h.reply().await.text, "yes");

    let next = llm.requests().last().cloned().unwrap();
    assert_no_orphans(&next);
    let outline = outline(&next);
    assert!(outline.contains(&pair("assistant", "current_datetime")), "the answered call stays: {outline:#?}");
    assert!(!outline.iter().any(|(_, text)| text == "wait"), "the unanswered call is gone: {outline:#?}");
    let stored = h.runtime.store.history("test:1").await.unwrap();
    assert!(stored.iter().all(|m| m.tool_calls.iter().all(|c| c.name != "wait")), "nor stored: {stored:#?}");
    assert_eq!(stored.iter().filter(|m| m.role == Role::Tool).count(), 1);
}
