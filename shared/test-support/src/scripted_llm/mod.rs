use http_body_util::{BodyExt, Either, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;

mod anthropic;
mod gemini;
mod responses;

/// One reply of the model.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A final text answer.
    Text(String),
    /// Tool calls: (name, arguments as JSON text).
    ToolCalls(Vec<(String, String)>),
    /// An HTTP error status with a body.
    Status(u16, String),
    /// A 200 response whose body is this raw text.
    Raw(String),
}

impl Reply {
    pub fn text(text: &str) -> Self {
        Self::Text(text.into())
    }

    /// One tool call with JSON arguments.
    pub fn tool(name: &str, arguments: Value) -> Self {
        Self::ToolCalls(vec![(name.into(), arguments.to_string())])
    }

    /// Several tool calls in one response; arguments given as raw text (may be invalid JSON on purpose).
    pub fn tools_raw(calls: &[(&str, &str)]) -> Self {
        Self::ToolCalls(calls.iter().map(|(n, a)| ((*n).into(), (*a).into())).collect())
    }
}

/// The replies for one conversation turn, keyed by the text of the user message.
#[derive(Debug, Clone)]
pub struct Script {
    pub user_message: String,
    pub replies: Vec<Reply>,
    /// Replies sent before the script proper, one per request (for example errors to be retried).
    pub failures_first: Vec<Reply>,
    pub delay: Duration,
    /// Match when the user message contains `user_message` rather than equals it.
    pub contains: bool,
}

impl Script {
    pub fn new(user_message: &str, replies: Vec<Reply>) -> Self {
        Self {
            user_message: user_message.into(),
            replies,
            failures_first: Vec::new(),
            delay: Duration::ZERO,
            contains: false,
        }
    }

    /// A script for any user message that contains `fragment` (for texts with ids in them).
    pub fn containing(fragment: &str, replies: Vec<Reply>) -> Self {
        Self { contains: true, ..Self::new(fragment, replies) }
    }

