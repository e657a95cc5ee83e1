//! A fake Telegram Bot API server for tests ([`FakeTelegram`]): a hyper server on 127.0.0.1 that answers
//! `/bot<TOKEN>/<method>` and `/file/bot<TOKEN>/<path>` as the real one does, keeps the updates a test pushes
//! until a `getUpdates` offset confirms them, records every call, and fails the calls a test asks it to fail.
//!
//! Like the real server it checks what it is sent: MarkdownV2 and HTML texts must parse ([`markup`]), texts
//! stay within 4096 characters and captions within 1024, edits name a message it sent and change something,
//! and `getUpdates` is refused while a webhook is set or when another `getUpdates` takes over.

mod http;
mod markup;
mod multipart;

pub use http::{HttpResponse, http_request};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Map, Value, json};
use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::net::TcpListener;
use tokio::sync::Notify;

/// The bot token the fake accepts.
pub const TOKEN: &str = "424242:TEST-TOKEN";
/// The bot's user id (the number before the colon of [`TOKEN`]).
pub const BOT_ID: i64 = 424242;

const NOT_MODIFIED: &str = "Bad Request: message is not modified: specified new message content and reply markup are \
                            exactly the same as a content and reply markup of the current message";
const WEBHOOK_ACTIVE: &str =
    "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first";
const POLL_TAKEN_OVER: &str =
    "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running";

/// One request the fake received, with what it answered.
#[derive(Debug, Clone)]
pub struct Call {
    /// The method as the client spelled it (`sendMessage`); downloads of files are `downloadFile`.
    pub method: String,
    /// The JSON body, or the text fields of a multipart body (values that parse as JSON kept as JSON), plus the
    /// query string's fields.
    pub params: Value,
    /// The files of a multipart body: (field, file name, bytes).
    pub files: Vec<(String, String, Vec<u8>)>,
    /// When the request arrived.
    pub at: Instant,
    /// The HTTP status of the answer.
    pub status: u16,
    /// The `result` of a successful answer (`Null` otherwise).
    pub result: Value,
}

impl Call {
    /// The call was answered with `"ok": true`.
    pub fn ok(&self) -> bool {
        self.status == 200
    }

    pub fn chat_id(&self) -> Option<i64> {
        as_i64(&self.params["chat_id"])
    }

    /// The `text` of the call, else its `caption`.
    pub fn text(&self) -> Option<&str> {
        self.params["text"].as_str().or_else(|| self.params["caption"].as_str())
    }

    pub fn parse_mode(&self) -> Option<&str> {
        self.params["parse_mode"].as_str().filter(|mode| !mode.is_empty())
    }

    /// The message this one replies to (`reply_parameters.message_id`, or the older `reply_to_message_id`).
    pub fn reply_to(&self) -> Option<i64> {
        as_i64(&self.params["reply_parameters"]["message_id"]).or_else(|| as_i64(&self.params["reply_to_message_id"]))
    }

    /// The `message_id` of the message a successful send created.
    pub fn message_id(&self) -> Option<i64> {
        self.result["message_id"].as_i64()
    }

    /// The `callback_data` of every inline button of the call's `reply_markup`, row by row.
    pub fn button_data(&self) -> Vec<String> {
        let rows = self.params["reply_markup"]["inline_keyboard"].as_array().cloned().unwrap_or_default();
        rows.iter()
            .filter_map(Value::as_array)
            .flatten()
            .filter_map(|button| button["callback_data"].as_str().map(str::to_string))
            .collect()
    }

    fn is_poll(&self) -> bool {
        self.method.eq_ignore_ascii_case("getUpdates")
    }
}

type Predicate = Box<dyn Fn(&Value) -> bool + Send + Sync>;

/// An answer a test asked for instead of the normal one.
struct Failure {
    method: String,
    predicate: Option<Predicate>,
    status: u16,
    body: String,
}

struct StoredFile {
    unique_id: String,
    path: String,
    bytes: Bytes,
}

struct State {
    token_valid: bool,
    check_markup: bool,
    calls: Vec<Call>,
    failures: Vec<Failure>,
    /// Updates not yet confirmed, by increasing id.
    pending: VecDeque<(i64, Value)>,
    /// The `allowed_updates` of the last `getUpdates` that set them (`None`: every kind).
    allowed: Option<HashSet<String>>,
    next_update_id: i64,
    next_user_message_id: i64,
    next_bot_message_id: i64,
    next_file: u64,
    next_callback: u64,
    files: HashMap<String, StoredFile>,
    file_paths: HashMap<String, String>,
    /// The bot's messages as they are now (after edits), by (chat, message id).
    bot_messages: HashMap<(i64, i64), Value>,
    user_messages: HashMap<(i64, i64), Value>,
    callback_ids: HashSet<String>,
    /// The parameters of the `setWebhook` in force.
    webhook: Option<Value>,
    /// Bumped by every `getUpdates`: a waiting poll whose number is no longer the latest was taken over.
    poll_generation: u64,
}

