//! Is the model provider usable: reachable, the key accepted, the model there. One free request where the API
//! allows it: `GET {base_url}/models` lists what the key may use (OpenAI and most compatible servers, Ollama,
//! vLLM, llama.cpp and LM Studio included), so it proves all three and names the alternatives when the model is
//! missing. OpenRouter lists its models without a key, so its key is checked with `GET {base_url}/key` as well.
//! A server without a model list gets a one-token chat completion instead. Anthropic (`x-api-key`) and Gemini
//! (`x-goog-api-key`, `models[].name`) list their models too, with the key in their own headers.

use super::ProbeError;
use super::http::{client, server_message, transport};
use minibot_config::{ApiFormat, LlmEndpoint};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};

/// How many of the provider's models a "no such model" error names.
const SUGGESTIONS: usize = 5;

/// Checks `endpoint` with real requests; answers the model's name as the provider spells it.
pub async fn probe(endpoint: &LlmEndpoint) -> Result<String, ProbeError> {
    if !endpoint.api_format.is_callable() {
        return Err(ProbeError::Setup(format!(
            "provider `{}` uses the `{}` API format, which this version cannot call",
            endpoint.provider,
            endpoint.api_format.as_str()
        )));
    }
    let probe = Probe::new(endpoint)?;
    // Gemini pages its list (50 by default); one large page holds every model it has.
    let models_url = match endpoint.api_format {
        ApiFormat::Google => format!("{}/models?pageSize=1000", probe.base),
        _ => format!("{}/models", probe.base),
    };
    let response = probe.get(&models_url).await?;
    let chat_shaped = matches!(endpoint.api_format, ApiFormat::OpenAi | ApiFormat::OpenRouter);
    let ids = match response {
        Answer { status: 200..=299, body } => model_ids(&body).ok_or_else(|| ProbeError::BadAnswer {
            url: probe.shown(&models_url),
            detail: "no list of models".into(),
        })?,
        Answer { status: 404 | 405, .. } if chat_shaped => return probe.complete().await,
        other => return Err(probe.failure(&models_url, other)),
    };
    let wanted = endpoint.model.strip_prefix("models/").unwrap_or(&endpoint.model);
    let Some(name) = find_model(&ids, wanted) else {
        return Err(ProbeError::ModelNotFound {
            url: probe.shown(&probe.base),
            model: endpoint.model.clone(),
            available: closest(&ids, &endpoint.model),
        });
    };
    if endpoint.api_format == ApiFormat::OpenRouter {
        let key_url = format!("{}/key", probe.base);
        match probe.get(&key_url).await? {
            Answer { status: 200..=299 | 404, .. } => {}
            other => return Err(probe.failure(&key_url, other)),
        }
    }
    Ok(name)
}

struct Probe<'a> {
    endpoint: &'a LlmEndpoint,
    client: reqwest::Client,
    base: String,
}

struct Answer {
    status: u16,
    body: String,
}

impl<'a> Probe<'a> {
    fn new(endpoint: &'a LlmEndpoint) -> Result<Self, ProbeError> {
        let mut headers = HeaderMap::new();
        for (name, value) in &endpoint.headers {
            let bad = |e: &dyn std::fmt::Display| ProbeError::Setup(format!("header `{name}` of the provider: {e}"));
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|e| bad(&e))?;
            let value = HeaderValue::from_str(value).map_err(|e| bad(&e))?;
            headers.insert(name, value);
        }
        Ok(Self { endpoint, client: client(headers)?, base: endpoint.base_url.trim_end_matches('/').to_string() })
    }

    /// A URL as messages show it: a key can sit in a configured URL (`?key=`).
    fn shown(&self, url: &str) -> String {
        self.endpoint.redactor.redact(url).into_owned()
    }

    /// The key as each API takes it: Anthropic's and Gemini's headers, else a bearer token.
    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        let key = &self.endpoint.api_key;
        match self.endpoint.api_format {
            ApiFormat::Claude => {
                let request = request.header("anthropic-version", "2023-06-01");
                if key.is_empty() { request } else { request.header("x-api-key", key) }
            }
            ApiFormat::Google if !key.is_empty() => request.header("x-goog-api-key", key),
            ApiFormat::Google => request,
            _ if key.is_empty() => request,
            _ => request.bearer_auth(key),
        }
    }

    async fn get(&self, url: &str) -> Result<Answer, ProbeError> {
        self.send(url, self.client.get(url)).await
    }

    async fn send(&self, url: &str, request: reqwest::RequestBuilder) -> Result<Answer, ProbeError> {
        let response = self.authorized(request).send().await.map_err(|e| transport(e, &self.shown(url)))?;
        let status = response.status().as_u16();
        // A model list can be long (OpenRouter's), but not endless: an error quotes only its start anyway.
        let (body, _) =
            minibot_llm::body::read_capped(response, 8 << 20).await.map_err(|e| transport(e, &self.shown(url)))?;
        Ok(Answer { status, body })
    }

    /// A refusal or any other answer that is not a success, in the server's words.
    fn failure(&self, url: &str, answer: Answer) -> ProbeError {
        let redactor = &self.endpoint.redactor;
        let message = server_message(&answer.body, &|text| redactor.redact(text).into_owned());
        let url = self.shown(url);
        match answer.status {
            401 | 403 => {
                // With no key, "refused the API key" would blame one that was never sent.
                let credential =
                    if self.endpoint.api_key.is_empty() { "request, which had no API key," } else { "API key" };
                ProbeError::Rejected { url, credential, status: answer.status, message }
            }
            status => ProbeError::Status { url, status, message },
        }
    }

    /// The fallback for a server without a model list: the smallest completion there is.
    async fn complete(&self) -> Result<String, ProbeError> {
        let url = format!("{}/chat/completions", self.base);
        let body = json!({
            "model": self.endpoint.model,
            "messages": [{ "role": "user", "content": "Reply with OK." }],
            "max_tokens": 1,
            "stream": false,
        });
        let answer = self.send(&url, self.client.post(&url).json(&body)).await?;
        if (200..300).contains(&answer.status) {
            let value: Value = serde_json::from_str(&answer.body)
                .map_err(|e| ProbeError::BadAnswer { url: self.shown(&url), detail: e.to_string() })?;
            return Ok(value["model"].as_str().filter(|m| !m.is_empty()).unwrap_or(&self.endpoint.model).to_string());
        }
        let lower = answer.body.to_ascii_lowercase();
        if matches!(answer.status, 400 | 404) && lower.contains("model") && lower.contains("not") {
            return Err(ProbeError::ModelNotFound {
                url: self.shown(&self.base),
                model: self.endpoint.model.clone(),
                available: Vec::new(),
            });
        }
        Err(self.failure(&url, answer))
    }
}