    pub fn fail_first(mut self, failures: Vec<Reply>) -> Self {
        self.failures_first = failures;
        self
    }

    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

#[derive(Default)]
pub(crate) struct State {
    scripts: Vec<Script>,
    failures_served: HashMap<String, usize>,
    requests: Vec<Value>,
    /// Keep request bodies in `requests` (off for long benchmarks: only sizes are kept).
    forget_bodies: bool,
    /// The largest request body seen, in bytes, and how many requests came.
    largest_request: usize,
    request_count: usize,
    arrivals: Vec<std::time::Instant>,
    /// The `Authorization` header of each request of `requests` (empty when there was none).
    authorizations: Vec<String>,
    /// The headers of every request to any API, lower-case names, in arrival order.
    headers: Vec<std::collections::BTreeMap<String, String>>,
    default_delay: Duration,
    /// The pause between two events of a streamed answer (zero: the whole stream at once).
    stream_gap: Duration,
    /// The `retry-after` seconds the API fakes that send one put on a 429 (Anthropic's does); `None`: no header.
    retry_after: Option<String>,
    /// What `GET /models` lists; `None`: no such route (404), as on servers without a model list.
    models: Option<Vec<String>>,
    /// The only key accepted (`Authorization: Bearer <key>`); `None`: any key or none.
    required_key: Option<String>,
    /// The Responses fake's stored responses, for `previous_response_id`.
    responses: responses::Stored,
}

impl State {
    /// Records a request whose body was `body_bytes` long.
    fn keep(&mut self, request: &Value, body_bytes: usize) {
        self.largest_request = self.largest_request.max(body_bytes);
        self.request_count += 1;
        if !self.forget_bodies {
            self.requests.push(request.clone());
        }
    }
}

/// The scripted server. Dropping it stops it.
pub struct ScriptedLlm {
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl ScriptedLlm {
    pub async fn start(scripts: Vec<Script>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the scripted LLM server");
        let addr = listener.local_addr().expect("local addr");
        let state = Arc::new(Mutex::new(State { scripts, ..State::default() }));
        let shared = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = shared.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| paced(state.clone(), req));
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
                });
            }
        });
        Self { addr, state, task }
    }

    /// The base URL to configure (`[llm].base_url`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every chat-completions request body received so far.
    pub fn requests(&self) -> Vec<Value> {
        self.state.lock().map(|s| s.requests.clone()).unwrap_or_default()
    }

    /// The `Authorization` header of each request of [`Self::requests`] (empty when there was none).
    pub fn authorizations(&self) -> Vec<String> {
        self.state.lock().map(|s| s.authorizations.clone()).unwrap_or_default()
    }

    /// Stops keeping request bodies (a long benchmark would hold gigabytes); sizes are still measured.
    pub fn forget_bodies(&self) {
        lock(&self.state).forget_bodies = true;
    }

    /// The largest request seen (its JSON body, in bytes: what the fake's usage counts at four bytes a token) and
    /// how many requests came.
    pub fn largest_request(&self) -> (usize, usize) {
        let state = lock(&self.state);
        (state.largest_request, state.request_count)
    }

    /// The headers of every request to any of the APIs, names in lower case, in arrival order.
    pub fn headers(&self) -> Vec<std::collections::BTreeMap<String, String>> {
        self.state.lock().map(|s| s.headers.clone()).unwrap_or_default()
    }

    /// When each request of [`Self::requests`] arrived.
    pub fn arrivals(&self) -> Vec<std::time::Instant> {
        self.state.lock().map(|s| s.arrivals.clone()).unwrap_or_default()
    }

    /// Sends the events of every streamed answer (`"stream": true`) `gap` apart, as a model writing slowly
    /// would, instead of all at once.
    pub fn set_stream_gap(&self, gap: Duration) {
        if let Ok(mut state) = self.state.lock() {
            state.stream_gap = gap;
        }
    }

    /// Delay applied to every reply whose script sets none.
    pub fn set_default_delay(&self, delay: Duration) {
        if let Ok(mut state) = self.state.lock() {
            state.default_delay = delay;
        }
    }

    /// Puts `retry-after: <seconds>` on the 429 answers of the API fakes that send one, as the provider does.
    pub fn set_retry_after(&self, seconds: &str) {
        if let Ok(mut state) = self.state.lock() {
            state.retry_after = Some(seconds.to_string());
        }
    }

    /// Answers `GET /models` with these ids, and refuses chat requests for any other model with OpenAI's 404
    /// `model_not_found`.
    pub fn set_models(&self, models: &[&str]) {
        if let Ok(mut state) = self.state.lock() {
            state.models = Some(models.iter().map(|m| (*m).to_string()).collect());
        }
    }

    /// Accepts only `key`: any other request is refused as OpenAI refuses a wrong key (401 `invalid_api_key`).
    pub fn require_key(&self, key: &str) {
        if let Ok(mut state) = self.state.lock() {
            state.required_key = Some(key.to_string());
        }
    }

    pub fn add_script(&self, script: Script) {
        if let Ok(mut state) = self.state.lock() {
            state.scripts.push(script);
        }
    }
}

