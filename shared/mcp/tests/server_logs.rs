#![allow(clippy::expect_used, clippy::unwrap_used)]
//! What servers get into the log: their stderr (cut and rate-limited), their notifications (debug only) and the
//! warnings about tools dropped for their names. A binary of its own: it installs a global subscriber, which the
//! other tests' threads would otherwise race with (tracing caches per-callsite interest across threads). Every
//! test here shares that one capture and reads only the lines of its own servers.

#[allow(dead_code, reason = "shared with the main suite; this binary uses a few helpers")]
#[path = "suite/peers.rs"]
mod peers;

use minibot_config::schema::McpMode;
use minibot_mcp::{MAX_STDERR_LINE_BYTES, MAX_TOOL_NAME_CHARS, STDERR_BURST_LINES, STDERR_LINES_PER_SECOND};
use peers::*;
use serde_json::json;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Collects formatted log lines.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The log so far, installing the capture on first use: info and up, and this crate's debug lines.
fn log() -> String {
    static CAPTURE: OnceLock<Captured> = OnceLock::new();
    let captured = CAPTURE.get_or_init(|| {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .with_env_filter(tracing_subscriber::EnvFilter::new("info,minibot_mcp=debug"))
            .finish();
        tracing::subscriber::set_global_default(subscriber).unwrap();
        captured
    });
    String::from_utf8_lossy(&captured.0.lock().unwrap()).into_owned()
}

/// The lines of the log that `keep` accepts.
fn lines_where(keep: impl Fn(&str) -> bool) -> Vec<String> {
    log().lines().filter(|l| keep(l)).map(str::to_string).collect()
}

/// Waits until `done` holds for the log, or fails with the lines `show` picks.
async fn wait_for(what: &str, done: impl Fn(&str) -> bool, show: impl Fn(&str) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done(&log()) {
        assert!(Instant::now() < deadline, "{what}; log: {:#?}", lines_where(&show));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The stderr lines logged for `server`.
fn stderr_lines(server: &str) -> Vec<String> {
    let field = format!("server={server}");
    lines_where(|l| l.contains("minibot_mcp::stderr") && l.split_whitespace().any(|w| w == field))
}

/// Lines reported as not logged for `server`, summed.
fn suppressed(server: &str) -> u64 {
    stderr_lines(server)
        .iter()
        .filter_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix("suppressed=")))
        .map(|n| n.parse::<u64>().unwrap())
        .sum()
}

#[tokio::test]
async fn child_stderr_goes_to_the_log_with_the_server_name() {
    log();
    let dir = tempfile::tempdir().unwrap();
    let hub = start(&section(vec![fixture_server("noisy", McpMode::Bridge, &dir.path().join("s"))])).await;
    wait_for(
        "stderr line not logged",
        |_| stderr_lines("noisy").iter().any(|l| l.contains("fixture: ready")),
        |l| l.contains("noisy"),
    )
    .await;
    hub.shutdown().await;
}

#[tokio::test]
async fn stderr_flood_is_rate_limited_and_the_client_stays_usable() {
    const LINES: u64 = 200_000;
    log();
    let started = Instant::now();
    let hub = start(&section(vec![hostile_server("flood", McpMode::Bridge, &[])])).await;
    let out = call(&tool(&hub, "mcp_flood__flood"), json!({"lines": LINES})).await;
    assert_eq!(out["result"], "flooded", "{out}");
    // The flood does not block the server or the session.
    let out = call(&tool(&hub, "mcp_flood__add"), json!({"a": 40, "b": 2})).await;
    assert_eq!(out["result"], "42", "{out}");

    // Every line is read and either logged or counted; the count is reported once the second is over.
    wait_for(
        "the flood was not read and reported",
        |_| {
            let logged = stderr_lines("flood").iter().filter(|l| l.contains("flood line")).count() as u64;
            logged + suppressed("flood") >= LINES
        },
        |l| l.contains("server=flood") && !l.contains("flood line"),
    )
    .await;
    let seconds = started.elapsed().as_secs() + 1;
    let lines = stderr_lines("flood");
    let logged = lines.iter().filter(|l| !l.contains("suppressed=")).count() as u64;
    let allowed = u64::from(STDERR_BURST_LINES) + u64::from(STDERR_LINES_PER_SECOND) * seconds;
    assert!(logged <= allowed, "{logged} lines in {seconds} s");
    let bytes: usize = lines.iter().map(String::len).sum();
    assert!(bytes < 100_000, "{bytes} bytes of log for {LINES} lines of stderr");
    assert!(suppressed("flood") > LINES / 2, "{}", suppressed("flood"));
    hub.shutdown().await;
}

