//! `http_request` against a local hyper server started by each test.

use super::Env;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use serde_json::json;
use std::convert::Infallible;
use std::net::SocketAddr;

const PAGE: &str = r#"<!doctype html>
<html><head><title>Shop &amp; Co</title>
<style>.x { color: red; }</style>
<script>if (a < b) { document.write("<div>evil</div>"); alert("x"); }</script>
</head>
<body class="main">
<h1>Welcome</h1>
<p>Read the <a href="/docs" class="link">docs</a> or <a href="https://example.org/faq">FAQ</a>.</p>
<ul><li>First</li><li>Second</li></ul>
<table><tr><th>Name</th><th>Age</th></tr><tr><td>Ann</td><td>31</td></tr></table>
<form action="/search" method="get"><input type="text" name="q" placeholder="Search..."><input type="hidden" name="lang" value="en">
<select name="size"><option>S</option><option selected>M</option></select><button>Go</button></form>
<noscript>Enable JS</noscript>
</body></html>"#;

const JSON: &str = "{\"b\": 1,   \"a\": [1, 2,\n 3]}";

async fn handle(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let response = match req.uri().path() {
        "/page.html" => Response::builder().header("content-type", "text/html; charset=utf-8").body(Full::from(PAGE)),
        "/slow" => {
            tokio::time::sleep(std::time::Duration::from_secs(5)).await;
            Response::builder().body(Full::from("late"))
        }
        "/latin1" => Response::builder()
            .header("content-type", "text/plain; charset=ISO-8859-1")
            .body(Full::from(&b"caf\xe9"[..])),
        "/data.json" => Response::builder().header("content-type", "application/json").body(Full::from(JSON)),
        "/redirect" => Response::builder().status(302).header("location", "/data.json").body(Full::from("")),
        "/loop" => Response::builder().status(302).header("location", "/loop").body(Full::from("")),
        "/big" => {
            let body: String = (0..5 * 1024 * 1024 / 64).map(|i| format!("{i:063}\n")).collect();
            Response::builder().header("content-type", "text/plain").body(Full::from(body))
        }
        "/echo" => {
            let method = req.method().to_string();
            let ctype = req.headers().get("content-type").map(|v| v.to_str().unwrap_or("").to_string());
            let token = req.headers().get("x-token").map(|v| v.to_str().unwrap_or("").to_string());
            let body = http_body_util::BodyExt::collect(req.into_body()).await.unwrap().to_bytes();
            let echoed = json!({ "method": method, "content_type": ctype, "token": token,
                                 "body": String::from_utf8_lossy(&body) });
            Response::builder().header("content-type", "application/json").body(Full::from(echoed.to_string()))
        }
        _ => Response::builder().status(404).body(Full::from("not here")),
    };
    Ok(response.unwrap())
}

async fn serve() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, hyper::service::service_fn(handle))
                    .await;
            });
        }
    });
    addr
}

/// The test server is on loopback, which `http_request` refuses unless told otherwise.
fn http_env(extra: &str) -> Env {
    Env::new(&format!("[tools.http_client]\nenabled = true\ndeny_private_networks = false\n{extra}"))
}

#[tokio::test]
async fn html_becomes_compact_text_with_links_forms_and_tables() {
    let addr = serve().await;
    let env = http_env("max_bytes = 100000\n");
    let out = env.ok("http_request", json!({ "url": format!("http://{addr}/page.html") })).await;
    assert_eq!(out["status"], 200);
    assert_eq!(out["processor_used"], "html_compact");
    let body = out["body"].as_str().unwrap();
    for expected in [
        "# Shop & Co",
        "# Welcome",
        "Read the [docs](/docs) or [FAQ](https://example.org/faq).",
        "- First\n- Second",
        "| Name | Age |\n| Ann | 31 |",
        "[form action=/search method=get]",
        "[input type=text name=q placeholder=Search...]",
        "[input type=hidden name=lang value=en]",
        "[select name=size: S | M*]",
        "[button: Go]",
        "[/form]",
    ] {
        assert!(body.contains(expected), "missing {expected:?} in:\n{body}");
    }
    for dropped in ["color", "alert", "evil", "class", "Enable JS", "<"] {
        assert!(!body.contains(dropped), "{dropped:?} leaked into:\n{body}");
    }
    let text = http_env("max_bytes = 100000\nresponse_processing_mode = \"text\"\n")
        .ok("http_request", json!({ "url": format!("http://{addr}/page.html") }))
        .await;
    assert_eq!(text["processor_used"], "html_text");
    assert!(!text["body"].as_str().unwrap().contains("[docs]"));
}