impl Drop for ScriptedLlm {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The APIs served besides Chat Completions.
enum Api {
    Responses,
    Anthropic,
    Gemini,
}

fn other_api(path: &str) -> Option<Api> {
    if path.ends_with("/responses") || path.contains("/responses/") {
        Some(Api::Responses)
    } else if path.ends_with("/messages") {
        Some(Api::Anthropic)
    } else if path.contains(":generateContent") || path.contains(":streamGenerateContent") {
        Some(Api::Gemini)
    } else {
        None
    }
}

/// One request to an API fake.
pub(crate) struct ApiCall {
    pub path: String,
    pub query: String,
    pub headers: hyper::HeaderMap,
    pub body: Bytes,
}

/// The last user message written as plain text. A user message made of parts (an image or file the agent put
/// into its own context) is not what the scripts are keyed on, so it counts as part of the turn, not as a new one.
fn last_user_index(messages: &[Value]) -> Option<usize> {
    messages.iter().rposition(|m| m["role"] == "user" && m["content"].is_string())
}

/// Records one request of any API.
pub(crate) fn record(state: &Arc<Mutex<State>>, request: &Value, body_bytes: usize, authorization: String) {
    let mut state = lock(state);
    state.keep(request, body_bytes);
    state.arrivals.push(std::time::Instant::now());
    state.authorizations.push(authorization);
}

pub(crate) fn lock(state: &Arc<Mutex<State>>) -> std::sync::MutexGuard<'_, State> {
    match state.lock() {
        Ok(state) => state,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// [`handle`], with a streamed answer's events sent [`State::stream_gap`] apart.
async fn paced(
    state: Arc<Mutex<State>>,
    req: Request<Incoming>,
) -> Result<Response<Either<Full<Bytes>, Paced>>, hyper::Error> {
    let gap = lock(&state).stream_gap;
    let response = handle(state, req).await?;
    let streamed = response.headers().get("content-type").is_some_and(|v| v.as_bytes() == b"text/event-stream");
    if gap.is_zero() || !streamed {
        return Ok(response.map(Either::Left));
    }
    let (parts, body) = response.into_parts();
    let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let events =
        String::from_utf8_lossy(&body).split_inclusive("\n\n").map(|event| Bytes::from(event.to_string())).collect();
    Ok(Response::from_parts(parts, Either::Right(Paced { events, gap, pause: None })))
}

/// A body of server-sent events that pauses between them.
pub(crate) struct Paced {
    events: std::collections::VecDeque<Bytes>,
    gap: Duration,
    pause: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl hyper::body::Body for Paced {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if let Some(pause) = this.pause.as_mut() {
            std::task::ready!(pause.as_mut().poll(cx));
            this.pause = None;
        }
        let Some(event) = this.events.pop_front() else { return std::task::Poll::Ready(None) };
        if !this.events.is_empty() {
            this.pause = Some(Box::pin(tokio::time::sleep(this.gap)));
        }
        std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data(event))))
    }
}

async fn handle(state: Arc<Mutex<State>>, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, hyper::Error> {
    let path = req.uri().path().to_string();
    let headers = req
        .headers()
        .iter()
        .map(|(name, value)| (name.as_str().to_string(), value.to_str().unwrap_or_default().to_string()))
        .collect();
    {
        let mut state = lock(&state);
        if !state.forget_bodies {
            state.headers.push(headers);
        }
    }
    // The other APIs' fakes: each checks the request against its provider's documented shape.
    if let Some(api) = other_api(&path) {
        let headers = req.headers().clone();
        let query = req.uri().query().unwrap_or_default().to_string();
        let body = req.into_body().collect().await?.to_bytes();
        let call = ApiCall { path, query, headers, body };
        return Ok(match api {
            Api::Responses => responses::serve(&state, call).await,
            Api::Anthropic => anthropic::serve(&state, call).await,
            Api::Gemini => gemini::serve(&state, call).await,
        });
    }
    let authorization =
        req.headers().get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let body = req.into_body().collect().await?.to_bytes();
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let (models, required_key) = match state.lock() {
        Ok(state) => (state.models.clone(), state.required_key.clone()),
        Err(poisoned) => (poisoned.get_ref().models.clone(), poisoned.get_ref().required_key.clone()),
    };
    let known_route = path.ends_with("/chat/completions") || (path.ends_with("/models") && models.is_some());
    if required_key.is_some_and(|key| known_route && authorization != format!("Bearer {key}")) {
        return Ok(respond(401, wrong_key(&authorization)));
    }
    if let Some(models) = models.as_ref().filter(|_| path.ends_with("/models")) {
        let data: Vec<Value> =
            models.iter().map(|id| json!({ "id": id, "object": "model", "owned_by": "scripted" })).collect();
        return Ok(respond(200, json!({ "object": "list", "data": data }).to_string()));
    }
    if !path.ends_with("/chat/completions") {
        return Ok(respond(404, json!({ "error": { "message": format!("no route {path}") } }).to_string()));
    }
    let model = request["model"].as_str().unwrap_or_default();
    if models.is_some_and(|models| !models.iter().any(|m| m == model)) {
        let message = format!("The model `{model}` does not exist or you do not have access to it.");
        let error = json!({ "error": { "message": message, "type": "invalid_request_error", "param": null,
                                       "code": "model_not_found" } });
        return Ok(respond(404, error.to_string()));
    }
    let messages: &[Value] = request["messages"].as_array().map_or(&[], Vec::as_slice);
    let (reply, delay) = {
        let mut state = match state.lock() {
            Ok(state) => state,
            Err(poisoned) => poisoned.into_inner(),
        };
        state.keep(&request, body.len());
        state.arrivals.push(std::time::Instant::now());
        state.authorizations.push(authorization);
        choose(&mut state, messages)
    };
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    // Sized like the request and what the answer writes, as a real API counts.
    let usage_of = |written: usize| usage(body.len(), written);
    if request["stream"] == true {
        return Ok(match reply {
            Reply::Text(text) => {
                respond_sse(&chat_stream(Some(&text), &[], messages.len(), "stop", usage_of(text.len())))
            }
            Reply::ToolCalls(calls) => {
                respond_sse(&chat_stream(None, &calls, messages.len(), "tool_calls", usage_of(call_bytes(&calls))))
            }
            Reply::Status(status, body) => respond(status, body),
            Reply::Raw(body) => respond_sse(&body),
        });
    }
    Ok(match reply {
        Reply::Text(text) => {
            let usage = usage_of(text.len());
            respond(200, completion(json!({ "role": "assistant", "content": text }), "stop", usage))
        }
        Reply::ToolCalls(calls) => {
            let usage = usage_of(call_bytes(&calls));
            let calls: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(i, (name, args))| {
                    json!({ "id": format!("call_{}_{i}", messages.len()), "type": "function",
                            "function": { "name": name, "arguments": args } })
                })
                .collect();
            let message = json!({ "role": "assistant", "content": null, "tool_calls": calls });
            respond(200, completion(message, "tool_calls", usage))
        }
        Reply::Status(status, body) => respond(status, body),
        Reply::Raw(body) => respond(200, body),
    })
}

