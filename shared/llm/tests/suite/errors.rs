//! What a failed provider call says, against real sockets: each message names the URL that was called and the
//! cause a user can act on (nothing listening, a name that does not resolve, TLS spoken to a plain HTTP server, a
//! server that never answers, a rejected key, a model the server does not have).

use minibot_config::Config;
use minibot_llm::{ChatProvider, ChatRequest, LlmError, Message};
use minibot_test_support::{Script, ScriptedLlm};
use std::time::{Duration, Instant};

fn client(base_url: &str, extra: &str) -> std::sync::Arc<dyn ChatProvider> {
    let toml = format!(
        "[llm]\nbase_url = \"{base_url}\"\napi_key = \"sk-test-errors\"\nmodel = \"m\"\nretry_attempts = 0\n{extra}"
    );
    let config = Config::from_toml(&toml, "test.toml", std::env::temp_dir(), &|_| None).unwrap();
    minibot_llm::provider_for(&config.main_llm()).unwrap()
}

async fn fail(client: &dyn ChatProvider, model: &str) -> LlmError {
    let request =
        ChatRequest { model: model.into(), messages: vec![Message::User("hi".into())], ..ChatRequest::default() };
    client.complete(&request).await.expect_err("the call fails")
}

/// A server that accepts connections (the kernel does, from the backlog) and never says a word; its port, and
/// the task holding the connections (abort it to close them).
async fn silent_server() -> (u16, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    (port, holder)
}