struct Shared {
    state: Mutex<State>,
    /// Woken by every pushed update and every new poll.
    wake: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The fake Bot API server. Dropping it stops it.
pub struct FakeTelegram {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeTelegram {
    /// The bot token the fake accepts.
    pub const TOKEN: &'static str = TOKEN;

    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the fake Bot API server");
        let addr = listener.local_addr().expect("local addr");
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                token_valid: true,
                check_markup: true,
                calls: Vec::new(),
                failures: Vec::new(),
                pending: VecDeque::new(),
                allowed: None,
                next_update_id: 1,
                next_user_message_id: 1,
                next_bot_message_id: 1000,
                next_file: 1,
                next_callback: 1,
                files: HashMap::new(),
                file_paths: HashMap::new(),
                bot_messages: HashMap::new(),
                user_messages: HashMap::new(),
                callback_ids: HashSet::new(),
                webhook: None,
                poll_generation: 0,
            }),
            wake: Notify::new(),
        });
        let server = shared.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let shared = server.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| handle(shared.clone(), req));
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
                });
            }
        });
        Self { addr, shared, task }
    }

    /// What goes in `[channels.telegram] api_base_url`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.shared.lock()
    }

    /// `false`: every call answers 401 Unauthorized, as for a revoked token.
    pub fn set_token_valid(&self, valid: bool) {
        self.lock().token_valid = valid;
    }

    /// `false`: MarkdownV2 and HTML texts are not checked (on by default, as on the real server).
    pub fn set_markup_checks(&self, on: bool) {
        self.lock().check_markup = on;
    }

    // ---- Error injection ----

    /// The next call of `method` answers `status` with `body` (once; call again to queue more).
    pub fn fail_next(&self, method: &str, status: u16, body: Value) {
        self.queue_failure(method, None, status, body.to_string());
    }

    /// The next call of `method` whose parameters match `predicate` answers `status` with `body` (once).
    pub fn fail_next_if(
        &self,
        method: &str,
        predicate: impl Fn(&Value) -> bool + Send + Sync + 'static,
        status: u16,
        body: Value,
    ) {
        self.queue_failure(method, Some(Box::new(predicate)), status, body.to_string());
    }

    /// The next call of `method` answers `status` with this raw text as its body (`"not json"`).
    pub fn fail_next_raw(&self, method: &str, status: u16, body: &str) {
        self.queue_failure(method, None, status, body.to_string());
    }

    fn queue_failure(&self, method: &str, predicate: Option<Predicate>, status: u16, body: String) {
        self.lock().failures.push(Failure { method: method.to_string(), predicate, status, body });
    }

    /// Telegram refusing a MarkdownV2 text (for [`Self::fail_next`]).
    pub fn parse_error() -> (u16, Value) {
        (
            400,
            json!({ "ok": false, "error_code": 400,
                    "description": "Bad Request: can't parse entities: Can't find end of the entity starting at byte offset 3" }),
        )
    }

    /// Telegram's flood control (for [`Self::fail_next`]).
    pub fn too_many_requests(secs: u64) -> (u16, Value) {
        (
            429,
            json!({ "ok": false, "error_code": 429, "description": format!("Too Many Requests: retry after {secs}"),
                    "parameters": { "retry_after": secs } }),
        )
    }

    // ---- Updates ----

    /// A text message from `user_id` in `chat_id`: `(update_id, message_id)`. A leading `/command` gets its
    /// `bot_command` entity, as Telegram marks it.
    pub fn push_text(&self, chat_id: i64, user_id: i64, text: &str) -> (i64, i64) {
        let mut fields = Map::new();
        fields.insert("text".into(), json!(text));
        if let Some(command) = text.split_whitespace().next().filter(|word| word.starts_with('/')) {
            let length: usize = command.chars().map(char::len_utf16).sum();
            fields.insert("entities".into(), json!([{ "type": "bot_command", "offset": 0, "length": length }]));
        }
        self.push_message(chat_id, user_id, |_| fields)
    }

    /// A text message replying to message `reply_to_message_id` whose text is `reply_to_text`.
    pub fn push_reply(
        &self,
        chat_id: i64,
        user_id: i64,
        text: &str,
        reply_to_message_id: i64,
        reply_to_text: &str,
    ) -> (i64, i64) {
        self.push_message(chat_id, user_id, |state| {
            let key = (chat_id, reply_to_message_id);
            let mut replied = state.bot_messages.get(&key).or_else(|| state.user_messages.get(&key)).cloned().unwrap_or_else(
                || json!({ "message_id": reply_to_message_id, "from": bot_user(), "chat": chat(chat_id), "date": now() }),
            );
            if let Some(replied) = replied.as_object_mut() {
                replied.remove("reply_to_message");
                replied.insert("text".into(), json!(reply_to_text));
            }
            let mut fields = Map::new();
            fields.insert("text".into(), json!(text));
            fields.insert("reply_to_message".into(), replied);
            fields
        })
    }

    /// A photo (registered for `getFile`), sent as two sizes with the larger last, as Telegram does.
    pub fn push_photo(&self, chat_id: i64, user_id: i64, bytes: &[u8], caption: Option<&str>) -> (i64, i64) {
        self.push_message(chat_id, user_id, |state| {
            let mut fields = Map::new();
            fields.insert("photo".into(), state.photo_sizes(bytes));
            if let Some(caption) = caption {
                fields.insert("caption".into(), json!(caption));
            }
            fields
        })
    }

    /// A document (registered for `getFile`).
    pub fn push_document(
        &self,
        chat_id: i64,
        user_id: i64,
        file_name: &str,
        mime: &str,
        bytes: &[u8],
        caption: Option<&str>,
    ) -> (i64, i64) {
        self.push_message(chat_id, user_id, |state| {
            let (file_id, unique_id, _) = state.register_file("documents", file_name, bytes);
            let mut fields = Map::new();
            fields.insert(
                "document".into(),
                json!({ "file_id": file_id, "file_unique_id": unique_id, "file_name": file_name,
                        "mime_type": mime, "file_size": bytes.len() }),
            );
            if let Some(caption) = caption {
                fields.insert("caption".into(), json!(caption));
            }
            fields
        })
    }

    /// A click by `user_id` on an inline button with `data` under the bot's message `message_id`: the update id.
    pub fn push_callback(&self, chat_id: i64, user_id: i64, message_id: i64, data: &str) -> i64 {
        let update_id = {
            let mut state = self.lock();
            let id = format!("{}{}", 7_000_000 + state.next_callback, chat_id.unsigned_abs());
            state.next_callback += 1;
            state.callback_ids.insert(id.clone());
            let message = state.bot_messages.get(&(chat_id, message_id)).cloned().unwrap_or_else(
                || json!({ "message_id": message_id, "from": bot_user(), "chat": chat(chat_id), "date": now() }),
            );
            state.enqueue(json!({ "callback_query": {
                "id": id, "from": user(user_id), "message": message,
                "chat_instance": format!("-{}", 9_000_000_000_i64 + chat_id), "data": data,
            } }))
        };
        self.shared.wake.notify_waiters();
        update_id
    }

    /// Any update (without its `update_id`, which the fake gives): the update id.
    pub fn push_raw(&self, update: Value) -> i64 {
        let update_id = self.lock().enqueue(update);
        self.shared.wake.notify_waiters();
        update_id
    }

    fn push_message(
        &self,
        chat_id: i64,
        user_id: i64,
        fields: impl FnOnce(&mut State) -> Map<String, Value>,
    ) -> (i64, i64) {
        let ids = {
            let mut state = self.lock();
            let fields = fields(&mut state);
            let message_id = state.next_user_message_id;
            state.next_user_message_id += 1;
            let mut message = Map::new();
            message.insert("message_id".into(), json!(message_id));
            message.insert("from".into(), user(user_id));
            message.insert("chat".into(), chat(chat_id));
            message.insert("date".into(), json!(now()));
            message.extend(fields);
            let message = Value::Object(message);
            state.user_messages.insert((chat_id, message_id), message.clone());
            (state.enqueue(json!({ "message": message })), message_id)
        };
        self.shared.wake.notify_waiters();
        ids
    }

    /// Makes `bytes` downloadable at `/file/bot<TOKEN>/<file_path>` and known to `getFile`: the file id.
    pub fn add_file(&self, file_path: &str, bytes: &[u8]) -> String {
        let mut state = self.lock();
        let n = state.next_file;
        state.next_file += 1;
        let file_id = format!("BQACAgQAAx{n:06}");
        let stored = StoredFile {
            unique_id: format!("AgAD{n:04}"),
            path: file_path.to_string(),
            bytes: Bytes::copy_from_slice(bytes),
        };
        state.file_paths.insert(file_path.to_string(), file_id.clone());
        state.files.insert(file_id.clone(), stored);
        file_id
    }

    // ---- Inspection ----

    /// Every call so far, `getUpdates` included.
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// Every call so far except `getUpdates`.
    pub fn api_calls(&self) -> Vec<Call> {
        self.lock().calls.iter().filter(|c| !c.is_poll()).cloned().collect()
    }

    /// The calls of one method (case-insensitive, as Telegram reads method names).
    pub fn calls_of(&self, method: &str) -> Vec<Call> {
        self.lock().calls.iter().filter(|c| c.method.eq_ignore_ascii_case(method)).cloned().collect()
    }

    /// The texts of the successful `sendMessage` calls to `chat_id`, in order.
    pub fn sent_texts(&self, chat_id: i64) -> Vec<String> {
        sent_texts(&self.lock().calls, chat_id)
    }

    /// Waits until `until` holds for the calls so far (checked every 20 ms) and returns them; panics with the calls
    /// on timeout.
    pub async fn wait_for(&self, until: impl Fn(&[Call]) -> bool, timeout: Duration) -> Vec<Call> {
        let deadline = Instant::now() + timeout;
        loop {
            {
                let state = self.lock();
                if until(&state.calls) {
                    return state.calls.clone();
                }
                if Instant::now() >= deadline {
                    let summary = describe(&state.calls);
                    drop(state);
                    panic!("the fake Bot API waited {timeout:?} in vain; calls so far:\n{summary}");
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Updates pushed and not yet confirmed by a `getUpdates` offset.
    pub fn pending_updates(&self) -> usize {
        self.lock().pending.len()
    }

    /// The parameters of the webhook in force (`setWebhook` and no `deleteWebhook` since).
    pub fn webhook(&self) -> Option<Value> {
        self.lock().webhook.clone()
    }

    /// A message the bot sent, as it is now (after edits; `None` if deleted or never sent).
    pub fn bot_message(&self, chat_id: i64, message_id: i64) -> Option<Value> {
        self.lock().bot_messages.get(&(chat_id, message_id)).cloned()
    }
}

impl Drop for FakeTelegram {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The texts of the successful `sendMessage` calls to `chat_id` among `calls`, in order.
pub fn sent_texts(calls: &[Call], chat_id: i64) -> Vec<String> {
    calls
        .iter()
        .filter(|c| c.ok() && c.method.eq_ignore_ascii_case("sendMessage") && c.chat_id() == Some(chat_id))
        .filter_map(|c| c.text().map(str::to_string))
        .collect()
}

/// The last calls, one a line, for a failure message (`getUpdates` only counted).
pub fn describe(calls: &[Call]) -> String {
    let polls = calls.iter().filter(|c| c.is_poll()).count();
    let others: Vec<&Call> = calls.iter().filter(|c| !c.is_poll()).collect();
    let skipped = others.len().saturating_sub(60);
    let mut out = format!("({polls} getUpdates calls; {} other calls", others.len());
    if skipped > 0 {
        out.push_str(&format!(", the first {skipped} left out"));
    }
    out.push_str(")\n");
    for call in &others[skipped..] {
        let mut params = call.params.to_string();
        if params.len() > 400 {
            let cut = (0..=400).rev().find(|i| params.is_char_boundary(*i)).unwrap_or(0);
            params.truncate(cut);
            params.push('…');
        }
        let files: Vec<String> =
            call.files.iter().map(|(field, name, bytes)| format!("{field}={name} ({} B)", bytes.len())).collect();
        out.push_str(&format!("  {} -> {} {params} {}\n", call.method, call.status, files.join(" ")));
    }
    out
}

// ---- The server ----

/// An answer of the API: status, body and the `result` to record.
struct Answer {
    status: u16,
    body: Bytes,
    result: Value,
    content_type: &'static str,
}

impl Answer {
    fn ok(result: Value) -> Self {
        let body = json!({ "ok": true, "result": result }).to_string();
        Self { status: 200, body: Bytes::from(body), result, content_type: "application/json" }
    }

    fn error(status: u16, description: &str) -> Self {
        let body = json!({ "ok": false, "error_code": status, "description": description }).to_string();
        Self::raw(status, body)
    }

    fn bad(description: &str) -> Self {
        Self::error(400, &format!("Bad Request: {description}"))
    }

    fn raw(status: u16, body: String) -> Self {
        Self { status, body: Bytes::from(body), result: Value::Null, content_type: "application/json" }
    }
}

async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, hyper::Error> {
    let at = Instant::now();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or_default().to_string();
    let content_type = req.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let body = req.into_body().collect().await?.to_bytes();
    if let Some(rest) = path.strip_prefix("/file/bot") {
        return Ok(respond(download(&shared, rest, at)));
    }
    let Some((token, method)) = path.strip_prefix("/bot").and_then(|rest| rest.split_once('/')) else {
        return Ok(respond(Answer::error(404, "Not Found")));
    };
    let method = method.to_string();
    let (params, files, unreadable) = match read_params(&content_type, &query, &body) {
        Ok((params, files)) => (params, files, None),
        Err(error) => (json!({}), Vec::new(), Some(error)),
    };
    let answer = if let Some(error) = unreadable {
        Answer::bad(&error)
    } else if token != TOKEN || !shared.lock().token_valid {
        Answer::error(401, "Unauthorized")
    } else if let Some(failure) = take_failure(&shared, &method, &params) {
        failure
    } else if method.eq_ignore_ascii_case("getUpdates") {
        get_updates(&shared, &params).await
    } else {
        shared.lock().answer(&method, &params, &files)
    };
    let call = Call { method, params, files, at, status: answer.status, result: answer.result.clone() };
    shared.lock().calls.push(call);
    Ok(respond(answer))
}

fn respond(answer: Answer) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(answer.body));
    *response.status_mut() = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert("content-type", hyper::header::HeaderValue::from_static(answer.content_type));
    response
}

fn take_failure(shared: &Shared, method: &str, params: &Value) -> Option<Answer> {
    let mut state = shared.lock();
    let index = state.failures.iter().position(|f| {
        f.method.eq_ignore_ascii_case(method) && f.predicate.as_ref().is_none_or(|matches| matches(params))
    })?;
    let failure = state.failures.remove(index);
    Some(Answer::raw(failure.status, failure.body))
}

/// `GET /file/bot<TOKEN>/<file_path>`.
fn download(shared: &Shared, rest: &str, at: Instant) -> Answer {
    let (token, file_path) = rest.split_once('/').unwrap_or((rest, ""));
    let mut state = shared.lock();
    let answer = if token != TOKEN || !state.token_valid {
        Answer::error(401, "Unauthorized")
    } else {
        match state.file_paths.get(file_path).and_then(|id| state.files.get(id)) {
            Some(file) => Answer {
                status: 200,
                body: file.bytes.clone(),
                result: Value::Null,
                content_type: "application/octet-stream",
            },
            None => Answer::error(404, "Not Found"),
        }
    };
    let params = json!({ "file_path": file_path });
    state.calls.push(Call {
        method: "downloadFile".into(),
        params,
        files: Vec::new(),
        at,
        status: answer.status,
        result: Value::Null,
    });
    answer
}

type Files = Vec<(String, String, Vec<u8>)>;

/// The parameters of a call from its query string and its JSON, form or multipart body.
fn read_params(content_type: &str, query: &str, body: &[u8]) -> Result<(Value, Files), String> {
    let mut params: Map<String, Value> = form_pairs(query).collect();
    let mut files = Vec::new();
    let kind = content_type.to_ascii_lowercase();
    if kind.starts_with("multipart/form-data") {
        for part in multipart::parse(content_type, body)? {
            match part.filename {
                Some(name) => files.push((part.name, name, part.data)),
                None => {
                    params.insert(part.name, text_value(&String::from_utf8_lossy(&part.data)));
                }
            }
        }
    } else if kind.starts_with("application/x-www-form-urlencoded") {
        params.extend(form_pairs(&String::from_utf8_lossy(body)));
    } else if !body.iter().all(u8::is_ascii_whitespace) {
        match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(fields)) => params.extend(fields),
            Ok(_) => return Err("parameters must be a JSON object".into()),
            Err(error) => return Err(format!("can't parse JSON encoded request: {error}")),
        }
    }
    Ok((Value::Object(params), files))
}

