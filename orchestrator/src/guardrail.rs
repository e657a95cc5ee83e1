//! The main agent's tool-use guardrail (`[orchestration].main_tool_use_guardrail = "llm_classifier"`): after a
//! turn that used no tools, a classifier model decides whether the request needed them; if it did, the turn
//! runs once more with a reminder, and if it still uses none the user gets a fixed, honest reply instead of an
//! answer made up without tools.

use anyhow::Context;
use minibot_agent::ModelSettings;
use minibot_config::Config;
use minibot_llm::{ChatProvider, ChatRequest, Message};
use std::sync::Arc;

pub const GUARDRAIL_REPLY: &str = "I could not verify or execute that action with tools in this attempt. Please \
try again, or ask me to run a specific tool.";
pub const RETRY_SUFFIX: &str = "Tool use check: your previous answer to this message used no tools, but the \
request needs them (to look something up, compute, or act). Use the appropriate tools now instead of answering \
from memory.";
const CLASSIFIER_PROMPT: &str = "You check an assistant's work. Decide whether answering the user's message \
correctly required calling one of the assistant's tools (for example current information, exact computation, \
files, or an action in the world). Reply with JSON only: {\"requires_tools\": true or false, \"reason\": \"...\"}.";

pub struct Guardrail {
    provider: Arc<dyn ChatProvider>,
    model: ModelSettings,
}

impl Guardrail {
    pub fn from_config(config: &Config) -> anyhow::Result<Option<Self>> {
        let orchestration = &config.orchestration;
        if orchestration.main_tool_use_guardrail != "llm_classifier" {
            return Ok(None);
        }
        let endpoint = config
            .llm_for(
                orchestration.main_tool_use_guardrail_provider.as_deref(),
                orchestration.main_tool_use_guardrail_model.as_deref(),
                orchestration.main_tool_use_guardrail_reasoning_effort.as_deref(),
            )
            .map_err(anyhow::Error::msg)
            .context("orchestration.main_tool_use_guardrail_provider")?;
        let provider = minibot_llm::provider_for(&endpoint)?;
        let model = ModelSettings {
            model: endpoint.model.clone(),
            temperature: None,
            max_tokens: Some(200),
            reasoning_effort: endpoint.reasoning_effort.clone(),
        };
        Ok(Some(Self { provider, model }))
    }

    /// Whether the request needed tools. A classifier that fails or answers nonsense lets the answer through.
    pub async fn requires_tools(&self, user_text: &str, answer: &str, tool_names: &[String]) -> bool {
        let request = ChatRequest {
            model: self.model.model.clone(),
            messages: vec![
                Message::System(CLASSIFIER_PROMPT.into()),
                Message::User(format!(
                    "Decide whether tools were required.\nTools available: {}\n\nUser message:\n{user_text}\n\n\
                     Assistant answer (given without tools):\n{answer}",
                    tool_names.join(", ")
                )),
            ],
            tools: Vec::new(),
            temperature: None,
            max_tokens: self.model.max_tokens,
            reasoning_effort: self.model.reasoning_effort.clone(),
            ..ChatRequest::default()
        };
        let reply = match self.provider.complete(&request).await {
            Ok(reply) => reply.content.unwrap_or_default(),
            Err(error) => {
                tracing::warn!(error = %error, "tool-use classifier failed; answer kept");
                return false;
            }
        };
        let json = reply.trim().trim_start_matches("```json").trim_start_matches("```").trim_end_matches("```");
        match serde_json::from_str::<serde_json::Value>(json.trim()) {
            Ok(value) => value.get("requires_tools").and_then(|v| v.as_bool()).unwrap_or(false),
            Err(_) => {
                tracing::warn!(reply = %reply, "tool-use classifier answered something that is not JSON; answer kept");
                false
            }
        }
    }
}