/// The `id`s of an OpenAI-style model list (`{"data": [{"id": …}, …]}`).
/// The model ids of a list: `data[].id` (OpenAI, Anthropic and compatible servers) or Gemini's
/// `models[].name` without its `models/` prefix.
fn model_ids(body: &str) -> Option<Vec<String>> {
    let value: Value = serde_json::from_str(body).ok()?;
    if let Some(data) = value.get("data").and_then(Value::as_array) {
        return Some(data.iter().filter_map(|m| m["id"].as_str()).map(str::to_string).collect());
    }
    let models = value.get("models")?.as_array()?;
    let names = models.iter().filter_map(|m| m["name"].as_str());
    Some(names.map(|name| name.strip_prefix("models/").unwrap_or(name).to_string()).collect())
}

/// The listed name of `model`: exact, or with the `:latest` tag Ollama lists untagged names under.
fn find_model(ids: &[String], model: &str) -> Option<String> {
    ids.iter().find(|id| *id == model || id.strip_suffix(":latest") == Some(model)).cloned()
}

/// The listed models most like `model`, best first.
fn closest(ids: &[String], model: &str) -> Vec<String> {
    let wanted = model.to_ascii_lowercase();
    let mut scored: Vec<(f64, &String)> = ids
        .iter()
        .map(|id| {
            let lower = id.to_ascii_lowercase();
            // A dated or tagged name (`gpt-4o-2024-08-06`, `llama3.2:3b`) holds the name asked for whole.
            let bonus = if lower.contains(&wanted) { 1.0 } else { 0.0 };
            (strsim::normalized_levenshtein(&lower, &wanted) + bonus, id)
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    scored.into_iter().take(SUGGESTIONS).map(|(_, id)| id.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// OpenRouter's shape: `GET /models` answers anyone; `GET /key` answers 401 to any key but `good-key`.
    async fn openrouter_like() -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}/api/v1", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut buffer = vec![0u8; 8192];
                let read = stream.read(&mut buffer).await.unwrap_or(0);
                let request = String::from_utf8_lossy(&buffer[..read]).to_ascii_lowercase();
                let (status, body) = if request.starts_with("get /api/v1/models ") {
                    ("200 OK", r#"{"data":[{"id":"openai/gpt-4o-mini"}]}"#)
                } else if request.contains("authorization: bearer good-key") {
                    ("200 OK", r#"{"data":{"label":"k"}}"#)
                } else {
                    ("401 Unauthorized", r#"{"error":{"message":"No auth credentials found","code":401}}"#)
                };
                let answer =
                    format!("HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
                let _ = stream.write_all(answer.as_bytes()).await;
            }
        });
        base
    }

    fn endpoint(base: &str, key: &str) -> LlmEndpoint {
        let text = format!(
            "[llm]\nprovider = \"openrouter\"\nbase_url = \"{base}\"\napi_key = \"{key}\"\nmodel = \"openai/gpt-4o-mini\"\n"
        );
        minibot_config::Config::from_toml(&text, "test.toml", ".", &|_| None).unwrap().main_llm()
    }

    #[tokio::test]
    async fn openrouters_public_model_list_does_not_pass_a_bad_key() {
        let base = openrouter_like().await;
        assert_eq!(probe(&endpoint(&base, "good-key")).await.unwrap(), "openai/gpt-4o-mini");
        let refused = probe(&endpoint(&base, "bad-key")).await.unwrap_err();
        assert_eq!(
            refused,
            ProbeError::Rejected {
                url: format!("{base}/key"),
                credential: "API key",
                status: 401,
                message: "No auth credentials found".into()
            }
        );
    }

    #[tokio::test]
    async fn a_server_that_wants_a_key_is_not_said_to_refuse_one_when_none_was_sent() {
        let base = openrouter_like().await;
        let refused = probe(&endpoint(&base, "")).await.unwrap_err();
        let text = refused.to_string();
        assert!(text.contains("refused the request, which had no API key, (HTTP 401)"), "{text}");
        let error = minibot_llm::LlmError::Unauthorized {
            url: format!("{base}/chat/completions"),
            status: 401,
            body: "No auth credentials found".into(),
            key_source: endpoint(&base, "").api_key_source,
        };
        let text = error.to_string();
        assert!(text.contains("wants an API key, and no key was sent"), "{text}");
        assert!(text.contains("set `llm.api_key`"), "{text}");
        let reply = crate::turn::error_reply(&minibot_agent::AgentError::Provider(error), false);
        assert!(reply.contains("wants an API key, and none is configured"), "{reply}");
    }

    fn ids(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn an_untagged_ollama_name_matches_its_latest_tag() {
        let listed = ids(&["llama3.2:latest", "qwen3:8b"]);
        assert_eq!(find_model(&listed, "llama3.2").as_deref(), Some("llama3.2:latest"));
        assert_eq!(find_model(&listed, "qwen3"), None);
    }

    #[test]
    fn suggestions_put_the_nearest_names_first() {
        let listed = ids(&["text-embedding-3-small", "gpt-4o", "dall-e-3", "gpt-4o-mini", "whisper-1"]);
        let best = closest(&listed, "gpt-4o-mni");
        assert_eq!(best.first().map(String::as_str), Some("gpt-4o-mini"));
        assert_eq!(best.get(1).map(String::as_str), Some("gpt-4o"));
    }

    /// Anthropic's and Gemini's model lists, each answering only with the key in its own header.
    async fn vendor_like() -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}/v1", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut buffer = vec![0u8; 8192];
                let read = stream.read(&mut buffer).await.unwrap_or(0);
                let request = String::from_utf8_lossy(&buffer[..read]).to_ascii_lowercase();
                let (status, body) =
                    if request.contains("x-api-key: ant-key") && request.contains("anthropic-version: 2023-06-01") {
                        ("200 OK", r#"{"data":[{"id":"claude-sonnet-4-5","type":"model"}],"has_more":false}"#)
                    } else if request.contains("x-goog-api-key: gem-key") && !request.contains("key=") {
                        ("200 OK", r#"{"models":[{"name":"models/gemini-2.5-flash"}]}"#)
                    } else {
                        ("401 Unauthorized", r#"{"error":{"message":"invalid x-api-key"}}"#)
                    };
                let answer =
                    format!("HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
                let _ = stream.write_all(answer.as_bytes()).await;
            }
        });
        base
    }

    fn vendor_endpoint(format: &str, base: &str, key: &str, model: &str) -> LlmEndpoint {
        let text = format!(
            "[llm]\nprovider = \"{format}\"\nbase_url = \"{base}\"\napi_key = \"{key}\"\nmodel = \"{model}\"\n"
        );
        minibot_config::Config::from_toml(&text, "test.toml", ".", &|_| None).unwrap().main_llm()
    }

    #[tokio::test]
    async fn claude_and_gemini_are_checked_with_their_own_model_lists_and_key_headers() {
        let base = vendor_like().await;
        assert_eq!(
            probe(&vendor_endpoint("claude", &base, "ant-key", "claude-sonnet-4-5")).await.unwrap(),
            "claude-sonnet-4-5"
        );
        assert_eq!(
            probe(&vendor_endpoint("google", &base, "gem-key", "models/gemini-2.5-flash")).await.unwrap(),
            "gemini-2.5-flash"
        );
        let refused = probe(&vendor_endpoint("claude", &base, "wrong", "claude-sonnet-4-5")).await.unwrap_err();
        assert!(matches!(refused, ProbeError::Rejected { status: 401, .. }), "{refused:?}");
        let missing = probe(&vendor_endpoint("google", &base, "gem-key", "gemini-9")).await.unwrap_err();
        assert!(matches!(missing, ProbeError::ModelNotFound { .. }), "{missing:?}");
    }
}
