//! Format repair: a channel could not parse an answer's markup (Telegram's "can't parse entities"), so the
//! main model rewrites the answer, without tools, for the channel to try once more.

use crate::messages::RepairFormat;
use crate::runtime::Runtime;
use minibot_llm::{ChatRequest, Message};

const REPAIR_PROMPT: &str = "You fix the formatting of a chat message that the messaging app rejected. Keep the \
meaning, the wording and the language; change only the markup so that it follows the rules below. Answer with the \
fixed message alone, nothing before or after it.";

/// The rewritten text, or why there is none.
pub async fn repair(rt: &Runtime, request: &RepairFormat) -> Result<String, String> {
    let chat = ChatRequest {
        model: rt.model.model.clone(),
        messages: vec![
            Message::System(format!("{REPAIR_PROMPT}\n\n{}", request.instructions)),
            Message::User(format!("The app said: {}\n\nThe message:\n{}", request.parse_error, request.text)),
        ],
        tools: Vec::new(),
        temperature: rt.model.temperature,
        max_tokens: rt.model.max_tokens,
        reasoning_effort: rt.model.reasoning_effort.clone(),
        ..ChatRequest::default()
    };
    let reply = rt.provider.complete(&chat).await.map_err(|e| e.to_string())?;
    reply
        .content
        .map(|text| text.trim().to_string())
        .filter(|text| !text.is_empty())
        .ok_or_else(|| "the model answered the repair request with nothing".to_string())
}
