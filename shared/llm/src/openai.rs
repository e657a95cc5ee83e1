//! OpenAI Chat Completions (`POST {base_url}/chat/completions`): OpenAI, OpenRouter, Ollama, vLLM, llama.cpp and
//! every other server that speaks the same shape.

use crate::retry::RetryPolicy;
use crate::types::{ChatRequest, ChatResponse, ContentPart, Message, ToolCall, Usage};
use crate::{ChatProvider, LlmError, Result};
use futures_util::future::BoxFuture;
use minibot_config::LlmEndpoint;
use minibot_vault::Redactor;
use serde_json::{Value, json};
use std::time::Duration;

/// The most of a response read: far above any real answer, far below what would hurt the process.
const MAX_RESPONSE_BYTES: usize = 16 << 20;

/// Bodies quoted in errors are cut to this many characters; a provider's HTML error page is no use in full.
const ERROR_BODY_CHARS: usize = 300;

pub struct OpenAiChat {
    client: reqwest::Client,
    url: String,
    api_key: String,
    retry: RetryPolicy,
    timeout: Duration,
    connect_timeout: Duration,
    /// Where the API key came from (`llm.api_key`, `OPENAI_API_KEY`, …), for the message of a rejected key.
    key_source: String,
    /// Secret values never leave in a request body or come back in an error: a tool result or a message that
    /// carries one is masked before it is sent, and provider text quoted in an error is masked before it is cut.
    /// The config's whole set ([`minibot_config::Config::redactor`]): the vault's values and password and every
    /// configured credential, this endpoint's own key included (a server may echo the key it rejects, and a model
    /// may repeat a key that some tool printed).
    redactor: Redactor,
}