fn form_pairs(text: &str) -> impl Iterator<Item = (String, Value)> + '_ {
    text.split('&').filter(|pair| !pair.is_empty()).map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let decode = |s: &str| multipart::percent_decode(&s.replace('+', " "));
        (decode(key), text_value(&decode(value)))
    })
}

/// A form field's text as JSON when it is JSON (`12`, `{"message_id":3}`), else as a string.
fn text_value(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

fn as_i64(value: &Value) -> Option<i64> {
    value.as_i64().or_else(|| value.as_str()?.trim().parse().ok())
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

fn bot_user() -> Value {
    json!({
        "id": BOT_ID, "is_bot": true, "first_name": "MiniBot Test", "username": "minibot_test_bot",
        "can_join_groups": true, "can_read_all_group_messages": false, "supports_inline_queries": false,
        "can_connect_to_business": false, "has_main_web_app": false,
    })
}

fn user(user_id: i64) -> Value {
    json!({ "id": user_id, "is_bot": false, "first_name": format!("User{user_id}"),
            "username": format!("user{user_id}"), "language_code": "en" })
}

/// A private chat for a positive id (the user's own), a group for a negative one.
fn chat(chat_id: i64) -> Value {
    if chat_id < 0 {
        json!({ "id": chat_id, "type": "group", "title": format!("Group {chat_id}") })
    } else {
        json!({ "id": chat_id, "type": "private", "first_name": format!("User{chat_id}"),
                "username": format!("user{chat_id}") })
    }
}

/// The kind of an update: its one field besides `update_id`.
fn update_kind(update: &Value) -> Option<&str> {
    update.as_object()?.keys().find(|k| *k != "update_id").map(String::as_str)
}

/// The inline keyboard of a `reply_markup`, `Null` when there is none (an empty one removes it).
fn inline_keyboard(markup: &Value) -> Value {
    let markup = match markup {
        Value::String(text) => text_value(text),
        other => other.clone(),
    };
    match markup["inline_keyboard"].as_array() {
        Some(rows) if !rows.is_empty() => json!({ "inline_keyboard": rows }),
        _ => Value::Null,
    }
}

async fn get_updates(shared: &Shared, params: &Value) -> Answer {
    let offset = as_i64(&params["offset"]).unwrap_or(0);
    let limit = usize::try_from(as_i64(&params["limit"]).unwrap_or(100).clamp(1, 100)).unwrap_or(100);
    let wait = Duration::from_secs(u64::try_from(as_i64(&params["timeout"]).unwrap_or(0).clamp(0, 50)).unwrap_or(0));
    let generation = {
        let mut state = shared.lock();
        if state.webhook.is_some() {
            return Answer::error(409, WEBHOOK_ACTIVE);
        }
        state.confirm(offset);
        if let Some(kinds) = params["allowed_updates"].as_array() {
            let kinds: HashSet<String> = kinds.iter().filter_map(|k| k.as_str().map(str::to_string)).collect();
            state.allowed = (!kinds.is_empty()).then_some(kinds);
        }
        state.poll_generation += 1;
        state.poll_generation
    };
    // A poll still waiting from before is answered 409, as Telegram ends it.
    shared.wake.notify_waiters();
    let deadline = Instant::now() + wait;
    loop {
        let woken = shared.wake.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        {
            let mut state = shared.lock();
            if state.poll_generation != generation {
                return Answer::error(409, POLL_TAKEN_OVER);
            }
            if state.webhook.is_some() {
                return Answer::error(409, WEBHOOK_ACTIVE);
            }
            let batch = state.batch(limit);
            if !batch.is_empty() || Instant::now() >= deadline {
                return Answer::ok(Value::Array(batch));
            }
        }
        let _ = tokio::time::timeout(deadline.saturating_duration_since(Instant::now()), woken).await;
    }
}

impl State {
    fn enqueue(&mut self, mut update: Value) -> i64 {
        let update_id = self.next_update_id;
        self.next_update_id += 1;
        if let Some(fields) = update.as_object_mut() {
            fields.insert("update_id".into(), json!(update_id));
        }
        self.pending.push_back((update_id, update));
        update_id
    }

    /// Forgets the updates an offset confirms: those below a positive offset, or all but the last `-offset`.
    fn confirm(&mut self, offset: i64) {
        if offset > 0 {
            while self.pending.front().is_some_and(|(id, _)| *id < offset) {
                self.pending.pop_front();
            }
        } else if offset < 0 {
            let keep = usize::try_from(offset.unsigned_abs()).unwrap_or(usize::MAX);
            while self.pending.len() > keep {
                self.pending.pop_front();
            }
        }
    }

    /// The next updates to deliver; kinds the bot did not ask for are dropped, as Telegram drops them.
    fn batch(&mut self, limit: usize) -> Vec<Value> {
        if let Some(allowed) = &self.allowed {
            self.pending.retain(|(_, update)| update_kind(update).is_some_and(|kind| allowed.contains(kind)));
        }
        self.pending.iter().take(limit).map(|(_, update)| update.clone()).collect()
    }

    fn answer(&mut self, method: &str, params: &Value, files: &Files) -> Answer {
        match method.to_ascii_lowercase().as_str() {
            "getme" => Answer::ok(bot_user()),
            "sendmessage" => self.send_message(params),
            "senddocument" | "sendphoto" | "sendaudio" | "sendvoice" | "sendvideo" | "sendanimation" => {
                let field = method[4..].to_ascii_lowercase();
                self.send_file(&field, params, files)
            }
            "editmessagetext" => self.edit(params, Edit::Text),
            "editmessagecaption" => self.edit(params, Edit::Caption),
            "editmessagereplymarkup" => self.edit(params, Edit::Markup),
            "deletemessage" => {
                let key = (as_i64(&params["chat_id"]).unwrap_or(0), as_i64(&params["message_id"]).unwrap_or(0));
                match self.bot_messages.remove(&key).or_else(|| self.user_messages.remove(&key)) {
                    Some(_) => Answer::ok(json!(true)),
                    None => Answer::bad("message to delete not found"),
                }
            }
            "sendchataction" => match (as_i64(&params["chat_id"]), params["action"].as_str()) {
                (Some(_), Some(_)) => Answer::ok(json!(true)),
                (None, _) => Answer::bad("chat_id is empty"),
                (_, None) => Answer::bad("action is empty"),
            },
            "answercallbackquery" => {
                let id = params["callback_query_id"].as_str().unwrap_or_default();
                if self.callback_ids.contains(id) {
                    Answer::ok(json!(true))
                } else {
                    Answer::bad("query is too old and response timeout expired or query ID is invalid")
                }
            }
            "setwebhook" => {
                let url = params["url"].as_str().unwrap_or_default();
                self.drop_pending_if_asked(params);
                self.webhook = (!url.is_empty()).then(|| params.clone());
                Answer::ok(json!(true))
            }
            "deletewebhook" => {
                self.drop_pending_if_asked(params);
                self.webhook = None;
                Answer::ok(json!(true))
            }
            "getwebhookinfo" => {
                let url = self.webhook.as_ref().and_then(|w| w["url"].as_str()).unwrap_or_default().to_string();
                Answer::ok(
                    json!({ "url": url, "has_custom_certificate": false, "pending_update_count": self.pending.len() }),
                )
            }
            "getfile" => {
                let file_id = params["file_id"].as_str().unwrap_or_default();
                match self.files.get(file_id) {
                    Some(file) => Answer::ok(json!({ "file_id": file_id, "file_unique_id": file.unique_id,
                                                     "file_size": file.bytes.len(), "file_path": file.path })),
                    None => Answer::bad("invalid file_id"),
                }
            }
            "getchat" => match as_i64(&params["chat_id"]) {
                Some(id) => Answer::ok(chat(id)),
                None => Answer::bad("chat not found"),
            },
            "getmycommands" => Answer::ok(json!([])),
            "setmycommands"
            | "deletemycommands"
            | "setchatmenubutton"
            | "setmydescription"
            | "setmyshortdescription"
            | "setmyname"
            | "setmessagereaction"
            | "close"
            | "logout" => Answer::ok(json!(true)),
            _ => Answer::error(404, "Not Found"),
        }
    }

    fn drop_pending_if_asked(&mut self, params: &Value) {
        if params["drop_pending_updates"] == json!(true) {
            self.pending.clear();
        }
    }

    /// The visible length of `text` once parsed with the call's `parse_mode`, or the refusal.
    fn parsed_length(&self, params: &Value, text: &str) -> Result<usize, Answer> {
        let plain = || text.chars().map(char::len_utf16).sum();
        let Some(mode) = params["parse_mode"].as_str().filter(|m| !m.is_empty()) else { return Ok(plain()) };
        match markup::check(mode, text) {
            None => Err(Answer::bad("unsupported parse_mode")),
            Some(_) if !self.check_markup => Ok(plain()),
            Some(Ok(length)) => Ok(length),
            Some(Err(error)) => Err(Answer::bad(&format!("can't parse entities: {error}"))),
        }
    }

    fn send_message(&mut self, params: &Value) -> Answer {
        let Some(chat_id) = as_i64(&params["chat_id"]) else { return Answer::bad("chat_id is empty") };
        let text = params["text"].as_str().unwrap_or_default();
        if text.trim().is_empty() {
            return Answer::bad("message text is empty");
        }
        match self.parsed_length(params, text) {
            Err(refused) => return refused,
            Ok(length) if length > 4096 => return Answer::bad("message is too long"),
            Ok(_) => {}
        }
        let mut fields = Map::new();
        fields.insert("text".into(), json!(text));
        Answer::ok(self.bot_message(chat_id, params, fields))
    }

    /// `sendDocument`, `sendPhoto`…: the file is the multipart part named `field`, or a file id given as text.
    fn send_file(&mut self, field: &str, params: &Value, files: &Files) -> Answer {
        let Some(chat_id) = as_i64(&params["chat_id"]) else { return Answer::bad("chat_id is empty") };
        let (name, bytes) = match files.iter().find(|(f, _, _)| f == field) {
            Some((_, name, bytes)) => (name.clone(), Bytes::copy_from_slice(bytes)),
            None => match params[field].as_str().and_then(|id| self.files.get(id)) {
                Some(file) => (file.path.rsplit('/').next().unwrap_or("file").to_string(), file.bytes.clone()),
                None => return Answer::bad(&format!("there is no {field} in the request")),
            },
        };
        if bytes.is_empty() {
            return Answer::bad("file must be non-empty");
        }
        let mut fields = Map::new();
        if let Some(caption) = params["caption"].as_str() {
            match self.parsed_length(params, caption) {
                Err(refused) => return refused,
                Ok(length) if length > 1024 => return Answer::bad("message caption is too long"),
                Ok(_) => {}
            }
            fields.insert("caption".into(), json!(caption));
        }
        if field == "photo" {
            fields.insert("photo".into(), self.photo_sizes(&bytes));
        } else {
            let (file_id, unique_id, _) = self.register_file("documents", &name, &bytes);
            fields.insert(
                "document".into(),
                json!({ "file_id": file_id, "file_unique_id": unique_id, "file_name": name,
                        "mime_type": mime_of(&name), "file_size": bytes.len() }),
            );
        }
        Answer::ok(self.bot_message(chat_id, params, fields))
    }

    /// A new message from the bot with `fields`, its reply target and its inline keyboard, kept for edits.
    fn bot_message(&mut self, chat_id: i64, params: &Value, fields: Map<String, Value>) -> Value {
        let message_id = self.next_bot_message_id;
        self.next_bot_message_id += 1;
        let mut message = Map::new();
        message.insert("message_id".into(), json!(message_id));
        message.insert("from".into(), bot_user());
        message.insert("chat".into(), chat(chat_id));
        message.insert("date".into(), json!(now()));
        message.extend(fields);
        let reply_to =
            as_i64(&params["reply_parameters"]["message_id"]).or_else(|| as_i64(&params["reply_to_message_id"]));
        if let Some(replied) = reply_to.and_then(|id| {
            self.user_messages.get(&(chat_id, id)).or_else(|| self.bot_messages.get(&(chat_id, id))).cloned()
        }) {
            let mut replied = replied;
            if let Some(replied) = replied.as_object_mut() {
                replied.remove("reply_to_message");
            }
            message.insert("reply_to_message".into(), replied);
        }
        let keyboard = inline_keyboard(&params["reply_markup"]);
        if !keyboard.is_null() {
            message.insert("reply_markup".into(), keyboard);
        }
        let message = Value::Object(message);
        self.bot_messages.insert((chat_id, message_id), message.clone());
        message
    }

    fn edit(&mut self, params: &Value, edit: Edit) -> Answer {
        if params["inline_message_id"].is_string() {
            return Answer::ok(json!(true));
        }
        let key = (as_i64(&params["chat_id"]).unwrap_or(0), as_i64(&params["message_id"]).unwrap_or(0));
        let new_text = match edit {
            Edit::Text | Edit::Caption => {
                let text = params[edit.field()].as_str().unwrap_or_default();
                if edit == Edit::Text && text.trim().is_empty() {
                    return Answer::bad("message text is empty");
                }
                match self.parsed_length(params, text) {
                    Err(refused) => return refused,
                    Ok(length) if length > edit.limit() => {
                        return Answer::bad(if edit == Edit::Text {
                            "message is too long"
                        } else {
                            "message caption is too long"
                        });
                    }
                    Ok(_) => Some(text.to_string()),
                }
            }
            Edit::Markup => None,
        };
        let keyboard = inline_keyboard(&params["reply_markup"]);
        let Some(message) = self.bot_messages.get_mut(&key).and_then(Value::as_object_mut) else {
            return Answer::bad("message to edit not found");
        };
        if edit == Edit::Text && !message.contains_key("text") {
            return Answer::bad("there is no text in the message to edit");
        }
        let current_keyboard = message.get("reply_markup").cloned().unwrap_or(Value::Null);
        let same_text =
            new_text.as_deref().is_none_or(|t| message.get(edit.field()).and_then(Value::as_str) == Some(t));
        if same_text && current_keyboard == keyboard {
            return Answer::bad(NOT_MODIFIED.trim_start_matches("Bad Request: "));
        }
        if let Some(text) = new_text {
            message.insert(edit.field().into(), json!(text));
        }
        match keyboard {
            Value::Null => message.remove("reply_markup"),
            keyboard => message.insert("reply_markup".into(), keyboard),
        };
        message.insert("edit_date".into(), json!(now()));
        Answer::ok(Value::Object(message.clone()))
    }

    /// Registers a file under `folder/` for `getFile`: (file id, unique id, path).
    fn register_file(&mut self, folder: &str, name: &str, bytes: &[u8]) -> (String, String, String) {
        let n = self.next_file;
        self.next_file += 1;
        let extension = name.rsplit_once('.').map_or("bin", |(_, ext)| ext);
        let file_id = format!("BQACAgQAAx{n:06}");
        let unique_id = format!("AgAD{n:04}");
        let path = format!("{folder}/file_{n}.{extension}");
        self.file_paths.insert(path.clone(), file_id.clone());
        self.files.insert(
            file_id.clone(),
            StoredFile { unique_id: unique_id.clone(), path: path.clone(), bytes: Bytes::copy_from_slice(bytes) },
        );
        (file_id, unique_id, path)
    }

    /// Two sizes of a photo, the larger (the bytes given) last; the small one is a prefix of them.
    fn photo_sizes(&mut self, bytes: &[u8]) -> Value {
        let small = &bytes[..bytes.len() / 2];
        let (small_id, small_unique, _) = self.register_file("photos", "thumb.jpg", small);
        let (large_id, large_unique, _) = self.register_file("photos", "photo.jpg", bytes);
        json!([
            { "file_id": small_id, "file_unique_id": small_unique, "width": 90, "height": 67, "file_size": small.len() },
            { "file_id": large_id, "file_unique_id": large_unique, "width": 800, "height": 600, "file_size": bytes.len() },
        ])
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Edit {
    Text,
    Caption,
    Markup,
}

impl Edit {
    fn field(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Caption | Self::Markup => "caption",
        }
    }

    fn limit(self) -> usize {
        if self == Self::Text { 4096 } else { 1024 }
    }
}

fn mime_of(name: &str) -> &'static str {
    match name.rsplit_once('.').map(|(_, ext)| ext.to_ascii_lowercase()).as_deref() {
        Some("txt" | "md" | "log") => "text/plain",
        Some("csv") => "text/csv",
        Some("json") => "application/json",
        Some("pdf") => "application/pdf",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("zip") => "application/zip",
        _ => "application/octet-stream",
    }
}