/// Splits `text` into `n` pieces of about equal length (on character boundaries), for streamed answers.
pub(crate) fn pieces(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let size = chars.len().div_ceil(n.max(1)).max(1);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// A Chat Completions stream: the text in three pieces, or each tool call's id and name first and its arguments
/// in two parts, then the finish reason, the usage chunk and `[DONE]`, as OpenAI sends them with
/// `stream_options.include_usage`.
fn chat_stream(text: Option<&str>, calls: &[(String, String)], turn: usize, finish: &str, usage: Value) -> String {
    let chunk = |delta: Value, finish: Value| {
        json!({ "id": "chatcmpl-test", "object": "chat.completion.chunk", "model": "scripted",
                "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }] })
    };
    let mut events = vec![chunk(json!({ "role": "assistant", "content": "" }), Value::Null)];
    for piece in pieces(text.unwrap_or_default(), 3) {
        events.push(chunk(json!({ "content": piece }), Value::Null));
    }
    for (i, (name, args)) in calls.iter().enumerate() {
        let start = json!({ "index": i, "id": format!("call_{turn}_{i}"), "type": "function",
                            "function": { "name": name, "arguments": "" } });
        events.push(chunk(json!({ "tool_calls": [start] }), Value::Null));
        for part in pieces(args, 2) {
            events
                .push(chunk(json!({ "tool_calls": [{ "index": i, "function": { "arguments": part } }] }), Value::Null));
        }
    }
    events.push(chunk(json!({}), json!(finish)));
    events.push(json!({ "id": "chatcmpl-test", "object": "chat.completion.chunk", "choices": [], "usage": usage }));
    let mut body: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    body
}

/// A 200 answer of server-sent events.
pub(crate) fn respond_sse(body: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    response.headers_mut().insert("content-type", hyper::header::HeaderValue::from_static("text/event-stream"));
    response
}

/// OpenAI's answer to a wrong key: the key shown with its middle masked.
fn wrong_key(authorization: &str) -> String {
    let given = authorization.strip_prefix("Bearer ").unwrap_or_default();
    let message = if given.is_empty() {
        "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer \
         auth (i.e. Authorization: Bearer YOUR_KEY)."
            .to_string()
    } else {
        let tail: String = given.chars().skip(given.chars().count().saturating_sub(4)).collect();
        let shown = format!("{}****{tail}", given.chars().take(3).collect::<String>());
        format!(
            "Incorrect API key provided: {shown}. You can find your API key at https://platform.openai.com/account/api-keys."
        )
    };
    json!({ "error": { "message": message, "type": "invalid_request_error", "param": null, "code": "invalid_api_key" } })
        .to_string()
}

fn choose(state: &mut State, messages: &[Value]) -> (Reply, Duration) {
    let Some(user_index) = last_user_index(messages) else {
        return (Reply::Status(400, "no user message".into()), Duration::ZERO);
    };
    let user_text = messages[user_index]["content"].as_str().unwrap_or_default().to_string();
    let step = messages[user_index..].iter().filter(|m| m["role"] == "assistant").count();
    choose_for(state, &user_text, step)
}

/// The reply for a conversation whose last plain-text user message is `user_text`, after `step` model replies
/// to it. Every API's fake keys its scripts this way, so one script serves every provider.
pub(crate) fn choose_for(state: &mut State, user_text: &str, step: usize) -> (Reply, Duration) {
    let user_text = user_text.to_string();
    let Some(script) = state
        .scripts
        .iter()
        .find(|s| if s.contains { user_text.contains(&s.user_message) } else { s.user_message == user_text })
        .cloned()
    else {
        return (Reply::Text(format!("unscripted: {user_text}")), state.default_delay);
    };
    let delay = if script.delay.is_zero() { state.default_delay } else { script.delay };
    let served = state.failures_served.entry(script.user_message.clone()).or_insert(0);
    if let Some(failure) = script.failures_first.get(*served) {
        *served += 1;
        return (failure.clone(), delay);
    }
    let reply = script
        .replies
        .get(step)
        .cloned()
        .unwrap_or_else(|| Reply::Text(format!("script exhausted after {step} replies")));
    (reply, delay)
}

fn completion(message: Value, finish_reason: &str, usage: Value) -> String {
    json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": "scripted",
        "choices": [{ "index": 0, "message": message, "finish_reason": finish_reason }],
        "usage": usage
    })
    .to_string()
}

/// The bytes a reply of tool calls writes: their names and arguments.
fn call_bytes(calls: &[(String, String)]) -> usize {
    calls.iter().map(|(name, args)| name.len() + args.len()).sum()
}

/// A streamed Chat Completions answer with the given finish reason and usage: an answer cut at the token limit
/// (`"length"`), or one counted as the provider pleases (another vendor's tokenizer, a server that counts only
/// what it had not cached). Served whatever the request asked for, as a script's reply.
pub fn streamed_answer(text: &str, finish_reason: &str, prompt_tokens: u64) -> Reply {
    let usage = json!({ "prompt_tokens": prompt_tokens, "completion_tokens": 5, "total_tokens": prompt_tokens + 5 });
    Reply::Raw(chat_stream(Some(text), &[], 0, finish_reason, usage))
}

/// Chat Completions usage as a real API reports it, sized like the request and the answer (about four bytes a
/// token, OpenAI's rule of thumb): the product measures a chat's context from it, so a fixed number would hide
/// a growing history.
fn usage(request_bytes: usize, answer_bytes: usize) -> Value {
    let (prompt, completion) = estimated_tokens(request_bytes, answer_bytes);
    json!({ "prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion })
}

/// The prompt and completion tokens the fakes report: a request of `request_bytes` bytes (its JSON body) and
/// an answer of `answer_bytes` bytes of text and tool calls, at four bytes a token, at least one each.
pub fn estimated_tokens(request_bytes: usize, answer_bytes: usize) -> (u64, u64) {
    ((request_bytes.div_ceil(4) as u64).max(1), (answer_bytes.div_ceil(4) as u64).max(1))
}

pub(crate) fn respond(status: u16, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert("content-type", hyper::header::HeaderValue::from_static("application/json"));
    response
}
