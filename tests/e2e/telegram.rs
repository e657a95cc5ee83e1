//! The Telegram channel of the real daemon against a fake Bot API ([`FakeTelegram`]): what a user sees in each
//! chat (answers, refusals, stops, long answers, approval buttons, files), how formatting errors and flood
//! control are handled, webhook mode, and what a crash, a signal, a revoked token or a broken poll do.

use minibot_e2e::{Home, Reply, Script, ScriptedLlm, requests_for};
use minibot_test_support::FakeTelegram;
use minibot_test_support::fake_telegram::{Call, describe, http_request, sent_texts};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The longest any single wait of these tests may take.
const WAIT: Duration = Duration::from_secs(60);

/// A running `minibot` daemon; killed when dropped.
pub(crate) struct Daemon {
    child: Child,
    log: Arc<Mutex<String>>,
}

impl Daemon {
    /// `minibot --verbose --config <home>`: logs on stderr.
    pub(crate) fn start(home: &Home) -> Self {
        Self::spawn(home, &["--verbose"])
    }

    fn spawn(home: &Home, args: &[&str]) -> Self {
        let mut command = home.minibot(args);
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = command.spawn().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let stdout: Box<dyn Read + Send> = Box::new(child.stdout.take().unwrap());
        let stderr: Box<dyn Read + Send> = Box::new(child.stderr.take().unwrap());
        for stream in [stdout, stderr] {
            let log = log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    let mut log = log.lock().unwrap();
                    log.push_str(&line);
                    log.push('\n');
                }
            });
        }
        Self { child, log }
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// The last lines of the log, for a failure message.
    pub(crate) fn log_tail(&self) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(120)..].join("\n")
    }

    pub(crate) fn signal(&self, signal: &str) {
        let status = std::process::Command::new("kill").arg(signal).arg(self.child.id().to_string()).status().unwrap();
        assert!(status.success(), "kill {signal} failed");
    }

    /// SIGKILL, as a crash would, and reap the process.
    pub(crate) fn kill_hard(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits for the daemon to exit by itself.
    pub(crate) async fn exit_status(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the daemon did not exit within {within:?}; log:\n{}", self.log_tail());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until `cond` holds; fails with the daemon's log and the Bot API calls when it does not in time or the
    /// daemon exits first.
    pub(crate) async fn until(&mut self, fake: &FakeTelegram, what: &str, cond: impl Fn() -> bool) {
        let deadline = Instant::now() + WAIT;
        loop {
            if cond() {
                return;
            }
            let exited = self.child.try_wait().unwrap();
            if exited.is_some() || Instant::now() > deadline {
                let why =
                    exited.map_or_else(|| format!("timed out after {WAIT:?}"), |s| format!("the daemon exited ({s})"));
                panic!(
                    "waiting for {what}: {why}\n--- daemon log ---\n{}\n--- Bot API calls ---\n{}",
                    self.log_tail(),
                    describe(&fake.calls())
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.kill_hard();
        }
    }
}

/// A home whose config runs the bot against `fake`: `telegram` goes into `[channels.telegram]`, `rest` after it.
pub(crate) fn home(llm: &ScriptedLlm, fake: &FakeTelegram, telegram: &str, rest: &str) -> Home {
    let section = format!(
        "[channels.telegram]\nbot_token = \"{}\"\napi_base_url = \"{}\"\npoll_timeout_seconds = 1\n{telegram}\n{rest}",
        FakeTelegram::TOKEN,
        fake.base_url()
    );
    Home::new(&llm.base_url(), &section)
}

pub(crate) const OPEN: &str = "require_authorized = false\n";

/// `[tools.file_storage]` rooted at `<home>/files`, with the folder created.
fn file_storage(root: &Path) -> String {
    std::fs::create_dir_all(root).unwrap();
    format!("[tools.file_storage]\nenabled = true\nroot_dir = \"{}\"\n", root.display())
}

/// The text as the user reads it: MarkdownV2 escapes removed.
pub(crate) fn visible(call: &Call) -> String {
    let text = call.text().unwrap_or_default();
    if call.parse_mode() != Some("MarkdownV2") {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('\\', Some(next)) if next.is_ascii_punctuation() => {
                out.push(*next);
                chars.next();
            }
            _ => out.push(c),
        }
    }
    out
}

/// The successful `sendMessage` calls to `chat_id`.
fn messages_to(calls: &[Call], chat_id: i64) -> Vec<Call> {
    calls.iter().filter(|c| c.method == "sendMessage" && c.ok() && c.chat_id() == Some(chat_id)).cloned().collect()
}

/// Whether a successful message to `chat_id` reads `text`.
fn shows(fake: &FakeTelegram, chat_id: i64, text: &str) -> bool {
    messages_to(&fake.calls(), chat_id).iter().any(|c| visible(c) == text)
}

/// The last user message of each model request.
fn user_texts(llm: &ScriptedLlm) -> Vec<String> {
    llm.requests()
        .iter()
        .filter_map(|r| {
            let messages = r["messages"].as_array()?;
            let user = messages.iter().rev().find(|m| m["role"] == "user")?;
            user["content"].as_str().map(str::to_string)
        })
        .collect()
}

/// Every user message of every model request.
fn all_user_texts(llm: &ScriptedLlm) -> Vec<String> {
    let requests = llm.requests();
    let messages = requests.iter().filter_map(|r| r["messages"].as_array()).flatten();
    messages.filter(|m| m["role"] == "user").filter_map(|m| m["content"].as_str().map(str::to_string)).collect()
}

/// An answer as the user should see it: MarkdownV2, replying to the user's message.
fn assert_answer(call: &Call, text: &str, reply_to: i64) {
    assert_eq!(call.parse_mode(), Some("MarkdownV2"), "{call:?}");
    assert_eq!(visible(call), text, "{call:?}");
    assert_eq!(call.reply_to(), Some(reply_to), "{call:?}");
}

#[tokio::test]
async fn two_chats_are_answered_at_once() {
    let llm = ScriptedLlm::start(vec![
        Script::new("first question", vec![Reply::text("first answer")]).delay(Duration::from_millis(1500)),
        Script::new("second question", vec![Reply::text("second answer")]).delay(Duration::from_millis(1500)),
    ])
    .await;
    let fake = FakeTelegram::start().await;
    let home = home(&llm, &fake, OPEN, "");
    let mut daemon = Daemon::start(&home);
    let (_, first) = fake.push_text(1, 1, "first question");
    let (_, second) = fake.push_text(2, 2, "second question");
    daemon.until(&fake, "both answers", || shows(&fake, 1, "first answer") && shows(&fake, 2, "second answer")).await;

    let calls = fake.calls();
    let to_first = messages_to(&calls, 1);
    let to_second = messages_to(&calls, 2);
    assert_eq!(to_first.len(), 1, "{to_first:?}");
    assert_eq!(to_second.len(), 1, "{to_second:?}");
    assert_answer(&to_first[0], "first answer", first);
    assert_answer(&to_second[0], "second answer", second);
    // Concurrency by order: the second chat's question reached the model before the first answer went out.
    let texts = user_texts(&llm);
    let second_request = texts.iter().position(|t| t == "second question").unwrap();
    let second_arrival = llm.arrivals()[second_request];
    assert!(second_arrival < to_first[0].at, "chat 2 waited for chat 1: the chats were served one after the other");
}

#[tokio::test]
async fn an_unknown_user_is_refused_without_asking_the_model() {
    let llm = ScriptedLlm::start(vec![Script::new("hello from a friend", vec![Reply::text("hi friend")])]).await;
    let fake = FakeTelegram::start().await;
    let home = home(&llm, &fake, "allowed_chat_ids = [1]\n", "");
    let mut daemon = Daemon::start(&home);
    fake.push_text(2, 7, "hello from a stranger");
    daemon.until(&fake, "the refusal", || !messages_to(&fake.calls(), 2).is_empty()).await;
    let refusals = messages_to(&fake.calls(), 2);
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    assert_eq!(visible(&refusals[0]), "User not recognized. Access denied. chat_id=2 user_id=7");

    // The allowed chat is served, and only it reached the model.
    fake.push_text(1, 1, "hello from a friend");
    daemon.until(&fake, "the friend's answer", || shows(&fake, 1, "hi friend")).await;
    assert_eq!(user_texts(&llm), ["hello from a friend"]);
}

#[tokio::test]
async fn stop_ends_a_running_turn() {
    let llm = ScriptedLlm::start(vec![
        Script::new("work slowly", vec![Reply::text("slow answer")]).delay(Duration::from_secs(5)),
    ])
    .await;
    let fake = FakeTelegram::start().await;
    let home = home(&llm, &fake, OPEN, "");
    let mut daemon = Daemon::start(&home);
    fake.push_text(1, 1, "work slowly");
    daemon.until(&fake, "the model's request", || requests_for(&llm, "work slowly") == 1).await;
    fake.push_text(1, 1, "/stop");
    daemon.until(&fake, "Stopped.", || shows(&fake, 1, "Stopped.")).await;
    // Past the model's delay: the stopped turn never answers.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let texts: Vec<String> = messages_to(&fake.calls(), 1).iter().map(visible).collect();
    assert!(!texts.iter().any(|t| t.contains("slow answer")), "the stopped turn answered: {texts:?}");
    assert_eq!(texts.iter().filter(|t| *t == "Stopped.").count(), 1, "{texts:?}");
}

/// The `path=` of `name` in the model's "Incoming managed files" block.
fn incoming_path(text: &str, name: &str) -> String {
    let line =
        text.lines().find(|l| l.starts_with(&format!("- {name} ("))).unwrap_or_else(|| panic!("{name} in {text}"));
    let start = line.find("path=").unwrap() + "path=".len();
    line[start..].split(", ").next().unwrap().to_string()
}

#[tokio::test]
async fn photos_and_documents_reach_the_model_as_managed_files() {
    let llm =
        ScriptedLlm::start(vec![Script::containing("Incoming managed files", vec![Reply::text("got the file")])]).await;
    let fake = FakeTelegram::start().await;
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().join("files");
    let home = home(&llm, &fake, OPEN, &file_storage(&root));
    let mut daemon = Daemon::start(&home);
    let photo: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
    fake.push_photo(1, 1, &photo, Some("what is this"));
    fake.push_document(1, 1, "notes.txt", "text/plain", b"hello notes", None);
    // Both messages may reach the model in one turn (a chat's queued messages are read together) or in two.
    let seen = |source: &str| all_user_texts(&llm).iter().any(|t| t.contains(source));
    daemon
        .until(&fake, "the answer to both files", || {
            seen("source=photo") && seen("source=document") && !messages_to(&fake.calls(), 1).is_empty()
        })
        .await;

    let texts = all_user_texts(&llm);
    let photo_text = texts.iter().find(|t| t.contains("source=photo")).unwrap_or_else(|| panic!("{texts:?}"));
    let document_text = texts.iter().find(|t| t.contains("source=document")).unwrap_or_else(|| panic!("{texts:?}"));
    assert!(photo_text.contains("what is this"), "{photo_text}");
    assert!(document_text.contains("Incoming managed files:"), "{document_text}");
    assert!(document_text.contains("notes.txt"), "{document_text}");

    let document_path = incoming_path(document_text, "notes.txt");
    assert!(document_path.starts_with("uploads/temp/telegram/"), "{document_path}");
    assert_eq!(std::fs::read(root.join(&document_path)).unwrap(), b"hello notes");
    let photo_line = photo_text.lines().find(|l| l.contains("source=photo")).unwrap();
    let photo_name = photo_line.trim_start_matches("- ").split(" (").next().unwrap();
    let photo_path = incoming_path(photo_text, photo_name);
    assert!(photo_path.starts_with("uploads/temp/telegram/"), "{photo_path}");
    assert_eq!(std::fs::read(root.join(&photo_path)).unwrap(), photo, "the largest size is saved");
    // Uploads are private whatever the umask, and the hidden name each is written under first is gone.
    for path in [&document_path, &photo_path] {
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(root.join(path)).unwrap().permissions());
        assert_eq!(format!("{:o}", mode & 0o777), "600", "{path}");
        let folder = root.join(path).parent().unwrap().to_path_buf();
        let names: Vec<String> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(!names.iter().any(|n| n.ends_with(".part")), "{names:?}");
    }
    for answer in messages_to(&fake.calls(), 1) {
        assert_eq!(visible(&answer), "got the file");
    }
}

#[tokio::test]
async fn start_greets_without_asking_the_model() {
    let llm = ScriptedLlm::start(vec![]).await;
    let fake = FakeTelegram::start().await;
    let home = home(&llm, &fake, OPEN, "");
    let mut daemon = Daemon::start(&home);
    fake.push_text(1, 1, "/start");
    daemon.until(&fake, "the greeting", || !messages_to(&fake.calls(), 1).is_empty()).await;
    let greeting = visible(&messages_to(&fake.calls(), 1)[0]);
    assert!(!greeting.trim().is_empty());
    assert!(greeting.contains("/stop"), "the greeting tells the commands: {greeting}");
    assert!(llm.requests().is_empty(), "/start reached the model");
}

const WORDS: &[&str] = &["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"];

#[tokio::test]
async fn a_long_answer_is_split_into_several_messages() {
    let paragraphs: Vec<String> = (1..=30)
        .map(|i| (0..50).map(|j| format!("{}{i:02}", WORDS[j % WORDS.len()])).collect::<Vec<_>>().join(" "))
        .collect();
    let code = "```\nfn main() {\n    let total = 6 * 7;\n}\n```";
    let answer = format!("{}\n\n{code}\n\n{}", paragraphs[..12].join("\n\n"), paragraphs[12..].join("\n\n"));
    assert!(answer.len() > 10_000);
    let llm = ScriptedLlm::start(vec![Script::new("tell me everything", vec![Reply::text(&answer)])]).await;
    let fake = FakeTelegram::start().await;
    let home = home(&llm, &fake, OPEN, "");
    let mut daemon = Daemon::start(&home);
    let (_, asked) = fake.push_text(1, 1, "tell me everything");
    let last_word = "juliet30";
    daemon
        .until(&fake, "the whole answer", || {
            messages_to(&fake.calls(), 1).iter().any(|c| visible(c).contains(last_word))
        })
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    let parts = messages_to(&fake.calls(), 1);
    assert!(parts.len() >= 3, "{} messages", parts.len());
    for (i, part) in parts.iter().enumerate() {
        let text = part.text().unwrap();
        assert!(text.chars().count() <= 4096, "part {i} has {} characters", text.chars().count());
        assert_eq!(part.parse_mode(), Some("MarkdownV2"), "part {i}");
        if i == 0 {
            assert_eq!(part.reply_to(), Some(asked), "the first part replies to the question");
        } else {
            assert_eq!(part.reply_to(), None, "part {i} replies too");
        }
    }
    // Every word, in order, and the code block with it.
    let shown: String = parts.iter().map(visible).collect::<Vec<_>>().join("\n");
    let mut from = 0;
    for word in paragraphs.iter().flat_map(|p| p.split(' ')) {
        let at = shown[from..].find(word).unwrap_or_else(|| panic!("`{word}` missing or out of order"));
        from += at + word.len();
    }
    assert!(shown.contains("let total = 6 * 7;"), "the code block is missing: {shown}");
    assert!(shown.find("let total").unwrap() < shown.find("alpha13").unwrap());
    assert!(shown.find("let total").unwrap() > shown.find("alpha12").unwrap());
}

fn has_parse_mode(params: &Value) -> bool {
    params.get("parse_mode").and_then(Value::as_str).is_some_and(|m| !m.is_empty())
}

#[tokio::test]
async fn a_rejected_format_is_sent_again_as_plain_text() {
    let llm = ScriptedLlm::start(vec![Script::new("say it", vec![Reply::text("all good here")])]).await;
    let fake = FakeTelegram::start().await;
    let (status, body) = FakeTelegram::parse_error();
    fake.fail_next_if("sendMessage", has_parse_mode, status, body);
    let home = home(&llm, &fake, &format!("{OPEN}format_repair_enabled = false\n"), "");
    let mut daemon = Daemon::start(&home);
    fake.push_text(1, 1, "say it");
    daemon.until(&fake, "the plain resend", || !messages_to(&fake.calls(), 1).is_empty()).await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    let sends = fake.calls_of("sendMessage");
    assert_eq!(sends.len(), 2, "{}", describe(&sends));
    assert_eq!((sends[0].status, sends[0].parse_mode()), (400, Some("MarkdownV2")));
    assert!(sends[1].ok());
    assert_eq!(sends[1].parse_mode(), None, "the resend is plain");
    assert_eq!(sends[1].text(), Some("all good here"));
    assert_eq!(llm.requests().len(), 1, "no repair request with repair turned off");
}

/// A model that answers `question` with `answer` and repairs formatting with `repaired`.
async fn repairing_model(question: &str, answer: &str, repaired: &str) -> ScriptedLlm {
    ScriptedLlm::start(vec![
        Script::new(question, vec![Reply::text(answer)]),
        Script::containing("The message:", vec![Reply::text(repaired)]),
    ])
    .await
}

/// The repair request: no tools, a system message about formatting.
fn repair_requests(llm: &ScriptedLlm) -> Vec<Value> {
    llm.requests()
        .into_iter()
        .filter(|r| {
            let no_tools = r.get("tools").and_then(Value::as_array).is_none_or(Vec::is_empty);
            let system = r["messages"][0]["content"].as_str().unwrap_or_default();
            no_tools && r["messages"][0]["role"] == "system" && system.contains("formatting")
        })
        .collect()
}

#[tokio::test]
async fn a_rejected_format_is_repaired_by_the_model() {
    let llm = repairing_model("say it nicely", "nice words here", "repaired words here").await;
    let fake = FakeTelegram::start().await;
    let (status, body) = FakeTelegram::parse_error();
    fake.fail_next_if("sendMessage", has_parse_mode, status, body);
    let home = home(&llm, &fake, OPEN, "");
    let mut daemon = Daemon::start(&home);
    fake.push_text(1, 1, "say it nicely");
    daemon.until(&fake, "the repaired answer", || !messages_to(&fake.calls(), 1).is_empty()).await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    assert_eq!(repair_requests(&llm).len(), 1, "{:?}", llm.requests());
    let sent = messages_to(&fake.calls(), 1);
    assert_eq!(sent.len(), 1, "{}", describe(&sent));
    assert_eq!(sent[0].parse_mode(), Some("MarkdownV2"));
    assert_eq!(visible(&sent[0]), "repaired words here");
}

#[tokio::test]
async fn a_repaired_answer_that_is_rejected_again_is_sent_plain() {
    let llm = repairing_model("say it nicely", "nice words here", "repaired words here").await;
    let fake = FakeTelegram::start().await;
    for _ in 0..2 {
        let (status, body) = FakeTelegram::parse_error();
        fake.fail_next_if("sendMessage", has_parse_mode, status, body);
    }
    let home = home(&llm, &fake, OPEN, "");
    let mut daemon = Daemon::start(&home);
    fake.push_text(1, 1, "say it nicely");
    daemon.until(&fake, "the plain resend", || !messages_to(&fake.calls(), 1).is_empty()).await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    assert_eq!(repair_requests(&llm).len(), 1, "one repair attempt (format_repair_max_attempts = 1)");
    let sends = fake.calls_of("sendMessage");
    assert_eq!(sends.iter().filter(|c| c.status == 400).count(), 2, "{}", describe(&sends));
    let sent = messages_to(&sends, 1);
    assert_eq!(sent.len(), 1, "{}", describe(&sends));
    assert_eq!(sent[0].parse_mode(), None);
    // The plain resend carries the model's answer as it first wrote it, not the failed repair.
    assert_eq!(sent[0].text(), Some("nice words here"));
}

// The marker lies outside any folder a `contain` command may write: bash runs in basic mode here.
const GATED: &str =
    "[tools.bash]\nenabled = true\nsandbox_mode = \"basic\"\n[tools.approval]\nrequire_approval = [\"bash\"]\n";

/// A model that runs `touch <marker>` through bash when asked, then answers "done".
async fn marker_model(marker: &Path) -> ScriptedLlm {
    let command = json!({ "command": format!("touch {}", marker.display()) });
    ScriptedLlm::start(vec![Script::new("make the marker", vec![Reply::tool("bash", command), Reply::text("done")])])
        .await
}

/// Waits for the approval question; answers its message id and the data of its yes and no buttons.
async fn approval_question(daemon: &mut Daemon, fake: &FakeTelegram) -> (i64, String, String) {
    let asked = |calls: &[Call]| calls.iter().find(|c| c.ok() && !c.button_data().is_empty()).cloned();
    daemon.until(fake, "the approval question", || asked(&fake.calls()).is_some()).await;
    let question = asked(&fake.calls()).unwrap();
    let data = question.button_data();
    assert_eq!(data.len(), 2, "{question:?}");
    let id = data[0].strip_prefix("approval:").and_then(|d| d.strip_suffix(":y")).unwrap_or_else(|| panic!("{data:?}"));
    assert_eq!(data[1], format!("approval:{id}:n"));
    assert!(question.text().unwrap().contains("bash"), "{question:?}");
    (question.message_id().unwrap(), data[0].clone(), data[1].clone())
}

/// The `text` of the answerCallbackQuery calls so far.
fn click_answers(fake: &FakeTelegram) -> Vec<String> {
    fake.calls_of("answerCallbackQuery")
        .iter()
        .map(|c| c.params["text"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test]
async fn an_approval_is_answered_with_the_buttons_by_the_requester_only() {
    let scratch = tempfile::tempdir().unwrap();
    let marker = scratch.path().join("marker");
    let llm = marker_model(&marker).await;
    let fake = FakeTelegram::start().await;
    let home = home(&llm, &fake, OPEN, GATED);
    let mut daemon = Daemon::start(&home);
    fake.push_text(1, 1, "make the marker");
    let (question, yes, _no) = approval_question(&mut daemon, &fake).await;

    fake.push_callback(1, 99, question, &yes);
    daemon.until(&fake, "the refusal of another user's click", || !click_answers(&fake).is_empty()).await;
    assert_eq!(click_answers(&fake), ["Only the requester can answer this."]);
    assert!(!marker.exists(), "another user's click approved the call");

    fake.push_callback(1, 1, question, &yes);
    daemon.until(&fake, "done", || shows(&fake, 1, "done")).await;
    assert!(marker.exists(), "the approved command did not run");
    let result = last_tool_result(&llm);
    assert_eq!(result["ok"], true, "{result}");

    fake.push_callback(1, 1, question, &yes);
    daemon.until(&fake, "the stale click's answer", || click_answers(&fake).len() >= 3).await;
    assert_eq!(click_answers(&fake).last().map(String::as_str), Some("Expired"));
}

/// The result of the last tool call, as the model read it.
fn last_tool_result(llm: &ScriptedLlm) -> Value {
    let requests = llm.requests();
    let last = requests.last().unwrap();
    let tool = last["messages"].as_array().unwrap().iter().rev().find(|m| m["role"] == "tool").cloned().unwrap();
    serde_json::from_str(tool["content"].as_str().unwrap()).unwrap()
}

#[tokio::test]
async fn a_denied_approval_does_not_run_the_call() {
    let scratch = tempfile::tempdir().unwrap();
    let marker = scratch.path().join("marker");
    let llm = marker_model(&marker).await;
    let fake = FakeTelegram::start().await;
    let home = home(&llm, &fake, OPEN, GATED);
    let mut daemon = Daemon::start(&home);
    fake.push_text(1, 1, "make the marker");
    let (question, _yes, no) = approval_question(&mut daemon, &fake).await;
    fake.push_callback(1, 1, question, &no);
    daemon.until(&fake, "done", || shows(&fake, 1, "done")).await;
    assert!(!marker.exists(), "the denied command ran");
    let result = last_tool_result(&llm);
    assert_eq!(result["error_code"], "tool_approval:denied", "{result}");
    assert!(result["error"].as_str().unwrap().contains("did not approve bash"), "{result}");
}

#[tokio::test]
async fn send_file_delivers_a_document_before_the_answer() {
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().join("files");
    let storage = file_storage(&root);
    std::fs::create_dir_all(root.join("reports")).unwrap();
    std::fs::write(root.join("reports/summary.txt"), "quarterly numbers\n").unwrap();
    let llm = ScriptedLlm::start(vec![Script::new(
        "send me the summary",
        vec![
            Reply::tool("send_file", json!({ "path": "reports/summary.txt", "caption": "here" })),
            Reply::text("sent you the summary"),
        ],
    )])
    .await;
    let fake = FakeTelegram::start().await;
    let home = home(&llm, &fake, OPEN, &storage);
    let mut daemon = Daemon::start(&home);
    fake.push_text(1, 1, "send me the summary");
    daemon.until(&fake, "the answer", || shows(&fake, 1, "sent you the summary")).await;

    let calls = fake.calls();
    let document = calls.iter().position(|c| c.method == "sendDocument" && c.ok());
    let document = document.unwrap_or_else(|| panic!("no sendDocument:\n{}", describe(&calls)));
    let answer = calls.iter().position(|c| c.method == "sendMessage" && c.ok()).unwrap();
    assert!(document < answer, "the file came after the answer");
    let call = &calls[document];
    assert_eq!(call.chat_id(), Some(1));
    assert_eq!(call.text(), Some("here"));
    assert_eq!(call.files.len(), 1, "{call:?}");
    let (field, name, bytes) = &call.files[0];
    assert_eq!((field.as_str(), name.as_str()), ("document", "summary.txt"));
    assert_eq!(bytes, b"quarterly numbers\n");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// POSTs an update to the daemon's webhook, waiting for the listener to come up.
async fn post_update(daemon: &mut Daemon, port: u16, secret: &str, update: &Value) -> u16 {
    let url = format!("http://127.0.0.1:{port}/tg/hook");
    let headers = [("Content-Type", "application/json"), ("X-Telegram-Bot-Api-Secret-Token", secret)];
    let deadline = Instant::now() + WAIT;
    loop {
        match http_request("POST", &url, &headers, update.to_string().as_bytes()).await {
            Ok(response) => return response.status,
            Err(error) => assert!(
                Instant::now() < deadline,
                "the webhook at {url} never answered: {error}\n{}",
                daemon.log_tail()
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn update(update_id: i64, message_id: i64, text: &str) -> Value {
    json!({ "update_id": update_id, "message": {
        "message_id": message_id, "date": 1_700_000_000,
        "from": { "id": 1, "is_bot": false, "first_name": "User1" },
        "chat": { "id": 1, "type": "private", "first_name": "User1" },
        "text": text,
    } })
}

#[tokio::test]
async fn webhook_mode_checks_the_secret_and_long_polling_deletes_the_webhook() {
    let llm = ScriptedLlm::start(vec![
        Script::new("through the hook", vec![Reply::text("hooked answer")]),
        Script::new("through polling", vec![Reply::text("polled answer")]),
    ])
    .await;
    let fake = FakeTelegram::start().await;
    let port = free_port();
    let webhook = format!(
        "{OPEN}mode = \"webhook\"\nwebhook_url = \"https://bot.example.test/tg/hook\"\n\
         webhook_listen = \"127.0.0.1:{port}\"\nwebhook_secret_token = \"s3cret\"\n"
    );
    let home = home(&llm, &fake, &webhook, "");
    let mut daemon = Daemon::start(&home);
    daemon.until(&fake, "setWebhook", || !fake.calls_of("setWebhook").is_empty()).await;
    let set = &fake.calls_of("setWebhook")[0];
    assert_eq!(set.params["url"], "https://bot.example.test/tg/hook");
    assert_eq!(set.params["secret_token"], "s3cret");

    let wrong = post_update(&mut daemon, port, "wrong", &update(500, 40, "through the hook")).await;
    assert_eq!(wrong, 401);
    let right = post_update(&mut daemon, port, "s3cret", &update(501, 41, "through the hook")).await;
    assert_eq!(right, 200);
    daemon.until(&fake, "the hooked answer", || shows(&fake, 1, "hooked answer")).await;
    assert_eq!(requests_for(&llm, "through the hook"), 1, "the update with the wrong secret reached the model");
    assert_eq!(messages_to(&fake.calls(), 1)[0].reply_to(), Some(41));
    assert!(fake.calls_of("getUpdates").is_empty(), "webhook mode polled");

    daemon.signal("-TERM");
    assert!(daemon.exit_status(WAIT).await.success(), "{}", daemon.log_tail());
    let config =
        std::fs::read_to_string(home.config()).unwrap().replace("mode = \"webhook\"", "mode = \"long_polling\"");
    std::fs::write(home.config(), config).unwrap();
    let mut daemon = Daemon::start(&home);
    daemon.until(&fake, "deleteWebhook", || !fake.calls_of("deleteWebhook").is_empty()).await;
    assert!(fake.webhook().is_none());
    fake.push_text(1, 1, "through polling");
    daemon.until(&fake, "the polled answer", || shows(&fake, 1, "polled answer")).await;
}

#[tokio::test]
async fn flood_control_is_waited_out_and_the_answer_sent_once() {
    let llm = ScriptedLlm::start(vec![Script::new("are you there", vec![Reply::text("yes I am")])]).await;
    let fake = FakeTelegram::start().await;
    let (status, body) = FakeTelegram::too_many_requests(1);
    fake.fail_next("sendMessage", status, body);
    let home = home(&llm, &fake, OPEN, "");
    let mut daemon = Daemon::start(&home);
    fake.push_text(1, 1, "are you there");
    daemon.until(&fake, "the answer", || shows(&fake, 1, "yes I am")).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let sends = fake.calls_of("sendMessage");
    assert_eq!(sends.len(), 2, "{}", describe(&sends));
    assert_eq!(sends[0].status, 429);
    assert!(sends[1].ok());
    let waited = sends[1].at.duration_since(sends[0].at);
    assert!(waited >= Duration::from_millis(950), "retried after {waited:?}, before retry_after");
    assert_eq!(sent_texts(&fake.calls(), 1).len(), 1);
}

#[tokio::test]
async fn a_message_caught_by_a_crash_is_answered_once_after_the_restart() {
    let llm = ScriptedLlm::start(vec![Script::new("remember me", vec![Reply::text("answered after all")])]).await;
    llm.set_default_delay(Duration::from_secs(4));
    let fake = FakeTelegram::start().await;
    let home = home(&llm, &fake, OPEN, "");
    let mut daemon = Daemon::start(&home);
    fake.push_text(1, 1, "remember me");
    daemon.until(&fake, "the model's request", || requests_for(&llm, "remember me") == 1).await;
    daemon.kill_hard();
    assert!(sent_texts(&fake.calls(), 1).is_empty(), "answered before the crash");

    llm.set_default_delay(Duration::ZERO);
    let mut daemon = Daemon::start(&home);
    daemon.until(&fake, "the answer", || shows(&fake, 1, "answered after all")).await;
    daemon.until(&fake, "the update confirmed", || fake.pending_updates() == 0).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let answers: Vec<String> = messages_to(&fake.calls(), 1).iter().map(visible).collect();
    assert_eq!(answers, ["answered after all"]);
    assert_eq!(requests_for(&llm, "remember me"), 2, "the turn was replayed");
}

#[tokio::test]
async fn an_answer_telegram_did_not_take_before_a_crash_is_sent_after_the_restart() {
    let llm = ScriptedLlm::start(vec![Script::new("keep my answer", vec![Reply::text("kept for you")])]).await;
    let fake = FakeTelegram::start().await;
    // Telegram's side is down: the sends of the answer fail, and the daemon keeps trying (0.5 s, then 1 s later).
    for _ in 0..3 {
        fake.fail_next("sendMessage", 502, json!({"ok": false, "error_code": 502, "description": "Bad Gateway"}));
    }
    let home = home(&llm, &fake, OPEN, "");
    let mut daemon = Daemon::start(&home);
    fake.push_text(1, 1, "keep my answer");
    daemon.until(&fake, "two failed sends", || fake.calls_of("sendMessage").len() >= 2).await;
    daemon.kill_hard();
    assert!(sent_texts(&fake.calls(), 1).is_empty(), "delivered before the crash");

    let mut daemon = Daemon::start(&home);
    daemon.until(&fake, "the answer", || shows(&fake, 1, "kept for you")).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let answers: Vec<String> = messages_to(&fake.calls(), 1).iter().map(visible).collect();
    assert_eq!(answers, ["kept for you"], "sent once");
    assert_eq!(requests_for(&llm, "keep my answer"), 1, "the answer was kept, the turn not run again");
    assert!(daemon.log().contains("interrupted"), "{}", daemon.log_tail());
}

#[tokio::test]
async fn a_revoked_token_stops_the_daemon_with_one_line() {
    let llm = ScriptedLlm::start(vec![]).await;
    let fake = FakeTelegram::start().await;
    fake.set_token_valid(false);
    let home = home(&llm, &fake, OPEN, "");
    let mut daemon = Daemon::spawn(&home, &[]);
    let status = daemon.exit_status(Duration::from_secs(30)).await;
    let log = daemon.log();
    assert!(!status.success(), "{log}");
    let naming: Vec<&str> = log.lines().filter(|l| l.contains("channels.telegram.bot_token")).collect();
    assert_eq!(naming.len(), 1, "{log}");
    assert!(!log.contains(FakeTelegram::TOKEN), "the token was printed: {log}");
}

#[tokio::test]
async fn sigterm_lets_a_running_turn_finish() {
    let llm = ScriptedLlm::start(vec![
        Script::new("finish this", vec![Reply::text("finished")]).delay(Duration::from_secs(2)),
    ])
    .await;
    let fake = FakeTelegram::start().await;
    let home = home(&llm, &fake, OPEN, "");
    let mut daemon = Daemon::start(&home);
    fake.push_text(1, 1, "finish this");
    daemon.until(&fake, "the model's request", || requests_for(&llm, "finish this") == 1).await;
    daemon.signal("-TERM");
    let status = daemon.exit_status(WAIT).await;
    assert!(status.success(), "exit {status}: {}", daemon.log_tail());
    assert!(shows(&fake, 1, "finished"), "the answer was not sent:\n{}", describe(&fake.calls()));
}

#[tokio::test]
async fn a_broken_poll_is_restarted() {
    let llm = ScriptedLlm::start(vec![Script::new("still there", vec![Reply::text("still here")])]).await;
    let fake = FakeTelegram::start().await;
    fake.fail_next_raw("getUpdates", 200, "not json");
    let home = home(&llm, &fake, OPEN, "");
    let mut daemon = Daemon::start(&home);
    daemon.until(&fake, "the broken poll", || !fake.calls_of("getUpdates").is_empty()).await;
    fake.push_text(1, 1, "still there");
    daemon.until(&fake, "the answer", || shows(&fake, 1, "still here")).await;
    let log = daemon.log();
    assert!(log.to_lowercase().contains("restarting"), "{log}");
}

#[tokio::test]
async fn an_update_this_version_cannot_read_is_skipped_and_the_next_answered() {
    let llm = ScriptedLlm::start(vec![Script::new("after the odd one", vec![Reply::text("answered anyway")])]).await;
    let fake = FakeTelegram::start().await;
    // A chat type a newer Bot API might send: the library cannot read the update.
    let odd = json!({ "message": {
        "message_id": 900, "date": 1_700_000_000, "text": "hello",
        "chat": { "id": 3, "type": "galaxy" }, "from": { "id": 3, "is_bot": false, "first_name": "x" }
    }});
    fake.push_raw(odd);
    fake.push_text(1, 1, "after the odd one");
    let home = home(&llm, &fake, OPEN, "");
    let mut daemon = Daemon::start(&home);
    daemon.until(&fake, "the answer after the unreadable update", || shows(&fake, 1, "answered anyway")).await;
    daemon.until(&fake, "both updates confirmed", || fake.pending_updates() == 0).await;
    assert!(sent_texts(&fake.calls(), 3).is_empty(), "nothing was sent for the unreadable update");
    assert!(daemon.log().contains("cannot read"), "{}", daemon.log_tail());
}

#[tokio::test]
async fn a_stop_before_a_message_in_one_batch_does_not_stop_that_message() {
    let llm = ScriptedLlm::start(vec![Script::new("do this instead", vec![Reply::text("done instead")])]).await;
    let fake = FakeTelegram::start().await;
    // Both wait for the daemon's first poll, so they arrive in one batch, in this order.
    fake.push_text(1, 1, "/stop");
    fake.push_text(1, 1, "do this instead");
    let home = home(&llm, &fake, OPEN, "");
    let mut daemon = Daemon::start(&home);
    daemon.until(&fake, "the answer", || shows(&fake, 1, "done instead")).await;
    let texts = sent_texts(&fake.calls(), 1);
    assert!(!texts.iter().any(|t| t.contains("Stopped")), "the message after /stop was stopped: {texts:?}");
}
