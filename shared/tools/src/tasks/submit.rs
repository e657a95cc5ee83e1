use super::{Delivery, TaskRequest, TaskService, empty_to_none};
use minibot_agent::{Tool, ToolContext, ToolError, ToolResult};
use minibot_config::Config;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// Longest prompt a task takes; anything longer belongs in a file the task reads.
const MAX_PROMPT_CHARS: usize = 32_000;

/// `spawn_task` or `delegate`: the same arguments, different delivery of the result.
pub struct Submit {
    delivery: Delivery,
    service: Arc<dyn TaskService>,
    /// Workers load the same config, so a provider it cannot serve no worker can.
    config: Arc<Config>,
}

impl Submit {
    pub fn new(delivery: Delivery, service: Arc<dyn TaskService>, config: Arc<Config>) -> Self {
        Self { delivery, service, config }
    }

    /// Refuses a `model_provider` no worker could call, before anything is queued.
    fn check_provider(&self, provider: &str) -> Result<(), ToolError> {
        let Err(why) = self.config.provider_for_task(provider) else {
            return Ok(());
        };
        let available: Vec<String> = self.config.available_providers().into_iter().map(|p| p.name).collect();
        let available = if available.is_empty() { "none".to_string() } else { available.join(", ") };
        Err(ToolError::respond(
            "provider_unavailable",
            format!(
                "model_provider `{provider}` cannot run a task: {why}. Available providers: {available}; or leave \
                 model_provider empty for the default"
            ),
        ))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmitArgs {
    prompt: String,
    #[serde(default)]
    agent_name: Option<String>,
    #[serde(default)]
    context_json: Option<String>,
    /// MiniBot's older name: an object instead of JSON text.
    #[serde(default)]
    context: Option<Value>,
    #[serde(default)]
    timeout_seconds: Option<i64>,
    #[serde(default)]
    model_provider: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    reasoning_effort: Option<String>,
}

impl Tool for Submit {
    type Args = SubmitArgs;

    fn name(&self) -> &str {
        match self.delivery {
            Delivery::Spawn => "spawn_task",
            Delivery::Delegate => "delegate",
        }
    }

    fn description(&self) -> String {
        let mut text = match self.delivery {
            Delivery::Spawn => {
                "Start a background task whose answer goes straight to the user when it finishes. \
                Use it for long work the user does not need you to post-process. Returns a task id at once."
            }
            Delivery::Delegate => {
                "Hand a task to a background worker; its result comes back to you as a new \
                message, and you then answer the user. Use it when you need to check or combine the result. \
                Returns a task id at once; do not wait or poll for it."
            }
        }
        .to_string();
        let roster = self.service.roster();
        if !roster.is_empty() {
            text.push_str(" Specialists (agent_name): ");
            let names: Vec<String> = roster.iter().map(|(n, _)| n.clone()).collect();
            text.push_str(&names.join(", "));
            text.push_str("; leave agent_name empty for a general worker.");
        }
        text
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "prompt": { "type": "string", "description": "Everything the worker needs to know: it sees nothing else." },
                "agent_name": { "type": ["string", "null"], "description": "A specialist's exact name, or null for a general worker." },
                "context_json": { "type": ["string", "null"], "description": "Optional JSON object text with extra data." },
                "timeout_seconds": { "type": ["integer", "null"], "minimum": 1 },
                "model_provider": { "type": ["string", "null"], "description": "A provider name from fetch_agent_info's available_providers, or null for the default." },
                "model": { "type": ["string", "null"] },
                "reasoning_effort": { "type": ["string", "null"] }
            },
            "required": ["prompt"],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: SubmitArgs, ctx: &ToolContext) -> ToolResult {
        let prompt = args.prompt.trim().to_string();
        if prompt.is_empty() {
            return Err(ToolError::invalid_arguments("prompt must not be empty"));
        }
        if prompt.chars().count() > MAX_PROMPT_CHARS {
            return Err(ToolError::invalid_arguments(format!(
                "prompt is longer than {MAX_PROMPT_CHARS} characters; put the material in a file and point to it"
            )));
        }
        let context_json = match (empty_to_none(args.context_json), args.context) {
            (Some(text), _) => match serde_json::from_str::<Value>(&text) {
                Ok(Value::Object(_)) => Some(text),
                _ => return Err(ToolError::invalid_arguments("context_json must be the text of a JSON object")),
            },
            (None, Some(Value::Object(map))) => Some(Value::Object(map).to_string()),
            (None, Some(Value::Null) | None) => None,
            (None, Some(_)) => return Err(ToolError::invalid_arguments("context must be a JSON object")),
        };
        let timeout_seconds = match args.timeout_seconds {
            None => None,
            Some(t) if t >= 1 => Some(u64::try_from(t).unwrap_or(u64::MAX)),
            Some(_) => return Err(ToolError::invalid_arguments("timeout_seconds must be at least 1")),
        };
        let model_provider = empty_to_none(args.model_provider);
        if let Some(provider) = &model_provider {
            self.check_provider(provider)?;
        }
        let request = TaskRequest {
            delivery: self.delivery,
            prompt,
            agent_name: empty_to_none(args.agent_name),
            context_json,
            timeout_seconds,
            model_provider,
            model: empty_to_none(args.model),
            reasoning_effort: empty_to_none(args.reasoning_effort),
        };
        self.service.submit(request, ctx).await
    }
}