#[tokio::test]
async fn json_is_returned_untouched() {
    let addr = serve().await;
    let env = http_env("");
    let out = env.ok("http_request", json!({ "url": format!("http://{addr}/data.json") })).await;
    assert_eq!(out["body"], JSON);
    assert_eq!(out["processor_used"], "none");
    assert_eq!(out["body_storage"], "inline");
}

#[tokio::test]
async fn redirects_follow_the_config() {
    let addr = serve().await;
    let out = http_env("").ok("http_request", json!({ "url": format!("http://{addr}/redirect") })).await;
    assert_eq!(out["status"], 302, "redirects are not followed by default");
    let following = http_env("follow_redirects = true\n");
    let out = following.ok("http_request", json!({ "url": format!("http://{addr}/redirect") })).await;
    assert_eq!(out["status"], 200);
    assert_eq!(out["body"], JSON);
    let (code, message) = following.err("http_request", json!({ "url": format!("http://{addr}/loop") })).await;
    assert_eq!(code, "http_request_failed");
    assert!(message.contains("redirect"), "{message}");
}

#[tokio::test]
async fn big_bodies_are_truncated_inline_or_spilled() {
    let addr = serve().await;
    let url = format!("http://{addr}/big");
    let out = http_env("").ok("http_request", json!({ "url": url })).await;
    assert_eq!(out["truncated"], true);
    let shown = out["body"].as_str().unwrap().chars().count();
    assert!((16_000..=16_384).contains(&shown), "inline body is cut near max_bytes: {shown}");
    assert!(out["body_notice"].as_str().unwrap().contains("larger than 16384 bytes"));

    let spilling = http_env("spill_to_managed_file = true\n");
    let out = spilling.ok("http_request", json!({ "url": url })).await;
    assert_eq!(out["body_storage"], "managed_file");
    assert_eq!(out["body"].as_str().unwrap().chars().count(), 2_000);
    let path = out["body_file_absolute_path"].as_str().unwrap();
    assert!(path.starts_with(&spilling.root().join("http_responses/tmp").display().to_string()));
    let file_name = std::path::Path::new(path).file_name().unwrap().to_string_lossy().into_owned();
    assert!(file_name.starts_with("127.0.0.1-big-") && file_name.ends_with(".txt"), "{file_name}");
    let written = std::fs::metadata(path).unwrap().len();
    assert_eq!(written, 5_000_000, "capped at max_spill_bytes");
    assert_eq!(out["body_file_bytes_written"], written);
}

#[tokio::test]
async fn request_bodies_headers_and_methods() {
    let addr = serve().await;
    let env = http_env("");
    let url = format!("http://{addr}/echo");
    let out = env
        .ok(
            "http_request",
            json!({ "method": "post", "url": url, "json": "{\"x\": 1}", "headers": { "X-Token": "t1" } }),
        )
        .await;
    let echoed: serde_json::Value = serde_json::from_str(out["body"].as_str().unwrap()).unwrap();
    assert_eq!(
        echoed,
        json!({ "method": "POST", "content_type": "application/json", "token": "t1", "body": "{\"x\": 1}" })
    );
    let (code, _) = env.err("http_request", json!({ "url": url, "json": "{", })).await;
    assert_eq!(code, "invalid_arguments");
    let (code, _) = env.err("http_request", json!({ "url": url, "json": "{}", "body": "x" })).await;
    assert_eq!(code, "invalid_arguments");
    let (code, _) = env.err("http_request", json!({ "url": "file:///etc/passwd" })).await;
    assert_eq!(code, "invalid_arguments");
    let (code, _) = env.err("http_request", json!({ "url": url, "method": "TRACE" })).await;
    assert_eq!(code, "invalid_arguments");
    let missing = env.ok("http_request", json!({ "url": format!("http://{addr}/missing") })).await;
    assert_eq!(missing["status"], 404);
}

#[tokio::test]
async fn connection_failures_are_reported() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let (code, message) = http_env("").err("http_request", json!({ "url": format!("http://{addr}/") })).await;
    assert_eq!(code, "http_request_failed");
    assert!(message.contains(&addr.to_string()), "{message}");
}

#[tokio::test]
async fn a_slow_server_hits_the_timeout() {
    let addr = serve().await;
    let env = http_env("timeout_seconds = 0.3\n");
    let started = std::time::Instant::now();
    let (code, _) = env.err("http_request", json!({ "url": format!("http://{addr}/slow") })).await;
    assert_eq!(code, "http_request_failed");
    assert!(started.elapsed() < std::time::Duration::from_secs(2), "took {:?}", started.elapsed());
}
