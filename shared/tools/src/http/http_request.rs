use super::html::{self, Style};
use crate::files::{ManagedRoot, sha8, write_spill};
use minibot_agent::{Tool, ToolContext, ToolError, ToolResult};
use minibot_config::HttpClientSection;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Response headers shown to the model; the rest are noise for it.
const MAX_HEADERS: usize = 10;
const METHODS: &[&str] = &["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"];

pub struct HttpRequest {
    client: reqwest::Client,
    config: HttpClientSection,
    /// Where long bodies are saved; `None` when spill is off or there is no file storage.
    spill_root: Option<Arc<ManagedRoot>>,
    timeout: Duration,
}

impl HttpRequest {
    pub fn new(config: &HttpClientSection, files: Option<Arc<ManagedRoot>>) -> Result<Self, reqwest::Error> {
        minibot_llm::install_crypto_provider();
        let timeout = Duration::from_secs_f64(config.timeout_seconds.max(0.1));
        let redirects = if config.follow_redirects {
            reqwest::redirect::Policy::limited(config.max_redirects as usize)
        } else {
            reqwest::redirect::Policy::none()
        };
        let client = reqwest::Client::builder()
            .connect_timeout(timeout)
            .read_timeout(timeout)
            .redirect(redirects)
            .user_agent(concat!("minibot/", env!("CARGO_PKG_VERSION")))
            .build()?;
        let spill_root = files.filter(|_| config.spill_to_managed_file);
        Ok(Self { client, config: config.clone(), spill_root, timeout })
    }

    /// Bytes read from the wire at most: enough for every later use, plus one to detect truncation.
    fn read_budget(&self) -> usize {
        let c = &self.config;
        let spill = if self.spill_root.is_some() { c.max_spill_bytes.bytes() } else { 0 };
        c.max_bytes.bytes().max(c.max_parse_bytes.bytes()).max(spill) as usize + 1
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    #[serde(default)]
    method: Option<String>,
    url: String,
    #[serde(default)]
    headers: Option<BTreeMap<String, String>>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    json: Option<String>,
}

fn failed(url: &str, message: impl Into<String>) -> ToolError {
    ToolError::respond("http_request_failed", format!("{} ({url})", message.into()))
}

impl Tool for HttpRequest {
    type Args = Args;

    fn name(&self) -> &str {
        "http_request"
    }

    fn description(&self) -> String {
        "Make an HTTP(S) request. HTML is returned as compact text (headings, links as [text](url), tables, forms \
         and inputs); JSON is returned unchanged. Long bodies are truncated or saved to a managed file."
            .into()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "method": { "type": ["string", "null"], "enum": ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", null] },
                "url": { "type": "string", "description": "http:// or https:// URL." },
                "headers": { "type": ["object", "null"], "additionalProperties": { "type": "string" } },
                "body": { "type": ["string", "null"], "description": "Raw request body." },
                "json": { "type": ["string", "null"], "description": "JSON request body, as a string; not with body." }
            },
            "required": ["url"],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, _ctx: &ToolContext) -> ToolResult {
        let url = args.url.trim().to_string();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(ToolError::invalid_arguments("url must start with http:// or https://"));
        }
        let parsed =
            reqwest::Url::parse(&url).map_err(|e| ToolError::invalid_arguments(format!("invalid url: {e}")))?;
        let method = args.method.as_deref().unwrap_or("GET").to_ascii_uppercase();
        if !METHODS.contains(&method.as_str()) {
            return Err(ToolError::invalid_arguments(format!("method must be one of {}", METHODS.join(", "))));
        }
        if args.body.is_some() && args.json.is_some() {
            return Err(ToolError::invalid_arguments("pass either body or json, not both"));
        }
        let method = reqwest::Method::from_bytes(method.as_bytes())
            .map_err(|_| ToolError::invalid_arguments("invalid method"))?;
        let mut headers = HeaderMap::new();
        for (name, value) in args.headers.unwrap_or_default() {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| ToolError::invalid_arguments(format!("invalid header name `{name}`")))?;
            let value = HeaderValue::from_str(&value)
                .map_err(|_| ToolError::invalid_arguments(format!("invalid value for header `{name}`")))?;
            headers.insert(name, value);
        }
        let mut request = self.client.request(method.clone(), parsed.clone()).headers(headers.clone());
        if let Some(text) = args.json {
            serde_json::from_str::<Value>(&text)
                .map_err(|e| ToolError::invalid_arguments(format!("json is not valid JSON: {e}")))?;
            if !headers.contains_key(CONTENT_TYPE) {
                request = request.header(CONTENT_TYPE, "application/json");
            }
            request = request.body(text);
        } else if let Some(body) = args.body {
            request = request.body(body);
        }

