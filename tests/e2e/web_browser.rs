//! The web UI in a real headless Chromium, driven over WebDriver by a chromedriver each test starts: logging in,
//! a streamed answer, approving and denying a gated tool, stopping a turn, attaching an image, a background
//! task's progress on /tasks, and searching the history. Every page visited is saved as a screenshot under
//! `$CARGO_TARGET_DIR/web-screenshots/` and must leave no error in the browser console (a refused script or
//! style, a failed request, an exception).
//!
//! The WebDriver client is fantoccini over a plain-HTTP `hyper-util` connector (chromedriver is on loopback).

use fantoccini::elements::Element;
use fantoccini::wd::{Capabilities, WebDriverCompatibleCommand};
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use minibot_e2e::web::{WebDaemon, http_config};
use minibot_e2e::{Home, Reply, Script, ScriptedLlm};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Chromium takes seconds to start on two cores, and a page may wait for a slow model.
const WAIT: Duration = Duration::from_secs(60);
/// Streamed in three pieces: "The quick brown", " fox jumps over", " the lazy dog."
const ANSWER: &str = "The quick brown fox jumps over the lazy dog.";
const FIRST_PIECE: &str = "The quick brown";
/// A 2×2 red PNG.
const PNG: [u8; 73] = [
    137, 80, 78, 71, 13, 10, 26, 10, 0, 0, 0, 13, 73, 72, 68, 82, 0, 0, 0, 2, 0, 0, 0, 2, 8, 2, 0, 0, 0, 253, 212, 154,
    115, 0, 0, 0, 16, 73, 68, 65, 84, 120, 156, 99, 248, 207, 192, 0, 68, 12, 16, 10, 0, 31, 238, 3, 253, 139, 95, 20,
    212, 0, 0, 0, 0, 73, 69, 78, 68, 174, 66, 96, 130,
];

/// `chromedriver` from `$CHROMEDRIVER`, /usr/bin or `PATH`. Its absence fails the test: a skipped browser test
/// would pass CI without a browser ever having run.
fn chromedriver() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut candidates = std::env::var_os("CHROMEDRIVER").map(PathBuf::from).into_iter().collect::<Vec<_>>();
    candidates.push(PathBuf::from("/usr/bin/chromedriver"));
    candidates.extend(std::env::split_paths(&path).map(|p| p.join("chromedriver")));
    let found = candidates.into_iter().find(|p| p.is_file());
    found.unwrap_or_else(|| {
        panic!(
            "chromedriver is not installed (looked at $CHROMEDRIVER, /usr/bin/chromedriver and PATH): the web UI \
             browser tests need Debian's `chromium` and `chromium-driver` packages; scripts/test installs them"
        )
    })
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Where screenshots go: `$CARGO_TARGET_DIR/web-screenshots`, or the target folder this test binary is in.
fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| {
        // target/debug/deps/e2e-<hash>
        std::env::current_exe().unwrap().ancestors().nth(3).unwrap().to_path_buf()
    });
    let dir = target.join("web-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One headless Chromium behind its own chromedriver, with a fresh profile.
struct Browser {
    client: Client,
    /// The test's name, the first part of its screenshots' names.
    test: &'static str,
    /// Last, so the session is let go before chromedriver is killed.
    driver: Driver,
}

/// A chromedriver process and the profile folder its Chromium writes, both gone on drop.
struct Driver {
    child: Child,
    profile: tempfile::TempDir,
}

impl Drop for Driver {
    fn drop(&mut self) {
        // A test that panicked never closed its session: Chromium's processes go with chromedriver's.
        let mut tree = vec![self.child.id()];
        let mut at = 0;
        while at < tree.len() {
            tree.extend(minibot_e2e::children_of(tree[at]));
            at += 1;
        }
        for pid in tree.into_iter().rev() {
            minibot_e2e::kill_hard(pid);
        }
        let _ = self.child.wait();
        let _ = &self.profile;
    }
}

/// Chromedriver's `POST /session/{id}/se/log`: the browser console's entries. It is not in the W3C protocol,
/// so fantoccini has no method for it.
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(&self, base_url: &url::Url, session_id: Option<&str>) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!("session/{}/se/log", session_id.unwrap_or_default()))
    }

    fn method_and_body(&self, _request_url: &url::Url) -> (reqwest::Method, Option<String>) {
        (reqwest::Method::POST, Some(json!({ "type": "browser" }).to_string()))
    }
}

