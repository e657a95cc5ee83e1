//! A chat whose history reaches its budget (`[memory] max_history_tokens`) is summarised once, after the reply:
//! the next request carries the summary instead of the old messages, which stay readable by id; a summary that
//! fails still lets every turn be answered, with only the latest messages sent, and the chat is told once.

use super::harness::Harness;
use minibot_agent::compaction::COMPACT_REQUEST;
use minibot_orchestrator::compaction::{DONE_NOTICE, ERROR_NOTICE, RUNNING_NOTICE};
use minibot_test_support::scripted_llm::{estimated_tokens, streamed_answer};
use minibot_test_support::{Reply, Script, ScriptedLlm};
use serde_json::{Value, json};

/// One tool, so the budget is mostly the conversation.
fn config(budget: u64) -> String {
    format!(
        "[orchestration.main_agent]\ntools_allow = [\"chat_history_info\"]\n\
         [memory]\nmax_history_tokens = {budget}\nnotify_compaction_updates = \"brief\"\n"
    )
}

/// About `n` tokens of text about `topic`.
fn long(topic: &str, n: usize) -> String {
    format!("{topic}: {}", "word ".repeat(n))
}

fn contents(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn tokens_of(request: &Value) -> u64 {
    // The fake does not count tokens; the request's size in the same tokenizer the product uses.
    let text = request["messages"].to_string() + &request["tools"].to_string();
    minibot_llm::count_text_tokens(&text, minibot_llm::TokenEncoding::for_model("test-model"))
}

#[actix::test]
async fn a_chat_past_its_budget_is_summarised_once_and_the_old_messages_stay_readable() {
    let llm = ScriptedLlm::start(vec![
        Script::new("tell me about apples", vec![Reply::text(&long("apples", 1500))]),
        Script::new("and pears?", vec![Reply::text(&long("pears", 1500))]),
        Script::containing(COMPACT_REQUEST, vec![Reply::text("SUMMARY: apples and pears were discussed.")]),
        Script::new("and plums?", vec![Reply::text("plums are fine")]),
        Script::new(
            "show the first message",
            vec![Reply::tool("chat_history_info", json!({ "message_id": 1 })), Reply::text("shown")],
        ),
    ])
    .await;
    let mut h = Harness::start(&llm.base_url(), &config(3000)).await;
    h.send(1, "tell me about apples");
    assert!(h.reply().await.text.starts_with("apples"));
    let base = tokens_of(&llm.requests()[0]);
    assert!(base < 1500, "the fixed prompt leaves room for the test: {base} tokens");

    h.send(1, "and pears?");
    assert!(h.reply().await.text.starts_with("pears"));
    // Past the budget now: the reply went first, then the notices of the summary.
    assert_eq!(h.reply().await.text, RUNNING_NOTICE);
    assert_eq!(h.reply().await.text, DONE_NOTICE);
    let summaries: Vec<Value> =
        llm.requests().into_iter().filter(|r| contents(r).iter().any(|c| c.contains(COMPACT_REQUEST))).collect();
    // One compaction (one pair of notices); a transcript longer than half the limit is summarised in parts,
    // each request within the limit.
    assert!(!summaries.is_empty());
    for request in &summaries {
        assert!(tokens_of(request) < 3000, "a summary request over the limit: {}", tokens_of(request));
    }
    let asked: String = summaries.iter().map(|r| contents(r).concat()).collect();
    assert!(asked.contains("tell me about apples") && asked.contains("and pears?"), "the summary sees the chat");

    h.send(1, "and plums?");
    assert_eq!(h.reply().await.text, "plums are fine");
    let next = llm.requests().last().unwrap().clone();
    let sent = contents(&next);
    assert!(sent.iter().any(|c| c.contains("SUMMARY: apples and pears")), "{sent:?}");
    assert!(!sent.iter().any(|c| c.contains("word word")), "the old messages are not sent again: {sent:?}");
    assert!(sent.iter().any(|c| c.contains("chat_history_info")), "the summary says where they are");
    assert!(tokens_of(&next) < 3000);

    // Still stored, whole, and readable through the tool.
    let history = h.history(1).await;
    assert!(history.iter().any(|m| m.starts_with("apples")) && history.iter().any(|m| m.starts_with("pears")));
    let first = h.runtime.store.history("test:1").await.unwrap()[0].id;
    llm.add_script(Script::new(
        "read it back",
        vec![Reply::tool("chat_history_info", json!({ "message_id": first })), Reply::text("read")],
    ));
    h.send(1, "read it back");
    assert_eq!(h.reply().await.text, "read");
    let last = llm.requests().last().unwrap().clone();
    let tool_result = last["messages"].as_array().unwrap().iter().rev().find(|m| m["role"] == "tool").unwrap().clone();
    assert!(tool_result["content"].as_str().unwrap().contains("tell me about apples"), "{tool_result}");
}

#[actix::test]
async fn a_failing_summary_still_answers_every_turn_within_the_limit_and_says_so_once() {
    let llm = ScriptedLlm::start(vec![
        Script::new("one", vec![Reply::text(&long("one", 1500))]),
        Script::new("two", vec![Reply::text(&long("two", 1500))]),
        Script::new("three", vec![Reply::text(&long("three", 1500))]),
        Script::new("four", vec![Reply::text("four answered")]),
        Script::containing(
            COMPACT_REQUEST,
            vec![Reply::Status(400, "{\"error\":{\"message\":\"no summaries today\"}}".into())],
        ),
    ])
    .await;
    let mut h = Harness::start(&llm.base_url(), &config(3000)).await;
    let mut notices = Vec::new();
    for turn in ["one", "two", "three", "four"] {
        h.send(1, turn);
        loop {
            let out = h.reply().await;
            if out.role == minibot_orchestrator::messages::OutboundRole::Answer {
                assert!(!out.is_error, "{turn}: {}", out.text);
                break;
            }
            notices.push(out.text);
        }
    }
    assert_eq!(notices.iter().filter(|n| n.as_str() == ERROR_NOTICE).count(), 1, "told once: {notices:?}");
    // Later attempts run quietly: no "running" notice without an outcome after it.
    assert_eq!(notices.iter().filter(|n| n.as_str() == RUNNING_NOTICE).count(), 1, "{notices:?}");
    // The model's context is not known (a test model): requests stay within a quarter above the budget.
    for request in llm.requests().iter().filter(|r| !contents(r).concat().contains(COMPACT_REQUEST)) {
        assert!(tokens_of(request) < 3750, "a request over the limit: {} tokens", tokens_of(request));
        // Also by the provider's own count, which is higher here (the fake counts a token for every four bytes
        // of the request's JSON): the cut follows the larger measure, on every turn.
        let (provider_count, _) = estimated_tokens(request.to_string().len(), 0);
        assert!(provider_count < 3750, "over the limit by the provider's count: {provider_count} tokens");
    }
    let last = contents(llm.requests().last().unwrap());
    assert!(last.iter().any(|c| c == "four"));
    assert!(!last.iter().any(|c| c.starts_with("one:")), "the oldest turn was left out of the request");
    assert_eq!(h.history(1).await.len(), 8, "nothing was deleted");
}

/// A streamed answer whose usage says the request was `prompt_tokens` long, as a provider with its own
/// tokenizer may count.
fn answer_counted_as(text: &str, prompt_tokens: u64) -> Reply {
    streamed_answer(text, "stop", prompt_tokens)
}

#[actix::test]
async fn the_providers_own_count_decides_when_a_short_chat_is_summarised() {
    // Text the local tokenizer counts far under the budget, which the provider counts as over it (another
    // vendor's tokenizer, images, a long system prompt on its side): its count wins, so no request overflows.
    let llm = ScriptedLlm::start(vec![
        Script::new("hello", vec![answer_counted_as("hi there", 3_100)]),
        Script::containing(COMPACT_REQUEST, vec![Reply::text("SUMMARY: a greeting.")]),
        Script::new("and now?", vec![Reply::text("still here")]),
    ])
    .await;
    let mut h = Harness::start(&llm.base_url(), &config(3000)).await;
    h.send(1, "hello");
    assert_eq!(h.reply().await.text, "hi there");
    assert!(tokens_of(&llm.requests()[0]) < 1500, "locally the chat is far under the budget");
    assert_eq!(h.reply().await.text, RUNNING_NOTICE);
    assert_eq!(h.reply().await.text, DONE_NOTICE);
    h.send(1, "and now?");
    assert_eq!(h.reply().await.text, "still here");
    let sent = contents(llm.requests().last().unwrap());
    assert!(sent.iter().any(|c| c.contains("SUMMARY: a greeting.")), "{sent:?}");
    assert!(!sent.iter().any(|c| c == "hi there"), "the summarised answer is not sent again: {sent:?}");
}

#[actix::test]
async fn a_provider_that_counts_only_part_of_the_request_is_not_believed() {
    // Some local servers report only the prompt tokens they had not cached: a count far under the request's
    // own size. The chat is then measured locally and still summarised at its budget.
    let llm = ScriptedLlm::start(vec![
        Script::new("tell me about apples", vec![answer_counted_as(&long("apples", 1500), 1)]),
        Script::new("and pears?", vec![answer_counted_as(&long("pears", 1500), 1)]),
        Script::containing(COMPACT_REQUEST, vec![Reply::text("SUMMARY: apples and pears.")]),
    ])
    .await;
    let mut h = Harness::start(&llm.base_url(), &config(3000)).await;
    h.send(1, "tell me about apples");
    assert!(h.reply().await.text.starts_with("apples"));
    h.send(1, "and pears?");
    assert!(h.reply().await.text.starts_with("pears"));
    assert_eq!(h.reply().await.text, RUNNING_NOTICE);
    assert_eq!(h.reply().await.text, DONE_NOTICE);
}