        let budget = self.read_budget();
        let exchange = async {
            let mut response = request.send().await.map_err(|e| failed(&url, describe(&e)))?;
            let mut bytes = Vec::new();
            while bytes.len() < budget {
                match response.chunk().await {
                    Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
                    Ok(None) => break,
                    Err(e) => return Err(failed(&url, describe(&e))),
                }
            }
            Ok((response, bytes))
        };
        // Per-read timeouts do not bound a server that trickles bytes forever; this does.
        let (response, mut bytes) = tokio::time::timeout(self.timeout * 3, exchange)
            .await
            .map_err(|_| failed(&url, format!("request took longer than {} s", (self.timeout * 3).as_secs_f64())))??;
        let over_budget = bytes.len() >= budget;
        bytes.truncate(budget - 1);
        Ok(Value::Object(self.shape(&response, bytes, over_budget, method == reqwest::Method::HEAD)))
    }
}

impl HttpRequest {
    fn shape(&self, response: &reqwest::Response, bytes: Vec<u8>, over_budget: bool, head: bool) -> Map<String, Value> {
        let c = &self.config;
        let content_type = response.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        let mime = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
        let is_json = mime == "application/json" || mime.ends_with("+json");
        let is_html = mime == "text/html" || mime == "application/xhtml+xml";
        let spilling = self.spill_root.is_some();
        let decode_limit = if is_html {
            c.max_parse_bytes.bytes()
        } else if spilling {
            c.max_spill_bytes.bytes().max(c.max_bytes.bytes())
        } else {
            c.max_bytes.bytes()
        } as usize;
        let prefix = &bytes[..bytes.len().min(decode_limit)];
        let decoded = if is_latin1(&content_type) {
            prefix.iter().map(|&b| char::from(b)).collect()
        } else {
            decode_prefix(prefix)
        };
        let mode = c.response_processing_mode.as_str();
        let (processed, processor) = if head || mode == "none" || is_json {
            (decoded, "none")
        } else if is_html && mode == "text" {
            (html::render(&decoded, Style::Plain), "html_text")
        } else if is_html {
            (html::render(&decoded, Style::Compact), "html_compact")
        } else if c.normalize_whitespace {
            (html::collapse_lines(&decoded), "plain")
        } else {
            (decoded, "plain")
        };
        let mut out = Map::new();
        out.insert("ok".into(), json!(true));
        out.insert("status".into(), json!(response.status().as_u16()));
        out.insert("url".into(), json!(response.url().as_str()));
        let headers: Map<String, Value> = response
            .headers()
            .iter()
            .take(MAX_HEADERS)
            .map(|(k, v)| (k.as_str().to_string(), json!(String::from_utf8_lossy(v.as_bytes()))))
            .collect();
        out.insert("headers".into(), Value::Object(headers));
        out.insert("content_type".into(), json!(content_type));
        out.insert("processor_used".into(), json!(processor));
        let truncated = over_budget || bytes.len() as u64 > c.max_bytes.bytes();
        out.insert("truncated".into(), json!(truncated));
        let chars = processed.chars().count();
        let spill = match &self.spill_root {
            Some(root) if chars as u64 > c.spill_after_chars => {
                let raw = &bytes[..bytes.len().min(c.max_spill_bytes.bytes() as usize)];
                let prefix = spill_prefix(response.url(), raw);
                let suffix = format!(".{}", extension(&mime));
                write_spill(root, &c.spill_subdir, &prefix, &suffix, raw).ok().map(|path| (path, raw.len()))
            }
            _ => None,
        };
        match spill {
            Some((path, written)) => {
                let preview: String = processed.chars().take(c.spill_preview_chars as usize).collect();
                out.insert("body".into(), json!(preview));
                out.insert("body_storage".into(), json!("managed_file"));
                out.insert("body_file_path".into(), json!(path.display()));
                out.insert("body_file_absolute_path".into(), json!(path.absolute.display().to_string()));
                out.insert("body_file_bytes_written".into(), json!(written));
                out.insert(
                    "body_notice".into(),
                    json!(format!(
                        "The body ({chars} characters after processing) is longer than {}; the raw response was \
                         saved to body_file_path. Read it with grep, code_read or read_file.",
                        c.spill_after_chars
                    )),
                );
                out.insert("truncated_chars".into(), json!(chars.saturating_sub(c.spill_preview_chars as usize)));
            }
            None => {
                let cap = c.max_chars.unwrap_or(c.max_bytes.bytes()) as usize;
                let body: String = processed.chars().take(cap).collect();
                out.insert("body".into(), json!(body));
                out.insert("body_storage".into(), json!("inline"));
                out.insert("body_file_path".into(), Value::Null);
                out.insert("body_file_absolute_path".into(), Value::Null);
                out.insert("body_file_bytes_written".into(), Value::Null);
                let cut = chars.saturating_sub(cap);
                out.insert(
                    "body_notice".into(),
                    if cut > 0 {
                        json!(format!("The body was cut to {cap} characters ({cut} more not shown)."))
                    } else if truncated {
                        json!(format!(
                            "The response is larger than {} bytes; only its start is shown.",
                            c.max_bytes.bytes()
                        ))
                    } else {
                        Value::Null
                    },
                );
                out.insert("truncated_chars".into(), json!(cut));
            }
        }
        out
    }
}

