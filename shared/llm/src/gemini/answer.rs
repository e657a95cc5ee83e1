//! Gemini's answer as a [`ChatResponse`], whole or put together from streamed chunks (each chunk is a whole
//! `GenerateContentResponse` with the text that is new; a function call always arrives whole in one chunk).
//! From `candidates[0]`:
//! - text parts are the answer, parts with `thought: true` the reasoning;
//! - `functionCall` parts are tool calls. Gemini gives them no id, so each gets `call_<turn>_<index>` (`turn`:
//!   the model replies already in the request), stable for the request and unique in the run. `args` is an
//!   object; a string there (as some Gemini-compatible servers send) is kept as the arguments text, so a
//!   broken one reaches the agent loop as it is;
//! - thought signatures go into the replay ([`Signatures`]);
//! - usage: `promptTokenCount` in, `candidatesTokenCount + thoughtsTokenCount` out (thinking is billed as
//!   output), `totalTokenCount` in all.
//!
//! When there is nothing to show, the reason decides the error: a prompt Gemini blocked
//! (`promptFeedback.blockReason`) or an answer withheld by its filters (`finishReason` SAFETY, RECITATION,
//! BLOCKLIST, PROHIBITED_CONTENT, SPII, …) is a [`LlmError::BadRequest`] naming the reason, not retried, since
//! the same request is blocked again; a malformed function call is [`LlmError::InvalidResponse`] (retried: the
//! model often gets it right the next time); an answer cut by the token limit before any text is an empty
//! answer with finish reason `length`; anything else empty is [`LlmError::EmptyResponse`].

use super::signatures::Signatures;
use super::wire::{Answer, UsageMetadata};
use crate::types::{ChatResponse, ToolCall, Usage};
use crate::{LlmError, Result, TextSink};
use serde_json::Value;

/// Finish reasons that mean Gemini's filters withheld the answer.
const WITHHELD: &[&str] =
    &["SAFETY", "RECITATION", "LANGUAGE", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", "OTHER"];

/// An answer being put together, from one chunk (a whole answer) or many (a stream).
#[derive(Default)]
pub(crate) struct Collected {
    content: String,
    reasoning: String,
    /// Name, arguments text, signature.
    calls: Vec<(String, String, Option<String>)>,
    text_signature: Option<String>,
    usage: Option<UsageMetadata>,
    finish_reason: Option<String>,
    finish_message: Option<String>,
    block: Option<String>,
    chunks: usize,
}

impl Collected {
    /// Adds one chunk; `on_text` sees the new answer text.
    pub(crate) fn add(&mut self, answer: Answer, on_text: Option<&TextSink<'_>>) {
        self.chunks += 1;
        if let Some(usage) = answer.usage_metadata {
            self.usage = Some(usage);
        }
        if let Some(feedback) = answer.prompt_feedback
            && let Some(reason) = feedback.block_reason
        {
            let said = feedback.block_reason_message.map(|m| format!(": {m}")).unwrap_or_default();
            self.block = Some(format!("Gemini blocked the prompt ({reason}){said}"));
        }
        let Some(candidate) = answer.candidates.into_iter().next() else { return };
        if candidate.finish_reason.is_some() {
            self.finish_reason = candidate.finish_reason;
        }
        if candidate.finish_message.is_some() {
            self.finish_message = candidate.finish_message;
        }
        for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
            if let Some(call) = part.function_call {
                let arguments = match call.args {
                    Some(Value::String(text)) => text,
                    Some(Value::Null) | None => "{}".into(),
                    Some(other) => other.to_string(),
                };
                self.calls.push((call.name, arguments, part.thought_signature));
                continue;
            }
            let thought = part.thought == Some(true);
            if part.thought_signature.is_some() && !thought {
                self.text_signature = part.thought_signature;
            }
            let Some(text) = part.text.filter(|t| !t.is_empty()) else { continue };
            if thought {
                self.reasoning.push_str(&text);
            } else {
                if let Some(on_text) = on_text {
                    on_text(&text);
                }
                self.content.push_str(&text);
            }
        }
    }

    /// The answer; `url` names where it came from in an error, `turn` numbers its calls' ids.
    pub(crate) fn finish(self, url: &str, turn: usize) -> Result<ChatResponse> {
        if let Some(block) = self.block {
            return Err(LlmError::BadRequest { url: url.into(), status: 200, body: block });
        }
        if self.chunks == 0 {
            return Err(LlmError::EmptyResponse);
        }
        let reason = self.finish_reason.as_deref().unwrap_or_default();
        let said = self.finish_message.as_deref().map(|m| format!(": {m}")).unwrap_or_default();
        if self.content.is_empty() && self.calls.is_empty() {
            match reason {
                withheld if WITHHELD.contains(&withheld) => {
                    let body = format!("Gemini withheld the answer (finishReason {withheld}){said}");
                    return Err(LlmError::BadRequest { url: url.into(), status: 200, body });
                }
                "MALFORMED_FUNCTION_CALL" | "UNEXPECTED_TOOL_CALL" | "TOO_MANY_TOOL_CALLS" => {
                    return Err(LlmError::InvalidResponse(format!(
                        "Gemini wrote a tool call it could not finish ({reason}){said}"
                    )));
                }
                "MAX_TOKENS" => {}
                _ => return Err(LlmError::EmptyResponse),
            }
        }
        let finish_reason = match reason {
            "" => None,
            "STOP" if !self.calls.is_empty() => Some("tool_calls".to_string()),
            "MAX_TOKENS" => Some("length".to_string()),
            other => Some(other.to_ascii_lowercase()),
        };
        let mut signatures = Signatures { calls: Vec::new(), text: self.text_signature };
        let tool_calls = self
            .calls
            .into_iter()
            .enumerate()
            .map(|(index, (name, arguments, signature))| {
                signatures.calls.push(signature);
                ToolCall { id: format!("call_{turn}_{index}"), name, arguments }
            })
            .collect();
        Ok(ChatResponse {
            content: (!self.content.is_empty()).then_some(self.content),
            reasoning: (!self.reasoning.is_empty()).then_some(self.reasoning),
            tool_calls,
            usage: self.usage.map(usage).unwrap_or_default(),
            finish_reason,
            replay: signatures.into_replay(),
        })
    }
}

