//! The conversations the server keeps for us (`previous_response_id`), per [`ChatRequest::chain_key`]: the last
//! response's id and which part of the conversation it covers, so the next request of the chain sends only what
//! is new. Anything that makes the server's copy differ from ours (another system prompt, an edited or trimmed
//! history, a different answer in the history) sends the whole conversation again and restarts the chain.
//! In memory only, bounded: a restart forgets every chain, and the oldest chain goes when the store is full.
//!
//! [`ChatRequest::chain_key`]: crate::ChatRequest::chain_key

use crate::types::{ChatResponse, Message};
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;

/// The most chains kept; one per conversation (chat or worker task) that asks for chaining.
const MAX_CHAINS: usize = 1024;

/// How to send a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Plan {
    /// The whole conversation.
    Whole,
    /// Only `messages[from..]`, continuing the response `previous`.
    Continue { previous: String, from: usize },
}

/// The server's side of one chain.
#[derive(Debug, Clone)]
struct Link {
    response_id: String,
    /// How many messages the request that produced `response_id` had; its answer is the message after them.
    sent: usize,
    /// Of those messages, system prompt included.
    fingerprint: u64,
    /// The answer's tool call ids, to recognise it in the next request's history.
    answer_calls: Vec<String>,
    /// Insertion order, for dropping the oldest.
    age: u64,
}

#[derive(Default)]
pub(crate) struct Chains {
    links: Mutex<(HashMap<String, Link>, u64)>,
}

impl Chains {
    fn with_links<T>(&self, f: impl FnOnce(&mut HashMap<String, Link>, &mut u64) -> T) -> T {
        let mut guard = match self.links.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        let (links, age) = &mut *guard;
        f(links, age)
    }

    /// How the next request of chain `key` is sent.
    pub(crate) fn plan(&self, key: &str, messages: &[Message]) -> Plan {
        let Some(link) = self.with_links(|links, _| links.get(key).cloned()) else { return Plan::Whole };
        let from = link.sent + 1;
        let answer_matches = match messages.get(link.sent) {
            Some(Message::Assistant { tool_calls, .. }) => {
                tool_calls.iter().map(|c| c.id.as_str()).eq(link.answer_calls.iter().map(String::as_str))
            }
            _ => false,
        };
        if from >= messages.len() || !answer_matches || fingerprint(&messages[..link.sent]) != link.fingerprint {
            return Plan::Whole;
        }
        Plan::Continue { previous: link.response_id, from }
    }

    /// After `answer` (server id `response_id`) came back for `messages`.
    pub(crate) fn remember(&self, key: &str, response_id: &str, messages: &[Message], answer: &ChatResponse) {
        let link = Link {
            response_id: response_id.to_string(),
            sent: messages.len(),
            fingerprint: fingerprint(messages),
            answer_calls: answer.tool_calls.iter().map(|c| c.id.clone()).collect(),
            age: 0,
        };
        self.with_links(|links, age| {
            *age += 1;
            if !links.contains_key(key)
                && links.len() >= MAX_CHAINS
                && let Some(oldest) = links.iter().min_by_key(|(_, l)| l.age).map(|(k, _)| k.clone())
            {
                links.remove(&oldest);
            }
            links.insert(key.to_string(), Link { age: *age, ..link });
        });
    }

    /// Drops chain `key` (the server no longer has its response).
    pub(crate) fn forget(&self, key: &str) {
        self.with_links(|links, _| links.remove(key));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.with_links(|links, _| links.len())
    }
}

/// A hash of the messages as the model saw them. Collisions only cost a chain continued over a history that
/// changed, with 64 bits of SipHash over the whole text: not a practical concern.
fn fingerprint(messages: &[Message]) -> u64 {
    let mut hasher = DefaultHasher::new();
    for message in messages {
        format!("{message:?}").hash(&mut hasher);
    }
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ToolCall;

    fn call(id: &str) -> ToolCall {
        ToolCall { id: id.into(), name: "t".into(), arguments: "{}".into() }
    }

    fn answer() -> ChatResponse {
        ChatResponse { tool_calls: vec![call("c1")], ..ChatResponse::default() }
    }

    fn turn(system: &str) -> Vec<Message> {
        vec![Message::System(system.into()), Message::User("u".into())]
    }

    fn followed(mut messages: Vec<Message>) -> Vec<Message> {
        messages.push(answer().to_message());
        messages.push(Message::Tool { call_id: "c1".into(), name: "t".into(), content: "r".into() });
        messages
    }

    #[test]
    fn a_follow_up_continues_after_the_answer() {
        let chains = Chains::default();
        chains.remember("k", "resp_1", &turn("s"), &answer());
        assert_eq!(chains.plan("k", &followed(turn("s"))), Plan::Continue { previous: "resp_1".into(), from: 3 });
        assert_eq!(chains.plan("other", &followed(turn("s"))), Plan::Whole);
    }

    #[test]
    fn a_changed_prefix_or_answer_or_nothing_new_sends_everything() {
        let chains = Chains::default();
        chains.remember("k", "resp_1", &turn("s"), &answer());
        assert_eq!(chains.plan("k", &followed(turn("another system prompt"))), Plan::Whole);
        let mut other_answer = turn("s");
        other_answer.push(Message::assistant_calls(None, vec![call("c9")]));
        other_answer.push(Message::User("next".into()));
        assert_eq!(chains.plan("k", &other_answer), Plan::Whole);
        let mut nothing_new = turn("s");
        nothing_new.push(answer().to_message());
        assert_eq!(chains.plan("k", &nothing_new), Plan::Whole);
        chains.forget("k");
        assert_eq!(chains.plan("k", &followed(turn("s"))), Plan::Whole);
    }

    #[test]
    fn the_store_is_bounded_and_drops_the_oldest() {
        let chains = Chains::default();
        for i in 0..=MAX_CHAINS {
            chains.remember(&format!("k{i}"), "r", &turn("s"), &answer());
        }
        assert_eq!(chains.len(), MAX_CHAINS);
        assert_eq!(chains.plan("k0", &followed(turn("s"))), Plan::Whole, "the oldest chain was dropped");
        assert!(matches!(chains.plan(&format!("k{MAX_CHAINS}"), &followed(turn("s"))), Plan::Continue { .. }));
    }
}
