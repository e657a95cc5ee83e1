//! Secret values never leave in a request: a tool result, a message or a tool call's arguments that carry one
//! are masked before any provider sees the request. Errors coming back are masked too, whatever path put
//! provider text into them. This works on [`ChatRequest`], so every API format is
//! covered the same way, and only on what the conversation says: a short vault value must not turn a model name
//! or a number into `***`. Images are sent as they are.
//!
//! The redactor is the config's whole set ([`minibot_config::Config::redactor`]): the vault's values and
//! password and every configured credential, the endpoint's own key included (a model may repeat a key that some
//! tool printed).

use crate::{ChatProvider, ChatRequest, ChatResponse, ContentPart, Message, Result, TextSink};
use futures_util::future::BoxFuture;
use minibot_vault::Redactor;
use std::borrow::Cow;

pub struct Masking<P> {
    inner: P,
    redactor: Redactor,
}

impl<P> Masking<P> {
    pub fn new(inner: P, redactor: Redactor) -> Self {
        Self { inner, redactor }
    }

    fn masked<'r>(&self, request: &'r ChatRequest) -> Cow<'r, ChatRequest> {
        // Most requests hold no secret: a look is cheaper than a copy of the whole history.
        let Some(first) = request.messages.iter().position(|message| needs_mask(&self.redactor, message)) else {
            return Cow::Borrowed(request);
        };
        let mut request = request.clone();
        for message in &mut request.messages[first..] {
            mask_message(&self.redactor, message);
        }
        Cow::Owned(request)
    }
}

fn mask(redactor: &Redactor, text: &mut String) {
    if let Cow::Owned(masked) = redactor.redact(text) {
        *text = masked;
    }
}

/// [`mask`] for JSON text (tool arguments and results): some APIs take them parsed (Anthropic's `input`,
/// Gemini's `args`), so a secret written with JSON escapes (`\u0073`, `\/`) would leave in plain form after
/// the parse. Such text is read as JSON and its strings masked; other text is masked as it is (so its bytes,
/// and its key order, stay as the model wrote them).
fn mask_json(redactor: &Redactor, text: &mut String) {
    if (text.contains("\\u") || text.contains("\\/"))
        && let Cow::Owned(masked) = redactor.redact_json_text(text)
    {
        *text = masked;
    }
    mask(redactor, text);
}

/// Whether [`mask_message`] would change `message` (or might: JSON text with escapes is always masked).
fn needs_mask(redactor: &Redactor, message: &Message) -> bool {
    if redactor.is_empty() {
        return false;
    }
    let plain = |text: &str| matches!(redactor.redact(text), Cow::Owned(_));
    let json = |text: &str| text.contains("\\u") || text.contains("\\/") || plain(text);
    match message {
        Message::System(text) | Message::User(text) => plain(text),
        Message::UserParts(parts) => parts.iter().any(|part| matches!(part, ContentPart::Text(text) if plain(text))),
        Message::Assistant { content, tool_calls, reasoning, replay: _ } => {
            content.iter().chain(reasoning.iter()).any(|text| plain(text))
                || tool_calls.iter().any(|call| json(&call.arguments))
        }
        Message::Tool { content, .. } => json(content),
    }
}

fn mask_message(redactor: &Redactor, message: &mut Message) {
    match message {
        Message::System(text) | Message::User(text) => mask(redactor, text),
        Message::UserParts(parts) => {
            for part in parts {
                if let ContentPart::Text(text) = part {
                    mask(redactor, text);
                }
            }
        }
        Message::Assistant { content, tool_calls, reasoning, replay: _ } => {
            for text in content.iter_mut().chain(reasoning.iter_mut()) {
                mask(redactor, text);
            }
            for call in tool_calls {
                mask_json(redactor, &mut call.arguments);
            }
        }
        Message::Tool { content, .. } => mask_json(redactor, content),
    }
}