/// Single-byte Western charsets, common on older sites; every byte maps straight to the code point of the same
/// value (exact for ISO-8859-1, close enough for windows-1252 text).
fn is_latin1(content_type: &str) -> bool {
    let lower = content_type.to_ascii_lowercase();
    ["charset=iso-8859-1", "charset=latin1", "charset=windows-1252", "charset=\"iso-8859-1\""]
        .iter()
        .any(|c| lower.contains(c))
}

/// UTF-8 with invalid bytes replaced, dropping a character the cut split at the end.
fn decode_prefix(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.to_string(),
        Err(err) if err.error_len().is_none() => String::from_utf8_lossy(&bytes[..err.valid_up_to()]).into_owned(),
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    }
}

/// `<host>-<last path segment>-<sha8>-`, reduced to file-name-safe characters.
fn spill_prefix(url: &reqwest::Url, raw: &[u8]) -> String {
    let host = safe_name(url.host_str().unwrap_or("host"));
    let name = url.path_segments().and_then(|mut s| s.rfind(|p| !p.is_empty())).unwrap_or("index");
    format!("{host}-{}-{}-", safe_name(name), sha8(raw))
}

fn safe_name(text: &str) -> String {
    let cleaned: String = text
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '_' { c } else { '_' })
        .take(40)
        .collect();
    let cleaned = cleaned.trim_matches('.').to_string();
    if cleaned.is_empty() { "x".into() } else { cleaned }
}

fn extension(mime: &str) -> &'static str {
    match mime {
        "text/html" | "application/xhtml+xml" => "html",
        m if m == "application/json" || m.ends_with("+json") => "json",
        "text/csv" => "csv",
        "application/xml" | "text/xml" => "xml",
        m if m.starts_with("text/") => "txt",
        _ => "bin",
    }
}

/// reqwest's Display hides the cause ("error sending request"); the chain says what went wrong.
fn describe(err: &reqwest::Error) -> String {
    use std::error::Error;
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    if err.is_redirect() {
        text.push_str(" (too many redirects)");
    }
    text
}
