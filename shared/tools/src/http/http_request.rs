use super::destination::{self, Classifier, DenyingResolver, DestinationDenied};
use super::html::{self, Style};
use crate::files::{ManagedRoot, sha8, write_spill};
use minibot_agent::{Tool, ToolContext, ToolError, ToolResult, excerpt};
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
    /// `deny_private_networks`: the addresses that may not be reached. The same classifier sits in the client's
    /// resolver and redirect policy.
    denied: Option<Classifier>,
}

impl HttpRequest {
    pub fn new(config: &HttpClientSection, files: Option<Arc<ManagedRoot>>) -> Result<Self, reqwest::Error> {
        Self::with_classifier(config, files, config.deny_private_networks.then(destination::internal_ranges))
    }

    /// [`Self::new`] with the address check given outright (tests put a loopback address on the allowed side).
    fn with_classifier(
        config: &HttpClientSection,
        files: Option<Arc<ManagedRoot>>,
        denied: Option<Classifier>,
    ) -> Result<Self, reqwest::Error> {
        minibot_llm::install_crypto_provider();
        // Checked at load (0 < seconds ≤ 3600); a value that still does not convert takes the default.
        let timeout = Duration::try_from_secs_f64(config.timeout_seconds.max(0.1)).unwrap_or(Duration::from_secs(10));
        let max_redirects = config.max_redirects as usize;
        let redirects = match (&denied, config.follow_redirects) {
            (_, false) => reqwest::redirect::Policy::none(),
            (None, true) => reqwest::redirect::Policy::limited(max_redirects),
            (Some(classifier), true) => destination::checked_redirects(max_redirects, Arc::clone(classifier)),
        };
        let mut builder = reqwest::Client::builder()
            .connect_timeout(timeout)
            .read_timeout(timeout)
            .redirect(redirects)
            .user_agent(concat!("minibot/", env!("CARGO_PKG_VERSION")));
        if let Some(classifier) = &denied {
            // Through a proxy the destination would be resolved and reached by the proxy, unchecked.
            builder = builder.dns_resolver(DenyingResolver::new(Arc::clone(classifier))).no_proxy();
        }
        let client = builder.build()?;
        let spill_root = files.filter(|_| config.spill_to_managed_file);
        Ok(Self { client, config: config.clone(), spill_root, timeout, denied })
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

/// A failed exchange. `url` is quoted by its start only; reqwest's own messages (which repeat the URL whole) are
/// never passed here, see [`describe`].
fn failed(url: &str, message: impl Into<String>) -> ToolError {
    ToolError::respond("http_request_failed", format!("{} ({})", message.into(), excerpt(url)))
}

fn denied(denial: &DestinationDenied, url: &str) -> ToolError {
    ToolError::respond("destination_denied", format!("request refused: {denial} ({})", excerpt(url)))
}

/// An error of the exchange: the setting's refusal as `destination_denied`, anything else as
/// `http_request_failed`. `url` is what the model asked for, `parsed` the URL requested first.
fn exchange_error(error: reqwest::Error, url: &str, parsed: &reqwest::Url) -> ToolError {
    match destination::find_denial(&error) {
        Some(denial) => denied(denial, url),
        None => failed(url, describe(error, parsed)),
    }
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
            return Err(ToolError::invalid_arguments(format!(
                "url must start with http:// or https:// (got {})",
                excerpt(&url)
            )));
        }
        let parsed = reqwest::Url::parse(&url)
            .map_err(|e| ToolError::invalid_arguments(format!("invalid url {}: {e}", excerpt(&url))))?;
        if let Some(classifier) = &self.denied {
            destination::check_url(&parsed, classifier).map_err(|denial| denied(&denial, &url))?;
        }
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
                .map_err(|_| ToolError::invalid_arguments(format!("invalid header name `{}`", excerpt(&name))))?;
            let value = HeaderValue::from_str(&value).map_err(|_| {
                ToolError::invalid_arguments(format!("invalid value for header `{}`", excerpt(name.as_str())))
            })?;
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
            let mut response = request.send().await.map_err(|e| exchange_error(e, &url, &parsed))?;
            let mut bytes = Vec::new();
            while bytes.len() < budget {
                match response.chunk().await {
                    Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
                    Ok(None) => break,
                    Err(e) => return Err(exchange_error(e, &url, &parsed)),
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

/// reqwest's Display hides the cause ("error sending request"); the chain says what went wrong. The URL reqwest
/// appends is taken off, since it can be any length: [`failed`] quotes the start of the one asked for, and a
/// redirect target is quoted the same way.
fn describe(err: reqwest::Error, asked: &reqwest::Url) -> String {
    use std::error::Error;
    let hop = err.url().filter(|url| *url != asked).map(|url| excerpt(url.as_str()));
    let is_redirect = err.is_redirect();
    let err = err.without_url();
    let mut text = err.to_string();
    if let Some(hop) = hop {
        text.push_str(&format!(" (at {hop})"));
    }
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    if is_redirect {
        text.push_str(" (too many redirects)");
    }
    text
}

#[cfg(test)]
mod tests {
    //! Redirect hops under `deny_private_networks`. A first server the check allows cannot be on loopback, so
    //! these tests use the real check with one change: 127.0.0.2 counts as public. The allowed server listens
    //! there; the one it redirects to listens on 127.0.0.1, which stays denied.

    use super::*;
    use minibot_test_support::counting_server;
    use std::net::IpAddr;
    use std::sync::atomic::Ordering;

    fn redirect_to(location: &str) -> String {
        format!("HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    }

    const SECRET: &str = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nsecret";

    fn tool(classifier: Option<Classifier>) -> HttpRequest {
        let config = HttpClientSection { enabled: true, follow_redirects: true, ..HttpClientSection::default() };
        HttpRequest::with_classifier(&config, None, classifier).unwrap()
    }

    fn all_but_127_0_0_2() -> Classifier {
        let allowed: IpAddr = "127.0.0.2".parse().unwrap();
        Arc::new(move |ip| if ip == allowed { None } else { destination::denied_range(ip) })
    }

    async fn get(tool: &HttpRequest, url: String) -> ToolResult {
        let args = Args { method: None, url, headers: None, body: None, json: None };
        tool.call(args, &ToolContext::default()).await
    }

    #[tokio::test]
    async fn the_default_section_refuses_loopback_by_address_and_by_name() {
        // Built as `register` builds it, from a section that says nothing about the check: the same classifier,
        // resolver and redirect policy as the hop tests below, without their 127.0.0.2 exception.
        let config = HttpClientSection { enabled: true, follow_redirects: true, ..HttpClientSection::default() };
        let tool = HttpRequest::new(&config, None).unwrap();
        assert!(tool.denied.is_some(), "deny_private_networks is on by default");
        let (server, reached) = counting_server("127.0.0.1", SECRET.into()).await;
        for url in [format!("http://{server}/"), format!("http://localhost:{}/", server.port())] {
            let Err(ToolError::RespondToModel { code, message }) = get(&tool, url.clone()).await else {
                panic!("{url} was fetched");
            };
            assert_eq!(code, "destination_denied", "{url}: {message}");
            assert!(message.contains("deny_private_networks = false"), "{url}: {message}");
        }
        assert_eq!(reached.load(Ordering::SeqCst), 0, "no connection to the denied address");
    }

    #[tokio::test]
    async fn a_redirect_to_a_denied_address_is_refused_at_the_hop() {
        let (inner, reached) = counting_server("127.0.0.1", SECRET.into()).await;
        let (outer, _) = counting_server("127.0.0.2", redirect_to(&format!("http://{inner}/secret"))).await;
        let url = format!("http://{outer}/");

        let Err(ToolError::RespondToModel { code, message }) = get(&tool(Some(all_but_127_0_0_2())), url.clone()).await
        else {
            panic!("the hop to {inner} was followed");
        };
        assert_eq!(code, "destination_denied");
        assert!(
            message.contains("127.0.0.1 is a loopback address") && message.contains("deny_private_networks"),
            "{message}"
        );
        assert_eq!(reached.load(Ordering::SeqCst), 0, "no connection to the denied address");

        // The same redirect without the check reaches the inner server: the refusal above was the check's.
        let out = get(&tool(None), url).await.unwrap();
        assert_eq!(out["body"], "secret");
        assert_eq!(reached.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_redirect_to_a_name_that_resolves_to_a_denied_address_is_refused() {
        let (inner, reached) = counting_server("127.0.0.1", SECRET.into()).await;
        let location = format!("http://localhost:{}/secret", inner.port());
        let (outer, visited) = counting_server("127.0.0.2", redirect_to(&location)).await;

        let Err(ToolError::RespondToModel { code, message }) =
            get(&tool(Some(all_but_127_0_0_2())), format!("http://{outer}/")).await
        else {
            panic!("the hop to {location} was followed");
        };
        assert_eq!(code, "destination_denied");
        assert!(message.contains("localhost resolves to ") && message.contains("loopback"), "{message}");
        assert_eq!(visited.load(Ordering::SeqCst), 1);
        assert_eq!(reached.load(Ordering::SeqCst), 0, "no connection to the denied address");
    }
}
