//! The router keeps an actor only for chats that are active: a quiet chat's actor is retired (a daemon that has
//! served thousands of chats does not hold them all), never one with a turn running, and a retired chat that
//! writes again is answered with its history intact.

use super::harness::Harness;
use minibot_orchestrator::router::RetireQuietChats;
use minibot_test_support::{Reply, Script, ScriptedLlm};
use std::time::Duration;

#[actix::test]
async fn quiet_chats_are_retired_and_answered_again_with_their_history() {
    let llm = ScriptedLlm::start(vec![
        Script::new("hello from one", vec![Reply::text("hi one")]),
        Script::new("hello from two", vec![Reply::text("hi two")]),
        Script::new("slow question", vec![Reply::text("slow answer")]).delay(Duration::from_millis(800)),
        Script::new("one again", vec![Reply::text("welcome back")]),
    ])
    .await;
    let mut h = Harness::start(&llm.base_url(), "").await;
    h.send(1, "hello from one");
    assert_eq!(h.reply().await.text, "hi one");
    h.send(2, "hello from two");
    assert_eq!(h.reply().await.text, "hi two");

    h.send(3, "slow question");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let left = h.router.send(RetireQuietChats(Duration::ZERO)).await.unwrap();
    assert_eq!(left, 1, "the chat with a running turn keeps its actor");
    assert_eq!(h.reply().await.text, "slow answer");

    h.send(1, "one again");
    assert_eq!(h.reply().await.text, "welcome back");
    let last = llm.requests().last().unwrap().clone();
    let said: Vec<&str> = last["messages"].as_array().unwrap().iter().filter_map(|m| m["content"].as_str()).collect();
    assert!(said.contains(&"hello from one") && said.contains(&"hi one"), "the history survived: {said:?}");
    let left = h.router.send(RetireQuietChats(Duration::ZERO)).await.unwrap();
    assert_eq!(left, 0);
}
