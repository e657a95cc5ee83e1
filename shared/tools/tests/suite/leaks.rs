//! What an attacker-controlled model can make the tools send back or reach: a 10 MB argument is never repeated
//! whole (nor spilled to a file), and unless `deny_private_networks = false` `http_request` reaches no internal
//! address.

use super::{Env, tree};
use serde_json::json;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

const TEN_MB: usize = 10 * 1024 * 1024;
/// The longest error the model may read, and the most of one argument it may repeat
/// (`minibot_agent::MAX_ERROR_CHARS`, `ARGUMENT_EXCERPT_CHARS`).
const MAX_ERROR_CHARS: usize = 2_000;
const ARGUMENT_EXCERPT_CHARS: usize = 200;

fn http_env(extra: &str) -> Env {
    Env::new(&format!("[tools.http_client]\nenabled = true\n{extra}"))
}

/// A message that quotes `text` by its start only, and is short.
fn assert_quoted_short(message: &str, text: &str) {
    assert!(message.len() < MAX_ERROR_CHARS, "{} bytes: {}…", message.len(), &message[..300]);
    let start: String = text.chars().take(ARGUMENT_EXCERPT_CHARS).collect();
    assert!(message.contains(&start), "the argument's start is quoted: {message}");
    assert!(message.contains("more characters cut"), "the cut is stated: {message}");
}

#[tokio::test]
async fn a_10mb_url_is_quoted_by_its_start_only() {
    // The closed port below is on loopback: the address check would refuse it before any connection is tried.
    let env = http_env("deny_private_networks = false\n");
    let tail = "a".repeat(TEN_MB);

    let bad_scheme = format!("ftp://example.org/{tail}");
    let (code, message) = env.err("http_request", json!({ "url": bad_scheme })).await;
    assert_eq!(code, "invalid_arguments");
    assert_quoted_short(&message, &bad_scheme);

    // Nothing listens there. reqwest's errors name the URL, and the tool adds it again. Past 64 KB the URL is
    // refused before any connection; below, the connection is refused.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = listener.local_addr().unwrap();
    drop(listener);
    for length in [TEN_MB, 60_000] {
        let unreachable = format!("http://{closed}/{}", &tail[..length]);
        let (code, message) = env.err("http_request", json!({ "url": unreachable })).await;
        assert_eq!(code, "http_request_failed");
        assert_quoted_short(&message, &unreachable);
        let cause = if length == TEN_MB { "not a valid Uri" } else { "Connection refused" };
        assert!(message.contains(cause), "the cause is kept: {message}");
    }

    let (code, message) =
        env.err("http_request", json!({ "url": format!("http://{closed}/"), "headers": { tail.clone(): "x" } })).await;
    assert_eq!(code, "invalid_arguments");
    assert_quoted_short(&message, &tail);
}

#[tokio::test]
async fn a_10mb_expression_is_refused_short_and_nothing_is_spilled() {
    let env = Env::new("[tools.tool_output_spill]\nenabled = true\n");
    let expression = "1+".repeat(TEN_MB / 2) + "1";
    let out = env.ok("calculate_expression", json!({ "expression": expression })).await;
    assert_eq!(out["ok"], false);
    let text = out.to_string();
    assert!(text.len() < MAX_ERROR_CHARS, "{} bytes", text.len());
    assert!(out["error"].as_str().unwrap().contains("longer than 200 characters"), "{out}");
    assert!(out.get("output_file_path").is_none(), "spilled: {out}");
    let spilled = tree(&env.root().join("tool_output"));
    assert!(spilled.is_empty(), "spill files written: {:?}", spilled.keys().collect::<Vec<_>>());
    // The limit itself still holds at its edge.
    let out = env.ok("calculate_expression", json!({ "expression": "1+".repeat(99) + "1" })).await;
    assert_eq!(out["result"], "100");
}

#[tokio::test]
async fn arguments_that_fail_to_parse_are_quoted_short() {
    let env = Env::new("");
    let huge = "9".repeat(TEN_MB);
    let (code, message) = env.err("calculate_expression", json!({ "expression": "1+1", "scale": huge })).await;
    assert_eq!(code, "invalid_arguments");
    assert_quoted_short(&message, &huge);
    assert!(message.contains("expected i64"), "serde's complaint is kept: {message}");

    let (code, message) = env.err("calculate_expression", json!({ "expression": "1", huge.clone(): true })).await;
    assert_eq!(code, "invalid_arguments");
    assert_quoted_short(&message, &huge);
    assert!(message.contains("unknown field"), "{message}");
}

/// A server that counts the connections it accepts and answers each with `200 hello`.
async fn counting_server() -> (SocketAddr, Arc<AtomicUsize>) {
    let hello = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello";
    minibot_test_support::counting_server("127.0.0.1", hello.to_string()).await
}

#[tokio::test]
async fn by_default_internal_addresses_are_refused_without_connecting() {
    let (addr, connections) = counting_server().await;
    // Nothing about the address check is written: the default applies.
    let env = http_env("follow_redirects = true\n");
    let port = addr.port();
    for (url, shown, range) in [
        (format!("http://{addr}/"), "127.0.0.1", "loopback"),
        (format!("http://localhost:{port}/"), "localhost resolves to ", "loopback"),
        (format!("http://[::1]:{port}/"), "::1", "loopback"),
        (format!("http://[::ffff:127.0.0.1]:{port}/"), "::ffff:127.0.0.1", "loopback"),
        (format!("http://2130706433:{port}/"), "127.0.0.1", "loopback"),
        // On Linux a connection to 0.0.0.0 reaches this machine, the test server included.
        (format!("http://0.0.0.0:{port}/"), "0.0.0.0", "unspecified"),
        ("http://169.254.169.254/latest/meta-data/".into(), "169.254.169.254", "link-local"),
        ("http://100.64.0.1/".into(), "100.64.0.1", "CGNAT"),
        ("http://10.0.0.1/".into(), "10.0.0.1", "private"),
        ("http://[fd00::1]/".into(), "fd00::1", "private"),
        ("http://[fe80::1]/".into(), "fe80::1", "link-local"),
    ] {
        let (code, message) = env.err("http_request", json!({ "url": url })).await;
        assert_eq!(code, "destination_denied", "{url}: {message}");
        assert!(message.contains(shown), "{url}: {message}");
        assert!(message.contains(range), "{url}: {message}");
        // The refusal names the key that lifts it.
        assert!(message.contains("[tools.http_client] deny_private_networks = false"), "{url}: {message}");
    }
    assert_eq!(connections.load(Ordering::SeqCst), 0, "the server saw a connection");
}

#[tokio::test]
async fn loopback_is_reachable_with_the_setting_off() {
    let (addr, connections) = counting_server().await;
    let env = http_env("deny_private_networks = false\n");
    for url in [format!("http://{addr}/"), format!("http://localhost:{}/", addr.port())] {
        let out = env.ok("http_request", json!({ "url": url })).await;
        assert_eq!(out["status"], 200);
        assert_eq!(out["body"], "hello");
    }
    assert_eq!(connections.load(Ordering::SeqCst), 2);
}
