//! Steering: messages that reach the inbox while a run works are read before the next model call, and tool calls
//! still waiting when one arrives are skipped.
//!
//! A message is put into the inbox from the `StepStarted` event, which the loop sends just before it calls the
//! model: so it arrives "while the model is thinking", deterministically, without sleeps.

use super::{Agent, COUNTER, limits, messages, roles, tool_results, user_texts};
use minibot_agent::{AgentEvent, Limits, Steer, StopReason};
use minibot_test_support::{Reply, Script};
use serde_json::json;
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

fn steer(id: &str, text: &str) -> Steer {
    Steer { id: id.into(), text: text.into() }
}

/// An event handler that sends `message` into the inbox when step `at` starts.
fn steer_at(at: u32, sender: UnboundedSender<Steer>, message: Steer) -> impl Fn(AgentEvent) + Send + Sync {
    move |event| {
        if event == (AgentEvent::StepStarted { step: at }) {
            sender.send(message.clone()).unwrap();
        }
    }
}

#[tokio::test]
async fn a_message_during_the_model_call_skips_the_pending_tool_calls() {
    let agent = Agent::start(vec![
        Script::new(
            "count to two",
            vec![Reply::tools_raw(&[(COUNTER, r#"{"n":1}"#), (COUNTER, r#"{"n":2}"#)]), Reply::text("counted")],
        ),
        Script::new("never mind, just say hi", vec![Reply::text("hi")]),
    ])
    .await;
    let (sender, mut inbox) = unbounded_channel();
    let on_event = steer_at(1, sender, steer("msg-2", "never mind, just say hi"));
    let outcome = agent.run_with("count to two", limits(), Some(&mut inbox), &on_event).await.unwrap();
    assert_eq!(outcome.answer, "hi");
    assert_eq!(outcome.stop_reason, StopReason::Completed);
    assert_eq!(outcome.steered, [steer("msg-2", "never mind, just say hi")]);
    assert_eq!(agent.calls(COUNTER), 0, "no call runs once a new message is waiting");
    assert_eq!(outcome.tool_calls, 0);
    let requests = agent.requests();
    assert_eq!(requests.len(), 2);
    // Every call is answered (the API needs a result per call id), as skipped, and the new message follows.
    assert_eq!(roles(&requests[1]), ["system", "user", "assistant", "tool", "tool", "user"]);
    for (result, n) in tool_results(&requests[1]).iter().zip(1..) {
        assert_eq!(result["skipped"], true, "call {n}: {result}");
        assert_eq!(result["ok"], false, "call {n}: {result}");
        assert_eq!(result["tool"], COUNTER, "call {n}: {result}");
    }
    assert_eq!(user_texts(&requests[1]), ["count to two", "never mind, just say hi"]);
}

#[tokio::test]
async fn a_message_during_a_final_answer_is_answered_in_the_same_run() {
    let agent = Agent::start(vec![
        Script::new("tell me a joke", vec![Reply::text("A joke.")]),
        Script::new("and a second one", vec![Reply::text("Two jokes.")]),
    ])
    .await;
    let (sender, mut inbox) = unbounded_channel();
    let on_event = steer_at(1, sender, steer("msg-2", "and a second one"));
    let outcome = agent.run_with("tell me a joke", limits(), Some(&mut inbox), &on_event).await.unwrap();
    assert_eq!(outcome.answer, "Two jokes.");
    assert_eq!(outcome.steered, [steer("msg-2", "and a second one")]);
    let requests = agent.requests();
    assert_eq!(requests.len(), 2);
    // The first answer stays in the conversation so the model answers both.
    let sent = messages(&requests[1]);
    let tail = &sent[sent.len() - 2..];
    assert_eq!(tail[0], json!({"role": "assistant", "content": "A joke."}));
    assert_eq!(tail[1], json!({"role": "user", "content": "and a second one"}));
}

#[tokio::test]
async fn a_message_during_the_last_allowed_step_is_left_for_the_caller() {
    let agent = Agent::start(vec![
        Script::new("tell me a joke", vec![Reply::text("A joke.")]),
        Script::new("and a second one", vec![Reply::text("never reached")]),
    ])
    .await;
    let (sender, mut inbox) = unbounded_channel();
    let on_event = steer_at(1, sender, steer("msg-2", "and a second one"));
    let limits = Limits { max_steps: Some(1), ..limits() };
    let outcome = agent.run_with("tell me a joke", limits, Some(&mut inbox), &on_event).await.unwrap();
    assert_eq!(outcome.answer, "A joke.");
    assert_eq!(outcome.stop_reason, StopReason::Completed);
    assert!(outcome.steered.is_empty(), "the run did not read it: {:?}", outcome.steered);
    assert_eq!(agent.requests().len(), 1);
    // Still in the inbox, so the caller can make it the next turn.
    assert_eq!(inbox.try_recv().ok(), Some(steer("msg-2", "and a second one")));
}

#[tokio::test]
async fn messages_waiting_before_the_run_are_read_before_the_first_request() {
    let agent = Agent::start(vec![Script::new("p.s. in French", vec![Reply::text("Bonjour !")])]).await;
    let (sender, mut inbox) = unbounded_channel();
    sender.send(steer("msg-2", "say hello")).unwrap();
    sender.send(steer("msg-3", "p.s. in French")).unwrap();
    let outcome = agent.run_with("hello?", limits(), Some(&mut inbox), &|_| {}).await.unwrap();
    assert_eq!(outcome.answer, "Bonjour !");
    assert_eq!(outcome.steered, [steer("msg-2", "say hello"), steer("msg-3", "p.s. in French")]);
    let requests = agent.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(user_texts(&requests[0]), ["hello?", "say hello", "p.s. in French"]);
}