impl OpenAiChat {
    pub fn new(endpoint: &LlmEndpoint) -> Result<Self> {
        crate::install_crypto_provider();
        let mut headers = reqwest::header::HeaderMap::new();
        for (name, value) in &endpoint.headers {
            let name = reqwest::header::HeaderName::from_bytes(name.as_bytes()).map_err(|e| LlmError::BadRequest {
                url: endpoint.base_url.clone(),
                status: 0,
                body: format!("header `{name}`: {e}"),
            })?;
            let value = reqwest::header::HeaderValue::from_str(value).map_err(|e| LlmError::BadRequest {
                url: endpoint.base_url.clone(),
                status: 0,
                body: format!("header `{name}`: {e}"),
            })?;
            headers.insert(name, value);
        }
        let client = reqwest::Client::builder()
            .default_headers(headers)
            .connect_timeout(endpoint.connect_timeout)
            .timeout(endpoint.request_timeout)
            .user_agent(concat!("minibot/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| LlmError::Connect { url: endpoint.base_url.clone(), detail: error_chain(&e) })?;
        Ok(Self {
            client,
            url: format!("{}/chat/completions", endpoint.base_url),
            api_key: endpoint.api_key.clone(),
            retry: RetryPolicy { attempts: endpoint.retry_attempts + 1, base: endpoint.retry_delay },
            timeout: endpoint.request_timeout,
            connect_timeout: endpoint.connect_timeout,
            key_source: endpoint.api_key_source.clone(),
            redactor: endpoint.redactor.clone(),
        })
    }

    async fn send_once(&self, body: &[u8], model: &str) -> Result<ChatResponse> {
        let mut request =
            self.client.post(&self.url).header(reqwest::header::CONTENT_TYPE, "application/json").body(body.to_vec());
        if !self.api_key.is_empty() {
            request = request.bearer_auth(&self.api_key);
        }
        let response = request.send().await.map_err(|e| self.transport_error(&e))?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .and_then(|secs| Duration::try_from_secs_f64(secs).ok());
        let (text, cut) =
            crate::body::read_capped(response, MAX_RESPONSE_BYTES).await.map_err(|e| self.transport_error(&e))?;
        if !(200..300).contains(&status) {
            let url = self.shown_url();
            let call = Call { url: &url, model, key_source: &self.key_source, redactor: &self.redactor };
            return Err(classify_status(status, retry_after, &text, &call));
        }
        if cut {
            return Err(LlmError::InvalidResponse(format!(
                "{} sent more than {} MiB; the rest was not read",
                self.shown_url(),
                MAX_RESPONSE_BYTES >> 20
            )));
        }
        parse_response(&text, &self.redactor)
    }

    /// The URL as messages show it: a key can sit in a configured URL (`?key=`).
    fn shown_url(&self) -> String {
        self.redactor.redact(&self.url).into_owned()
    }

    fn transport_error(&self, error: &reqwest::Error) -> LlmError {
        let url = self.shown_url();
        if error.is_timeout() {
            let (after, setting) = if error.is_connect() {
                (self.connect_timeout, crate::error::CONNECT_SETTING)
            } else {
                (self.timeout, "request_timeout_seconds")
            };
            return LlmError::Timeout { url, after: Some(after), setting };
        }
        let host = reqwest::Url::parse(&self.url)
            .ok()
            .and_then(|u| Some(format!("{}:{}", u.host_str()?, u.port_or_known_default()?)))
            .unwrap_or_else(|| url.clone());
        // reqwest's message is also a cause (a body cut off mid-read); past the connection, keep its whole chain.
        let detail = if error.is_connect() { crate::cause::describe(error, &host) } else { error_chain(error) };
        LlmError::Connect { url, detail: self.redactor.redact(&detail).into_owned() }
    }
}

impl ChatProvider for OpenAiChat {
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, Result<ChatResponse>> {
        Box::pin(async move {
            let mut body = request_body(request);
            redact_messages(&self.redactor, &mut body);
            let body = body.to_string().into_bytes();
            let mut retry = 0;
            loop {
                match self.send_once(&body, &request.model).await {
                    Ok(response) => return Ok(response),
                    Err(error) if error.is_retryable() && retry + 1 < self.retry.attempts => {
                        let delay = self.retry.delay(retry, &error);
                        tracing::warn!(error = %error, retry = retry + 1, delay_ms = delay.as_millis() as u64, "provider call failed; retrying");
                        tokio::time::sleep(delay).await;
                        retry += 1;
                    }
                    Err(error) => return Err(error),
                }
            }
        })
    }
}

/// Masks secret values in what the conversation says (message contents and tool-call arguments), never in the
/// request's structure: a short vault value must not turn a role, a model name or a number into `***`.
fn redact_messages(redactor: &Redactor, body: &mut Value) {
    if redactor.is_empty() {
        return;
    }
    let Some(messages) = body.get_mut("messages").and_then(Value::as_array_mut) else { return };
    for message in messages {
        if let Some(content) = message.get_mut("content") {
            match content {
                Value::Array(parts) => {
                    for part in parts {
                        if let Some(text) = part.get_mut("text") {
                            redactor.redact_json(text);
                        }
                    }
                }
                other => redactor.redact_json(other),
            }
        }
        if let Some(calls) = message.get_mut("tool_calls").and_then(Value::as_array_mut) {
            for call in calls {
                if let Some(arguments) = call.pointer_mut("/function/arguments") {
                    redactor.redact_json(arguments);
                }
            }
        }
    }
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

/// Provider text as an error quotes it: secrets masked, then cut. Masking comes first so a cut through a key
/// cannot leave its start readable.
/// A JSON body is read first, so a key the server escaped (`\/`, `\u0041`) is matched in its plain form.
fn quote(redactor: &Redactor, text: &str) -> String {
    let unescaped = redactor.redact_json_text(text);
    cut(&redactor.redact(&unescaped))
}

fn cut(text: &str) -> String {
    let trimmed = text.trim();
    match trimmed.char_indices().nth(ERROR_BODY_CHARS) {
        Some((index, _)) => format!("{}…", &trimmed[..index]),
        None => trimmed.to_string(),
    }
}

/// What a failed call was, for the error that reports it.
struct Call<'a> {
    url: &'a str,
    model: &'a str,
    key_source: &'a str,
    redactor: &'a Redactor,
}

fn classify_status(status: u16, retry_after: Option<Duration>, body: &str, call: &Call<'_>) -> LlmError {
    let lower = body.to_ascii_lowercase();
    let text = quote(call.redactor, &provider_text(body));
    let (url, status_body) = (call.url.to_string(), text.clone());
    match status {
        429 if lower.contains("insufficient_quota") => LlmError::Quota { status, body: text },
        429 => LlmError::RateLimited { retry_after, body: text },
        402 => LlmError::Quota { status, body: text },
        401 | 403 => LlmError::Unauthorized { url, status, body: text, key_source: call.key_source.into() },
        408 => LlmError::Timeout { url, after: None, setting: "request_timeout_seconds" },
        400 | 413 if lower.contains("context_length") || lower.contains("maximum context length") => {
            LlmError::ContextLength(text)
        }
        400 | 404 | 422 if names_missing_model(&lower, status) => {
            LlmError::ModelNotFound { url, model: call.model.into(), status, body: text }
        }
        500..=599 => LlmError::Server { url, status, body: status_body },
        _ => LlmError::BadRequest { url, status, body: status_body },
    }
}

/// Whether an error body says the requested model does not exist: OpenAI's `model_not_found`, Ollama's "model
/// … not found", OpenRouter's "not a valid model ID", vLLM's "The model `x` does not exist". A 404 that names a
/// model counts; a bare 404 is a wrong URL.
fn names_missing_model(lower: &str, status: u16) -> bool {
    let said = ["model_not_found", "not a valid model", "no such model", "unknown model", "model not found"]
        .iter()
        .any(|phrase| lower.contains(phrase));
    let missing = lower.contains("not found") || lower.contains("not exist");
    said || (lower.contains("model") && missing) || (status == 404 && lower.contains("model"))
}

/// The provider's own words from an error body: `error.message` (OpenAI and most servers), `error` as text
/// (Ollama), `message` or `detail`; the body itself when it is none of those.
fn provider_text(body: &str) -> String {
    let Ok(value) = serde_json::from_str::<Value>(body) else { return body.to_string() };
    let error = value.get("error");
    let said = error
        .and_then(|e| e.get("message"))
        .or_else(|| error.filter(|e| e.is_string()))
        .or_else(|| value.get("message"))
        .or_else(|| value.get("detail"))
        .and_then(Value::as_str);
    said.map_or_else(|| body.to_string(), str::to_string)
}

pub(crate) fn request_body(request: &ChatRequest) -> Value {
    let messages: Vec<Value> = request.messages.iter().map(message_json).collect();
    let mut body = json!({ "model": request.model, "messages": messages, "stream": false });
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({ "type": "function", "function": {
                    "name": tool.name, "description": tool.description, "parameters": tool.parameters } })
            })
            .collect();
        body["tools"] = Value::Array(tools);
    }
    if let Some(temperature) = request.temperature {
        body["temperature"] = json!(temperature);
    }
    if let Some(max_tokens) = request.max_tokens {
        body["max_tokens"] = json!(max_tokens);
    }
    if let Some(effort) = &request.reasoning_effort {
        body["reasoning_effort"] = json!(effort);
    }
    body
}