#[tokio::test]
async fn a_stderr_line_without_end_is_cut() {
    log();
    let hub = start(&section(vec![hostile_server("wide", McpMode::Bridge, &[])])).await;
    let out = call(&tool(&hub, "mcp_wide__long_line"), json!({"chars": 1_000_000})).await;
    assert_eq!(out["result"], "written", "{out}");
    wait_for(
        "the long line was not logged",
        |_| stderr_lines("wide").iter().any(|l| l.contains("LLLL")),
        |l| l.contains("server=wide"),
    )
    .await;
    let line = stderr_lines("wide").into_iter().find(|l| l.contains("LLLL")).unwrap();
    assert_eq!(line.matches('L').count(), MAX_STDERR_LINE_BYTES, "{:.200}", line);
    let cut = 1_000_000 - MAX_STDERR_LINE_BYTES;
    assert!(line.contains(&format!("[{cut} more bytes cut]")), "{}", &line[line.len() - 120..]);
    hub.shutdown().await;
}

#[tokio::test]
async fn notifications_are_logged_at_debug_only() {
    log();
    let hub = start(&section(vec![hostile_server("chatty", McpMode::Bridge, &[])])).await;
    let out = call(&tool(&hub, "mcp_chatty__chatter"), json!({"count": 50})).await;
    assert_eq!(out["result"], "chattered", "{out}");
    let ignored = |l: &str| l.contains("mcp notification ignored") && l.contains("server=chatty");
    wait_for("notifications were not seen", |_| lines_where(ignored).len() >= 50, |l| l.contains("server=chatty"))
        .await;
    assert!(lines_where(ignored).iter().all(|l| l.contains(" DEBUG ")), "{:#?}", lines_where(ignored));
    assert!(lines_where(ignored).iter().all(|l| l.contains("notifications/message")));
    // Nothing of their payload reaches the log at info (rmcp logs every notification it is handed at info).
    assert!(lines_where(|l| l.contains("chatter 1") || l.contains("received notification")).is_empty());
    hub.shutdown().await;
}

#[tokio::test]
async fn odd_tool_names_are_dropped_with_a_warning_and_the_rest_work() {
    log();
    // 57 characters fit under `s` (`mcp_s__` + 57 = 64) and not under `s_`.
    let long = MAX_TOOL_NAME_CHARS - "mcp_s__".len();
    let env = [("HOSTILE_LONG_NAME_CHARS", long.to_string())];
    let hub =
        start(&section(vec![hostile_server("s", McpMode::Bridge, &env), hostile_server("s_", McpMode::Bridge, &env)]))
            .await;
    let fits = format!("mcp_s__{}", "x".repeat(long));
    let mut got = names(&hub);
    got.sort();
    let mut expected: Vec<String> = ["add", "big", "chatter", "dup", "flood", "long_line"]
        .iter()
        .flat_map(|t| [format!("mcp_s__{t}"), format!("mcp_s___{t}")])
        .filter(|n| n != "mcp_s___dup")
        .chain([fits.clone(), "mcp_s____dup".to_string()])
        .collect();
    expected.sort();
    assert_eq!(got, expected);

    // The valid ones still work, on both servers.
    assert_eq!(call(&tool(&hub, "mcp_s__add"), json!({"a": 1, "b": 1})).await["result"], "2");
    assert_eq!(call(&tool(&hub, "mcp_s___add"), json!({"a": 2, "b": 2})).await["result"], "4");
    assert_eq!(call(&tool(&hub, &fits), json!({})).await["result"], "x".repeat(long));
    assert_eq!(call(&tool(&hub, "mcp_s____dup"), json!({})).await["result"], "_dup");

    let warned = |server: &str, tool: &str| {
        lines_where(|l| {
            l.contains(" WARN ")
                && l.contains("mcp tool dropped")
                && l.contains(&format!("server={server} "))
                && l.contains(&format!("tool={tool:?}"))
        })
        .len()
    };
    for odd in ["has space", "dot.name", "café", &"n".repeat(100)] {
        let shown = minibot_agent::excerpt(odd);
        assert_eq!(warned("s", &shown), 1, "{odd}: {:#?}", lines_where(|l| l.contains("server=s ")));
        assert_eq!(warned("s_", &shown), 1, "{odd}");
    }
    assert_eq!(warned("s_", &"x".repeat(long)), 1, "too long under `s_` only");
    assert_eq!(warned("s", &"x".repeat(long)), 0);
    let shared = |tool: &str, servers: &str| {
        lines_where(|l| {
            l.contains("more than one tool has this name")
                && l.contains(&format!("tool={tool} "))
                && l.contains(&format!("servers={servers}"))
        })
        .len()
    };
    assert_eq!(shared("mcp_s__twin", "s"), 1);
    assert_eq!(shared("mcp_s___twin", "s_"), 1);
    assert_eq!(shared("mcp_s___dup", "s, s_"), 1, "{:#?}", lines_where(|l| l.contains("mcp_s___dup")));
    hub.shutdown().await;
}