impl Browser {
    async fn start(test: &'static str) -> Self {
        let profile = tempfile::tempdir().unwrap();
        let port = free_port();
        let log = std::fs::File::create(profile.path().join("chromedriver.log")).unwrap();
        let child = Command::new(chromedriver())
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let user_data = profile.path().join("chrome");
        let driver = Driver { child, profile };
        let deadline = Instant::now() + WAIT;
        while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not answer on port {port}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut chrome = json!({
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage", "--window-size=1280,900",
                format!("--user-data-dir={}", user_data.display()),
            ],
        });
        if Path::new("/usr/bin/chromium").is_file() {
            chrome["binary"] = json!("/usr/bin/chromium");
        }
        let mut capabilities = Capabilities::new();
        capabilities.insert("browserName".into(), json!("chrome"));
        capabilities.insert("goog:chromeOptions".into(), chrome);
        capabilities.insert("goog:loggingPrefs".into(), json!({ "browser": "ALL" }));
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .unwrap_or_else(|e| panic!("no session from chromedriver on port {port}: {e}"));
        Self { client, test, driver }
    }

    async fn goto(&self, url: &str) {
        self.client.goto(url).await.unwrap_or_else(|e| panic!("opening {url}: {e}"));
    }

    async fn current_url(&self) -> String {
        self.client.current_url().await.unwrap().to_string()
    }

    /// Runs `script` (a function body; `arguments` holds `args`) in the page and answers what it returns.
    async fn run(&self, script: &str, args: Vec<Value>) -> Value {
        self.client.execute(script, args).await.unwrap_or_else(|e| panic!("running `{script}`: {e}"))
    }

    /// The elements matching `css` now.
    async fn find_all(&self, css: &str) -> Vec<Element> {
        self.client.find_all(Locator::Css(css)).await.unwrap_or_else(|e| panic!("finding `{css}`: {e}"))
    }

    /// The first element matching `css`, waited for.
    async fn wait_for(&self, css: &str) -> Element {
        self.wait_until(&format!("an element matching `{css}`"), || async {
            self.find_all(css).await.into_iter().next()
        })
        .await
    }

    /// Polls `probe` until it answers something, for [`WAIT`]; the panic says what was awaited and shows the page.
    async fn wait_until<T, F, Fut>(&self, what: &str, mut probe: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Option<T>>,
    {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(found) = probe().await {
                return found;
            }
            if Instant::now() > deadline {
                self.screenshot("timeout").await;
                let body = self.run("return document.body ? document.body.innerText : ''", vec![]).await;
                panic!("waited {WAIT:?} for {what} at {}; the page shows:\n{body}", self.current_url().await);
            }
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
    }

    /// The visible text of the first element matching `css`, waited for until `ok` accepts it.
    async fn wait_text(&self, css: &str, what: &str, ok: impl Fn(&str) -> bool) -> String {
        self.wait_until(what, || async {
            for element in self.find_all(css).await {
                let text = self.text(&element).await;
                if ok(&text) {
                    return Some(text);
                }
            }
            None
        })
        .await
    }

    async fn text(&self, element: &Element) -> String {
        // The element may be replaced between finding and reading (the tasks table refreshes): read nothing then.
        element.text().await.unwrap_or_default()
    }

    /// The `disabled` property of the first element matching `css`, waited for.
    async fn disabled(&self, css: &str) -> bool {
        let element = self.wait_for(css).await;
        match element.prop("disabled").await {
            Ok(Some(value)) if value == "true" => true,
            Ok(Some(value)) if value == "false" => false,
            other => panic!("`{css}`.disabled is not a boolean: {other:?}"),
        }
    }

    async fn click(&self, css: &str) {
        let element = self.wait_for(css).await;
        element.click().await.unwrap_or_else(|e| panic!("clicking `{css}`: {e}"));
    }

    async fn type_into(&self, css: &str, text: &str) {
        let element = self.wait_for(css).await;
        element.send_keys(text).await.unwrap_or_else(|e| panic!("typing into `{css}`: {e}"));
    }

    /// Types `text` in the composer and sends it with the Send button.
    async fn send_message(&self, text: &str) {
        self.type_into("#text", text).await;
        self.click("#send").await;
    }

    /// Opens the chat and waits for its socket.
    async fn open_chat(&self, daemon: &WebDaemon) {
        self.goto(&daemon.url("/chat")).await;
        self.wait_for("#chat[data-connected='true']").await;
    }

    async fn screenshot(&self, page: &str) -> PathBuf {
        let png = self.client.screenshot().await.unwrap_or_else(|e| panic!("screenshot of {page}: {e}"));
        let path = screenshot_dir().join(format!("{}-{page}.png", self.test));
        std::fs::write(&path, png).unwrap();
        path
    }

    /// The browser console's entries since the last call (the driver hands each entry out once).
    async fn console(&self) -> Vec<Value> {
        let log = self.client.issue_cmd(BrowserLog).await.unwrap_or_else(|e| panic!("reading the console: {e}"));
        log.as_array().cloned().unwrap_or_default()
    }

    /// Saves the page as `<test>-<page>.png` and asserts the console holds no error since the last check.
    async fn check_page(&self, page: &str) {
        let path = self.screenshot(page).await;
        let errors: Vec<Value> = self.console().await.into_iter().filter(|e| e["level"] == "SEVERE").collect();
        assert!(errors.is_empty(), "the console of {page} ({}) has errors: {errors:#?}", path.display());
    }

    /// Ends the session, which closes Chromium, then chromedriver.
    async fn close(self) {
        let Self { client, driver, .. } = self;
        let _ = client.close().await;
        drop(driver);
    }
}