impl<P: ChatProvider> ChatProvider for Masking<P> {
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, Result<ChatResponse>> {
        Box::pin(
            async move { self.inner.complete(&self.masked(request)).await.map_err(|e| e.redacted(&self.redactor)) },
        )
    }

    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
        on_text: &'a TextSink<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse>> {
        Box::pin(async move {
            self.inner.stream(&self.masked(request), on_text).await.map_err(|e| e.redacted(&self.redactor))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolCall;

    #[test]
    fn secrets_are_masked_in_what_the_conversation_says_only() {
        let redactor = Redactor::from_values(["user", "s3cr3t-value"]);
        let mut messages = vec![
            Message::User("my key is s3cr3t-value".into()),
            Message::assistant_calls(
                None,
                vec![ToolCall {
                    id: "1".into(),
                    name: "bash".into(),
                    arguments: r#"{"cmd":"echo s3cr3t-value"}"#.into(),
                }],
            ),
            Message::UserParts(vec![
                ContentPart::Text("s3cr3t-value".into()),
                ContentPart::ImageUrl("data:image/png;base64,s3cr3t-value".into()),
            ]),
        ];
        for message in &mut messages {
            mask_message(&redactor, message);
        }
        assert_eq!(messages[0], Message::User("my key is ***".into()));
        let Message::Assistant { tool_calls, .. } = &messages[1] else { panic!() };
        assert_eq!(tool_calls[0].arguments, r#"{"cmd":"echo ***"}"#);
        let Message::UserParts(parts) = &messages[2] else { panic!() };
        assert_eq!(parts[0], ContentPart::Text("***".into()));
        assert_eq!(parts[1], ContentPart::ImageUrl("data:image/png;base64,s3cr3t-value".into()));
    }

    #[test]
    fn a_secret_written_with_json_escapes_is_masked_too() {
        let redactor = Redactor::from_values(["s3cr3t-value"]);
        let mut message = Message::Tool {
            call_id: "1".into(),
            name: "bash".into(),
            content: r#"{"out":"\u0073\u0033cr3t-value"}"#.into(),
        };
        mask_message(&redactor, &mut message);
        let Message::Tool { content, .. } = &message else { panic!() };
        assert_eq!(content, r#"{"out":"***"}"#);
    }

    /// The look before the copy must see every secret the masking would remove, in every kind of message.
    #[test]
    fn the_look_before_masking_finds_what_masking_changes() {
        let redactor = Redactor::from_values(["s3cr3t-value"]);
        let call = |arguments: &str| ToolCall { id: "1".into(), name: "bash".into(), arguments: arguments.into() };
        let tool = |content: &str| Message::Tool { call_id: "1".into(), name: "bash".into(), content: content.into() };
        let mut messages = Vec::new();
        for text in ["plain words", "the s3cr3t-value here"] {
            messages.extend([
                Message::System(text.into()),
                Message::User(text.into()),
                Message::UserParts(vec![ContentPart::Text(text.into())]),
                Message::Assistant { content: Some(text.into()), tool_calls: vec![], reasoning: None, replay: None },
                Message::Assistant { content: None, tool_calls: vec![], reasoning: Some(text.into()), replay: None },
                Message::assistant_calls(None, vec![call(&format!("{{\"cmd\":\"{text}\"}}"))]),
                tool(&format!("{{\"out\":\"{text}\"}}")),
            ]);
        }
        messages.push(tool(r#"{"out":"\u0073\u0033cr3t-value"}"#));
        for message in &messages {
            let mut masked = message.clone();
            mask_message(&redactor, &mut masked);
            assert_eq!(needs_mask(&redactor, message), masked != *message, "{message:?}");
        }
        let request = ChatRequest { messages, ..ChatRequest::default() };
        let masking = Masking::new((), redactor);
        let Cow::Owned(masked) = masking.masked(&request) else { panic!("the request holds a secret") };
        assert!(!format!("{:?}", masked.messages).contains("s3cr3t"));
        let clean = ChatRequest { messages: request.messages[..7].to_vec(), ..ChatRequest::default() };
        assert!(matches!(masking.masked(&clean), Cow::Borrowed(_)));
    }
}