fn usage(wire: UsageMetadata) -> Usage {
    let completion = wire.candidates_token_count + wire.thoughts_token_count;
    Usage {
        prompt_tokens: wire.prompt_token_count,
        completion_tokens: completion,
        total_tokens: wire.total_token_count.unwrap_or(wire.prompt_token_count + completion),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn collect(chunks: &[Value]) -> Result<ChatResponse> {
        let mut collected = Collected::default();
        for chunk in chunks {
            collected.add(serde_json::from_value(chunk.clone()).unwrap(), None);
        }
        collected.finish("https://g/models/m:generateContent", 2)
    }

    #[test]
    fn thoughts_calls_signatures_and_usage() {
        let answer = collect(&[json!({
            "candidates": [{ "content": { "role": "model", "parts": [
                { "text": "Let me think.", "thought": true },
                { "text": "Checking both." },
                { "functionCall": { "name": "a", "args": { "x": 1 } }, "thoughtSignature": "sig-a" },
                { "functionCall": { "name": "b", "args": "{\"broken" } }
            ] }, "finishReason": "STOP" }],
            "usageMetadata": { "promptTokenCount": 10, "candidatesTokenCount": 5, "thoughtsTokenCount": 7,
                               "totalTokenCount": 22 }
        })])
        .unwrap();
        assert_eq!(answer.content.as_deref(), Some("Checking both."));
        assert_eq!(answer.reasoning.as_deref(), Some("Let me think."));
        let calls: Vec<(&str, &str, &str)> =
            answer.tool_calls.iter().map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str())).collect();
        assert_eq!(calls, [("call_2_0", "a", r#"{"x":1}"#), ("call_2_1", "b", "{\"broken")]);
        assert_eq!(answer.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(answer.usage, Usage { prompt_tokens: 10, completion_tokens: 12, total_tokens: 22 });
        let signatures = Signatures::from_replay(answer.replay.as_ref());
        assert_eq!(signatures.calls, [Some("sig-a".to_string()), None]);
    }

    #[test]
    fn blocked_and_withheld_answers_are_clear_errors() {
        let blocked = collect(&[json!({ "promptFeedback": { "blockReason": "SAFETY" } })]).unwrap_err();
        assert!(!blocked.is_retryable());
        assert!(blocked.to_string().contains("Gemini blocked the prompt (SAFETY)"), "{blocked}");
        let withheld = collect(&[json!({ "candidates": [{ "finishReason": "RECITATION" }] })]).unwrap_err();
        assert!(withheld.to_string().contains("withheld the answer (finishReason RECITATION)"), "{withheld}");
        assert!(!withheld.is_retryable());
        let malformed = collect(&[json!({ "candidates": [{ "finishReason": "MALFORMED_FUNCTION_CALL",
                                                           "finishMessage": "Malformed function call: x(" }] })])
        .unwrap_err();
        assert!(matches!(malformed, LlmError::InvalidResponse(ref t) if t.contains("Malformed function call: x(")));
        assert!(matches!(collect(&[json!({ "candidates": [] })]), Err(LlmError::EmptyResponse)));
        let cut = collect(&[json!({ "candidates": [{ "finishReason": "MAX_TOKENS" }] })]).unwrap();
        assert_eq!((cut.content, cut.finish_reason.as_deref()), (None, Some("length")));
    }

    #[test]
    fn streamed_chunks_add_up_and_the_last_usage_counts() {
        let chunk = |text: &str, usage: u64| {
            json!({ "candidates": [{ "content": { "role": "model", "parts": [{ "text": text }] } }],
                    "usageMetadata": { "promptTokenCount": 4, "candidatesTokenCount": usage } })
        };
        let mut last = chunk("!", 3);
        last["candidates"][0]["finishReason"] = json!("STOP");
        last["candidates"][0]["content"]["parts"][0]["thoughtSignature"] = json!("sig-text");
        let answer = collect(&[chunk("Hel", 1), chunk("lo", 2), last]).unwrap();
        assert_eq!(answer.content.as_deref(), Some("Hello!"));
        assert_eq!(answer.finish_reason.as_deref(), Some("stop"));
        assert_eq!(answer.usage, Usage { prompt_tokens: 4, completion_tokens: 3, total_tokens: 7 });
        assert_eq!(Signatures::from_replay(answer.replay.as_ref()).text.as_deref(), Some("sig-text"));
    }
}