/// A daemon with the web UI open on loopback (no credentials) and `extra` config.
async fn open_daemon(llm: &ScriptedLlm, extra: &str) -> (Home, WebDaemon) {
    let home = Home::new(&llm.base_url(), &format!("{}{extra}", http_config("")));
    let daemon = WebDaemon::start(&home);
    (home, daemon)
}

/// The texts of the assistant messages the chat shows.
async fn assistant_messages(browser: &Browser) -> Vec<String> {
    let mut texts = Vec::new();
    for element in browser.find_all(".message.assistant").await {
        texts.push(browser.text(&element).await);
    }
    texts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logging_in_with_the_token_leads_to_the_dashboard() {
    let llm = ScriptedLlm::start(vec![]).await;
    let home = Home::new(&llm.base_url(), &http_config("auth_token = \"browser-e2e-token-0123456789\""));
    let daemon = WebDaemon::start(&home);
    let browser = Browser::start("login").await;

    browser.goto(&daemon.url("/")).await;
    browser
        .wait_until("the redirect to /login", || async {
            browser.current_url().await.ends_with("/login").then_some(())
        })
        .await;
    browser.wait_for("input[name='token']").await;
    browser.check_page("login").await;

    browser.type_into("input[name='token']", "browser-e2e-token-0123456789").await;
    browser.click("form.login button[type='submit']").await;
    // Whatever the answer to the form is, it is a new page; a refusal fails here with its text, not a timeout.
    let shown = browser
        .wait_until("the answer to the login form", || async {
            let url = browser.current_url().await;
            let text = browser.run("return document.body ? document.body.innerText : ''", vec![]).await;
            let text = text.as_str().unwrap_or_default().to_string();
            (url != daemon.url("/login") || !text.contains("Access token")).then_some(text)
        })
        .await;
    assert!(shown.contains("Dashboard"), "logging in failed; the browser shows: {shown:?}");
    let model = browser.wait_text("#model", "the dashboard's model", |t| !t.is_empty()).await;
    assert_eq!(model, "e2e-model");
    assert_eq!(browser.current_url().await, daemon.url("/"));
    browser.wait_for("form.logout button").await;
    browser.check_page("dashboard").await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_answer_streams_into_the_draft_before_it_is_shown_whole() {
    let llm = ScriptedLlm::start(vec![Script::new("write slowly", vec![Reply::text(ANSWER)])]).await;
    llm.set_stream_gap(Duration::from_millis(1500));
    let (_home, daemon) = open_daemon(&llm, "").await;
    let browser = Browser::start("streaming").await;
    browser.open_chat(&daemon).await;
    browser.check_page("chat").await;

    browser.send_message("write slowly").await;
    let draft = browser.wait_text("#draft", "the first piece in the draft", |t| t.contains(FIRST_PIECE)).await;
    assert!(!draft.contains("lazy dog"), "the draft showed the whole answer at once: {draft:?}");
    assert!(assistant_messages(&browser).await.is_empty(), "the answer was shown before its stream ended");
    browser.check_page("chat-streaming").await;

    let answer = browser.wait_text(".message.assistant", "the whole answer", |t| t.contains("lazy dog")).await;
    assert_eq!(answer, ANSWER);
    let user = browser.wait_text(".message.user", "the question", |t| !t.is_empty()).await;
    assert_eq!(user, "write slowly");
    browser
        .wait_until("the draft to clear", || async {
            browser.text(&browser.wait_for("#draft").await).await.is_empty().then_some(())
        })
        .await;
    browser.check_page("chat-answered").await;
    browser.close().await;
}

// Bash runs in MiniBot's basic mode: these tests are about the buttons, the sandbox has its own.
const GATED: &str =
    "[tools.bash]\nenabled = true\nsandbox_mode = \"basic\"\n[tools.approval]\nrequire_approval = [\"bash\"]\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gated_tool_runs_after_approve_and_the_model_hears_of_deny() {
    let scratch = tempfile::tempdir().unwrap();
    let approved = scratch.path().join("approved");
    let denied = scratch.path().join("denied");
    let touch = |path: &Path| Reply::tool("bash", json!({ "command": format!("touch {}", path.display()) }));
    let llm = ScriptedLlm::start(vec![
        Script::new("make the first marker", vec![touch(&approved), Reply::text("The first marker is made.")]),
        Script::new("make the second marker", vec![touch(&denied), Reply::text("You did not let me make it.")]),
    ])
    .await;
    let (_home, daemon) = open_daemon(&llm, GATED).await;
    let browser = Browser::start("approvals").await;
    browser.open_chat(&daemon).await;

    browser.send_message("make the first marker").await;
    let card = browser.wait_text(".approval", "the approval card", |t| t.contains("Approve")).await;
    assert!(card.contains("bash") && card.contains(&approved.display().to_string()), "{card}");
    assert!(card.contains("Deny"), "{card}");
    assert!(!approved.exists(), "the command ran before it was approved");
    browser.check_page("chat-approval").await;
    browser.click(".approval:not(.resolved) button.approve").await;
    browser.wait_text(".message.assistant", "the answer after Approve", |t| t == "The first marker is made.").await;
    assert!(approved.exists(), "the approved command did not run");
    browser.wait_text(".approval.resolved .outcome", "the card's outcome", |t| t == "Approved").await;
    browser.check_page("chat-approved").await;

    browser.send_message("make the second marker").await;
    browser.wait_for(".approval:not(.resolved) button.deny").await;
    browser.click(".approval:not(.resolved) button.deny").await;
    browser.wait_text(".message.assistant", "the answer after Deny", |t| t == "You did not let me make it.").await;
    assert!(!denied.exists(), "the denied command ran");
    browser.wait_text(".approval.resolved .outcome", "the second card's outcome", |t| t == "Denied").await;
    let last = llm.requests().pop().unwrap();
    let tool = last["messages"].as_array().unwrap().iter().rev().find(|m| m["role"] == "tool").cloned().unwrap();
    let result: Value = serde_json::from_str(tool["content"].as_str().unwrap()).unwrap();
    assert_eq!(result["error_code"], "tool_approval:denied", "{result}");
    browser.check_page("chat-denied").await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_ends_a_streaming_turn_and_the_history_keeps_the_cut_text() {
    let llm = ScriptedLlm::start(vec![Script::new("write slowly", vec![Reply::text(ANSWER)])]).await;
    llm.set_stream_gap(Duration::from_millis(2500));
    let (_home, daemon) = open_daemon(&llm, "").await;
    let browser = Browser::start("stop").await;
    browser.open_chat(&daemon).await;

    browser.send_message("write slowly").await;
    browser.wait_text("#draft", "the first piece in the draft", |t| t.contains(FIRST_PIECE)).await;
    assert!(!browser.disabled("#stop").await, "Stop is disabled while the answer streams");
    browser.click("#stop").await;
    browser.wait_until("Stop to disable", || async { browser.disabled("#stop").await.then_some(()) }).await;
    browser.check_page("chat-stopped").await;
    // The rest of the stream would have come by now: nothing more arrives.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(assistant_messages(&browser).await.iter().all(|t| !t.contains("lazy dog")));

    browser.open_chat(&daemon).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let kept =
        browser.wait_text(".message.assistant", "the cut answer from the history", |t| t.contains(FIRST_PIECE)).await;
    assert!(!kept.contains("lazy dog"), "{kept:?}");
    browser.check_page("chat-reloaded").await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attached_image_reaches_the_model_as_a_managed_file() {
    let llm =
        ScriptedLlm::start(vec![Script::containing("what is in the picture", vec![Reply::text("A red square.")])])
            .await;
    let (home, daemon) = open_daemon(&llm, "[tools.file_storage]\nenabled = true\nroot_dir = \"files\"\n").await;
    let scratch = tempfile::tempdir().unwrap();
    let picture = scratch.path().join("red-square.png");
    std::fs::write(&picture, PNG).unwrap();
    let browser = Browser::start("upload").await;
    browser.open_chat(&daemon).await;

    browser.type_into("#files", &picture.display().to_string()).await;
    browser.wait_text("#pending-uploads li", "the upload to finish", |t| t.contains('✓') || t.contains(':')).await;
    let pending = browser.wait_text("#pending-uploads li", "the upload", |t| !t.is_empty()).await;
    assert_eq!(pending, "red-square.png ✓");
    browser.check_page("chat-attached").await;
    browser.send_message("what is in the picture?").await;
    browser.wait_text(".message.assistant", "the answer", |t| t == "A red square.").await;
    let shown = browser.wait_text(".message.user", "the sent message", |t| !t.is_empty()).await;
    assert!(shown.contains("red-square.png"), "{shown}");
    browser.check_page("chat-answered").await;

    let request = llm.requests().pop().unwrap().to_string();
    assert!(request.contains("Incoming managed files"), "{request}");
    let line =
        request.split("\\n").find(|l| l.contains("red-square.png (path=")).unwrap_or_else(|| panic!("{request}"));
    assert!(line.contains("mime=image/png"), "{line}");
    let saved: Vec<PathBuf> = minibot_e2e::web::files_under(&home.path().join("files"))
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().ends_with("red-square.png")))
        .collect();
    assert_eq!(saved.len(), 1, "{saved:?}");
    assert_eq!(std::fs::read(&saved[0]).unwrap(), PNG);
    let relative = saved[0].strip_prefix(home.path().join("files")).unwrap().display().to_string();
    assert!(line.contains(&format!("path={relative}")), "{line} names {relative}");
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawned_tasks_progress_moves_on_the_tasks_page_until_it_is_done() {
    let calc = |e: &str| Reply::tool("calculate_expression", json!({ "expression": e }));
    let llm = ScriptedLlm::start(vec![
        Script::new(
            "research slowly",
            vec![
                Reply::tool("spawn_task", json!({ "prompt": "work in slow steps" })),
                Reply::text("I started a task."),
            ],
        ),
        Script::new(
            "work in slow steps",
            vec![calc("1+1"), calc("2+2"), calc("3+3"), calc("4+4"), Reply::text("All steps done.")],
        )
        .delay(Duration::from_secs(3)),
    ])
    .await;
    let (_home, daemon) =
        open_daemon(&llm, "[tasks]\nenabled = true\nlocal_workers = 1\nprogress_interval_seconds = 0.01\n").await;
    let browser = Browser::start("tasks").await;
    browser.open_chat(&daemon).await;
    browser.send_message("research slowly").await;
    browser.wait_text(".message.assistant", "the hand-off", |t| t == "I started a task.").await;

    browser.goto(&daemon.url("/tasks")).await;
    browser.wait_for("#tasks-live").await;
    browser.check_page("tasks").await;
    let progress = "#tasks tr[data-status='running'] td.progress";
    let first = browser.wait_text(progress, "a running task with progress", |t| !t.is_empty()).await;
    browser.check_page("tasks-running").await;
    let moved = browser.wait_text(progress, "the progress to move", |t| !t.is_empty() && t != first).await;
    browser.check_page("tasks-moved").await;
    eprintln!("progress went from {first:?} to {moved:?}");
    // Once done it leaves the running view.
    browser.wait_for("#no-tasks").await;

    browser.goto(&daemon.url("/tasks?status=all")).await;
    let status = browser.wait_text("#tasks tr td.status", "the finished task", |t| t == "done").await;
    assert_eq!(status, "done");
    let preview = browser.wait_text("#tasks tr .preview", "the result preview", |t| !t.is_empty()).await;
    assert!(preview.contains("All steps done."), "{preview}");
    browser.check_page("tasks-all").await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_history_search_finds_a_word_of_a_turn() {
    let llm =
        ScriptedLlm::start(vec![Script::new("tell me about zebras", vec![Reply::text("Zebras wear stripes.")])]).await;
    let (_home, daemon) = open_daemon(&llm, "").await;
    let browser = Browser::start("history").await;
    browser.open_chat(&daemon).await;
    browser.send_message("tell me about zebras").await;
    browser.wait_text(".message.assistant", "the answer", |t| t == "Zebras wear stripes.").await;

    browser.goto(&daemon.url("/history?q=zebras")).await;
    let body = browser.run("return document.body.innerText", vec![]).await;
    assert!(body.as_str() != Some("Not found."), "/history is not served by the daemon");
    let hit = browser.wait_text("#hits li", "a search hit", |t| t.contains("web:")).await;
    assert!(hit.to_lowercase().contains("zebras"), "{hit}");
    let link = browser.wait_for("#hits li a[href*='session=web']").await;
    browser.check_page("history-search").await;
    link.click().await.unwrap();
    browser.wait_text("main", "the session's conversation", |t| t.contains("Zebras wear stripes.")).await;
    browser.check_page("history-session").await;
    browser.close().await;
}