fn message_json(message: &Message) -> Value {
    match message {
        Message::System(text) => json!({ "role": "system", "content": text }),
        Message::User(text) => json!({ "role": "user", "content": text }),
        Message::UserParts(parts) => {
            let parts: Vec<Value> = parts
                .iter()
                .map(|part| match part {
                    ContentPart::Text(text) => json!({ "type": "text", "text": text }),
                    ContentPart::ImageUrl(url) => json!({ "type": "image_url", "image_url": { "url": url } }),
                })
                .collect();
            json!({ "role": "user", "content": parts })
        }
        Message::Assistant { content, tool_calls } => {
            let mut value = json!({ "role": "assistant", "content": content });
            if !tool_calls.is_empty() {
                value["tool_calls"] = tool_calls
                    .iter()
                    .map(|call| {
                        json!({ "id": call.id, "type": "function",
                                "function": { "name": call.name, "arguments": call.arguments } })
                    })
                    .collect();
            }
            value
        }
        Message::Tool { call_id, name, content } => {
            json!({ "role": "tool", "tool_call_id": call_id, "name": name, "content": content })
        }
    }
}

/// Parses a 2xx body; provider text quoted in an error is masked with `redactor`.
pub(crate) fn parse_response(text: &str, redactor: &Redactor) -> Result<ChatResponse> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| LlmError::InvalidResponse(format!("{e}; body starts with {:?}", quote(redactor, text))))?;
    if value.get("error").is_some_and(|e| !e.is_null()) {
        let said = quote(redactor, &provider_text(&value.to_string()));
        return Err(LlmError::Server { url: String::from("the provider"), status: 200, body: said });
    }
    let choice = value
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|choices| choices.first())
        .ok_or(LlmError::EmptyResponse)?;
    let message = choice.get("message").ok_or_else(|| LlmError::InvalidResponse("choice without a message".into()))?;
    let content = message.get("content").and_then(Value::as_str).map(str::to_string);
    let reasoning = ["reasoning_content", "reasoning"]
        .iter()
        .find_map(|key| message.get(*key).and_then(Value::as_str))
        .map(str::to_string);
    let mut tool_calls = Vec::new();
    if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
        for (index, call) in calls.iter().enumerate() {
            let function = call.get("function").unwrap_or(&Value::Null);
            let name = function.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
            // Most servers send the arguments as a JSON string; a few send the object itself.
            let arguments = match function.get("arguments") {
                Some(Value::String(text)) => text.clone(),
                Some(Value::Null) | None => String::from("{}"),
                Some(other) => other.to_string(),
            };
            let id = call
                .get("id")
                .and_then(Value::as_str)
                .filter(|id| !id.is_empty())
                .map_or_else(|| format!("call_{index}"), str::to_string);
            tool_calls.push(ToolCall { id, name, arguments });
        }
    }
    let usage = value.get("usage").map(|u| {
        let get = |key: &str| u.get(key).and_then(Value::as_u64).unwrap_or(0);
        let (prompt, completion) = (get("prompt_tokens"), get("completion_tokens"));
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: u.get("total_tokens").and_then(Value::as_u64).unwrap_or(prompt + completion),
        }
    });
    Ok(ChatResponse {
        content,
        reasoning,
        tool_calls,
        usage: usage.unwrap_or_default(),
        finish_reason: choice.get("finish_reason").and_then(Value::as_str).map(str::to_string),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_parallel_tool_calls_and_usage() {
        let body = r#"{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[
            {"id":"a","type":"function","function":{"name":"x","arguments":"{\"n\":1}"}},
            {"id":"b","type":"function","function":{"name":"y","arguments":{"n":2}}}]},
            "finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":5}}"#;
        let response = parse_response(body, &Redactor::default()).expect("parses");
        assert_eq!(response.tool_calls.len(), 2);
        assert_eq!(response.tool_calls[1].arguments, r#"{"n":2}"#);
        assert_eq!(response.usage.total_tokens, 15);
    }

    #[test]
    fn secrets_are_masked_in_contents_and_arguments_only() {
        let redactor = minibot_vault::Redactor::from_values(["user", "s3cr3t-value"]);
        let mut body = json!({
            "model": "user",
            "max_tokens": 4000,
            "messages": [
                { "role": "user", "content": "my key is s3cr3t-value" },
                { "role": "assistant", "content": null, "tool_calls": [
                    { "id": "1", "type": "function", "function": { "name": "bash", "arguments": "{\"cmd\":\"echo s3cr3t-value\"}" } }
                ] },
                { "role": "user", "content": [{ "type": "text", "text": "s3cr3t-value" },
                    { "type": "image_url", "image_url": { "url": "data:image/png;base64,s3cr3t-value" } }] }
            ]
        });
        redact_messages(&redactor, &mut body);
        assert_eq!(body["model"], "user");
        assert_eq!(body["messages"][0]["role"], "user");
        assert_eq!(body["messages"][0]["content"], "my key is ***");
        assert_eq!(body["messages"][1]["tool_calls"][0]["function"]["arguments"], "{\"cmd\":\"echo ***\"}");
        assert_eq!(body["messages"][2]["content"][0]["text"], "***");
        assert_eq!(body["messages"][2]["content"][1]["image_url"]["url"], "data:image/png;base64,s3cr3t-value");
    }

    #[test]
    fn garbage_is_an_invalid_response() {
        let none = Redactor::default();
        assert!(matches!(parse_response("<html>oops", &none), Err(LlmError::InvalidResponse(_))));
        assert!(matches!(parse_response("{\"choices\":[]}", &none), Err(LlmError::EmptyResponse)));
    }

    #[test]
    fn statuses_are_classified() {
        let redactor = Redactor::default();
        let none =
            Call { url: "http://x/v1/chat/completions", model: "m", key_source: "llm.api_key", redactor: &redactor };
        assert!(classify_status(503, None, "", &none).is_retryable());
        assert!(!classify_status(401, None, "", &none).is_retryable());
        assert!(matches!(classify_status(429, None, "insufficient_quota", &none), LlmError::Quota { .. }));
        assert!(matches!(
            classify_status(400, None, "This model's maximum context length is 8192", &none),
            LlmError::ContextLength(_)
        ));
    }

    #[test]
    fn a_missing_model_is_told_apart_from_a_wrong_url() {
        let redactor = Redactor::default();
        let call = Call { url: "http://x/v1/chat/completions", model: "llama9", key_source: "k", redactor: &redactor };
        let ollama = r#"{"error":"model \"llama9\" not found, try pulling it first"}"#;
        let openrouter = r#"{"error":{"message":"llama9 is not a valid model ID","code":400}}"#;
        for (status, body) in [(404, ollama), (400, openrouter)] {
            let error = classify_status(status, None, body, &call);
            assert!(matches!(error, LlmError::ModelNotFound { .. }), "{status} {body}: {error:?}");
            let text = error.to_string();
            assert!(text.contains("model `llama9`") && text.contains("http://x/v1/chat/completions"), "{text}");
            assert!(!text.contains("{\""), "the provider's words, not its JSON: {text}");
        }
        let wrong_url = classify_status(404, None, "404 page not found", &call).to_string();
        assert!(wrong_url.contains("check [llm] base_url"), "{wrong_url}");
        assert!(!wrong_url.contains("model `"), "{wrong_url}");
    }
}