/// A port on loopback where nothing listens: bound, then closed.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test]
async fn nothing_listening_is_connection_refused_at_the_url() {
    let port = closed_port();
    let error = fail(&client(&format!("http://127.0.0.1:{port}/v1"), ""), "m").await;
    assert!(matches!(error, LlmError::Connect { .. }), "{error:?}");
    let text = error.to_string();
    assert!(text.contains(&format!("http://127.0.0.1:{port}/v1/chat/completions")), "{text}");
    assert!(text.contains("connection refused"), "{text}");
    assert!(text.contains(&format!("127.0.0.1:{port}")) && text.contains("is the server running?"), "{text}");
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_after_the_configured_seconds() {
    let (port, holder) = silent_server().await;
    let started = Instant::now();
    let error = fail(&client(&format!("http://127.0.0.1:{port}/v1"), "request_timeout_seconds = 1\n"), "m").await;
    holder.abort();
    assert!(started.elapsed() >= Duration::from_millis(900), "gave up early: {:?}", started.elapsed());
    assert!(matches!(error, LlmError::Timeout { .. }), "{error:?}");
    let text = error.to_string();
    assert_eq!(
        text,
        format!(
            "http://127.0.0.1:{port}/v1/chat/completions did not answer within 1 s ([llm] request_timeout_seconds)"
        )
    );
}

#[tokio::test]
async fn a_server_that_goes_quiet_fails_on_the_read_setting_long_before_the_request_limit() {
    let (port, holder) = silent_server().await;
    let started = Instant::now();
    let settings = "request_timeout_seconds = 20\nsock_read_timeout_seconds = 0.5\n";
    let error = fail(&client(&format!("http://127.0.0.1:{port}/v1"), settings), "m").await;
    holder.abort();
    assert!(started.elapsed() < Duration::from_secs(5), "waited for the request limit: {:?}", started.elapsed());
    assert_eq!(
        error.to_string(),
        format!("http://127.0.0.1:{port}/v1/chat/completions sent nothing for 0.5 s ([llm] sock_read_timeout_seconds)")
    );
}

#[tokio::test]
async fn https_to_a_plain_http_server_is_a_tls_failure() {
    let llm = ScriptedLlm::start(vec![]).await;
    let https = llm.base_url().replacen("http://", "https://", 1);
    let error = fail(&client(&https, ""), "m").await;
    let text = error.to_string();
    assert!(matches!(error, LlmError::Connect { .. }), "{error:?}");
    assert!(text.contains(&format!("{https}/chat/completions")), "{text}");
    assert!(text.contains("TLS handshake with 127.0.0.1:"), "{text}");
}

#[tokio::test]
async fn a_host_name_that_does_not_resolve_is_named() {
    // `.invalid` never resolves (RFC 2606), with or without a network.
    let error = fail(&client("http://minibot-e2e.invalid/v1", ""), "m").await;
    let text = error.to_string();
    assert!(matches!(error, LlmError::Connect { .. }), "{error:?}");
    assert!(text.contains("http://minibot-e2e.invalid/v1/chat/completions"), "{text}");
    assert!(text.contains("cannot resolve the host name `minibot-e2e.invalid`"), "{text}");
}

#[tokio::test]
async fn a_rejected_key_names_the_url_the_setting_and_the_providers_words() {
    let llm = ScriptedLlm::start(vec![Script::new("hi", vec![])]).await;
    llm.require_key("sk-the-right-one");
    let error = fail(&client(&llm.base_url(), ""), "m").await;
    assert!(matches!(error, LlmError::Unauthorized { status: 401, .. }), "{error:?}");
    let text = error.to_string();
    assert!(text.starts_with(&format!("{}/chat/completions rejected the API key from llm.api_key", llm.base_url())));
    assert!(
        text.ends_with(
            ": Incorrect API key provided: sk-****rors. You can find your API key at \
         https://platform.openai.com/account/api-keys. (HTTP 401)"
        ),
        "{text}"
    );
    assert!(!text.contains("\"code\""), "the provider's words, not its JSON: {text}");
}

#[tokio::test]
async fn a_model_the_server_does_not_have_is_named_with_the_servers_words() {
    let llm = ScriptedLlm::start(vec![Script::new("hi", vec![])]).await;
    llm.set_models(&["gpt-4o-mini"]);
    let error = fail(&client(&llm.base_url(), ""), "gpt-5-typo").await;
    assert!(matches!(error, LlmError::ModelNotFound { status: 404, .. }), "{error:?}");
    assert!(!error.is_retryable(), "asking again cannot help");
    assert_eq!(
        error.to_string(),
        format!(
            "model `gpt-5-typo` is not available at {}/chat/completions: The model `gpt-5-typo` does not exist or \
             you do not have access to it. (HTTP 404; check [llm] model)",
            llm.base_url()
        )
    );
}

#[tokio::test]
async fn a_server_that_takes_no_connection_times_out_on_the_connect_setting() {
    // A listener whose accept queue is full and never drained: the kernel drops further handshakes, so the
    // client's connection attempt hangs until its connect limit.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(0).unwrap();
    let address = listener.local_addr().unwrap();
    let mut fillers = Vec::new();
    for _ in 0..4 {
        let attempt = tokio::time::timeout(Duration::from_millis(300), tokio::net::TcpStream::connect(address)).await;
        match attempt {
            Ok(Ok(stream)) => fillers.push(stream),
            _ => break,
        }
    }
    let url = format!("http://{address}/v1");
    let error = fail(&client(&url, "sock_connect_timeout_seconds = 1\nrequest_timeout_seconds = 30\n"), "m").await;
    drop((listener, fillers));
    assert_eq!(
        error.to_string(),
        format!("could not connect to {url}/chat/completions within 1 s ([llm] sock_connect_timeout_seconds)")
    );
}

/// Red-team report (#22, finding 4): a server that sends an endless body no longer takes the process's memory;
/// the call fails once the ceiling is read, naming the URL.
#[tokio::test]
async fn an_endless_body_is_cut_at_the_ceiling_and_the_call_fails() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let sender = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut request = [0u8; 4096];
        let _ = socket.read(&mut request).await;
        let _ = socket.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{\"x\":\"").await;
        let chunk = vec![b'a'; 1 << 20];
        // 64 MiB at most, four times the ceiling: the client must stop reading well before.
        for _ in 0..64 {
            if socket.write_all(&chunk).await.is_err() {
                return;
            }
        }
    });
    let error = fail(&client(&format!("http://127.0.0.1:{port}/v1"), ""), "m").await;
    sender.abort();
    assert!(matches!(error, LlmError::InvalidResponse(_)), "{error:?}");
    assert!(error.to_string().contains("sent more than 16 MiB"), "{error}");
}
