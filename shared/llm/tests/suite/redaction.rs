//! A provider that echoes the credentials it was sent: the error the caller gets (what the chat shows with
//! verbose errors, what the log writes, what a task reports) never repeats them.

use minibot_config::Config;
use minibot_llm::{ChatProvider, ChatRequest, LlmError, Message};
use minibot_test_support::{Reply, Script, ScriptedLlm};

const LLM_KEY: &str = "sk-live-llm-0123456789abcdef";
const PROVIDER_KEY: &str = "sk-or-provider-9876543210fedcba";
const HEADER_KEY: &str = "hdr-secret-5555-aaaa";

fn client(toml: &str) -> std::sync::Arc<dyn ChatProvider> {
    let config = Config::from_toml(toml, "test.toml", std::env::temp_dir(), &|_| None).unwrap();
    minibot_llm::provider_for(&config.main_llm()).unwrap()
}

fn llm_client(llm: &ScriptedLlm) -> std::sync::Arc<dyn ChatProvider> {
    client(&format!(
        "[llm]\nbase_url = \"{}\"\napi_key = \"{LLM_KEY}\"\nmodel = \"m\"\nretry_attempts = 0\n",
        llm.base_url()
    ))
}

async fn fail(client: &dyn ChatProvider, user: &str) -> LlmError {
    let request =
        ChatRequest { model: "m".into(), messages: vec![Message::User(user.into())], ..ChatRequest::default() };
    client.complete(&request).await.expect_err("the provider refuses")
}

/// Every way the error reaches a person: its message (chat, task result) and its debug form.
fn shown(error: &LlmError) -> String {
    format!("{error}\n{error:?}")
}

#[tokio::test]
async fn a_rejected_llm_key_echoed_in_a_401_body_is_masked() {
    let body = format!(
        "{{\"error\":{{\"message\":\"Incorrect API key provided: {LLM_KEY}. You can find your API key at …\",\
         \"type\":\"invalid_request_error\",\"code\":\"invalid_api_key\"}}}}"
    );
    let llm = ScriptedLlm::start(vec![Script::new("hi", vec![Reply::Status(401, body)])]).await;
    let error = fail(&llm_client(&llm), "hi").await;
    assert!(matches!(error, LlmError::Unauthorized { status: 401, .. }), "{error:?}");
    let text = shown(&error);
    assert!(!text.contains(LLM_KEY), "the key came back: {text}");
    assert!(!text.contains("sk-live-llm"), "a part of the key came back: {text}");
    assert!(text.contains("Incorrect API key provided: ***"), "{text}");
}

#[tokio::test]
async fn a_providers_section_key_and_auth_header_are_masked_even_where_the_quote_is_cut() {
    // The key sits across the 300-character cut of quoted bodies: masking must come first, or its start would
    // be left readable.
    let padding = "x".repeat(290);
    let body = format!("{padding} key={PROVIDER_KEY} header={HEADER_KEY}");
    let llm = ScriptedLlm::start(vec![Script::new("hi", vec![Reply::Status(403, body)])]).await;
    let toml = format!(
        "[llm]\nprovider = \"gw\"\nmodel = \"m\"\nretry_attempts = 0\n\
         [providers.gw]\napi_format = \"openai\"\nbase_url = \"{}\"\napi_key = \"{PROVIDER_KEY}\"\n\
         headers = {{ \"X-Api-Key\" = \"{HEADER_KEY}\" }}\n",
        llm.base_url()
    );
    let error = fail(&client(&toml), "hi").await;
    let text = shown(&error);
    assert!(!text.contains("sk-or-provider"), "the key or its start came back: {text}");
    assert!(text.contains(&format!("{padding} key=***")), "{text}");
    let short = ScriptedLlm::start(vec![Script::new("hi", vec![Reply::Status(403, format!("h={HEADER_KEY}"))])]).await;
    let toml = toml.replace(&llm.base_url(), &short.base_url());
    let text = shown(&fail(&client(&toml), "hi").await);
    assert!(!text.contains(HEADER_KEY), "the header's key came back: {text}");
    assert!(text.contains("h=***"), "{text}");
}

#[tokio::test]
async fn keys_echoed_in_a_200_error_or_an_unreadable_body_are_masked() {
    let in_error = format!("{{\"error\":{{\"message\":\"key {LLM_KEY} is revoked\"}}}}");
    let not_json = format!("<html>bad gateway for {LLM_KEY}</html>");
    let llm = ScriptedLlm::start(vec![
        Script::new("error field", vec![Reply::Raw(in_error)]),
        Script::new("not json", vec![Reply::Raw(not_json)]),
    ])
    .await;
    let client = llm_client(&llm);
    for user in ["error field", "not json"] {
        let text = shown(&fail(&client, user).await);
        assert!(!text.contains(LLM_KEY), "{user}: the key came back: {text}");
        assert!(text.contains("***"), "{user}: {text}");
    }
}

#[tokio::test]
async fn a_placeholder_key_is_not_masked_in_what_the_user_says_and_an_escaped_key_is() {
    // Local servers take placeholder keys that are ordinary words; the conversation reaches the model whole.
    let llm = ScriptedLlm::start(vec![Script::new("update ollama", vec![Reply::text("sure")])]).await;
    let local = client(&format!(
        "[llm]\nbase_url = \"{}\"\napi_key = \"ollama\"\nmodel = \"m\"\nretry_attempts = 0\n",
        llm.base_url()
    ));
    let request = ChatRequest {
        model: "m".into(),
        messages: vec![Message::User("how do I update ollama?".into())],
        ..ChatRequest::default()
    };
    local.complete(&request).await.unwrap();
    assert!(llm.requests()[0].to_string().contains("how do I update ollama?"), "{:?}", llm.requests());

    // A gateway that escapes `/` in JSON (PHP does) still has the key masked.
    let slashed = "sk-live/with/slashes-0123456789";
    let body = format!("{{\"error\":{{\"message\":\"bad key {}\"}}}}", slashed.replace('/', "\\/"));
    let llm = ScriptedLlm::start(vec![Script::new("hi", vec![Reply::Status(401, body)])]).await;
    let toml = format!(
        "[llm]\nbase_url = \"{}\"\napi_key = \"{slashed}\"\nmodel = \"m\"\nretry_attempts = 0\n",
        llm.base_url()
    );
    let text = shown(&fail(&client(&toml), "hi").await);
    assert!(!text.contains("slashes-0123456789"), "the escaped key came back: {text}");
    assert!(text.contains("bad key ***"), "{text}");
}

#[tokio::test]
async fn a_key_from_a_variable_is_masked_wherever_the_conversation_repeats_it() {
    // The key reaches the config through `${VAR}`, not the vault: the model echoes it in a call's arguments, a
    // tool prints it, the user pastes it. None of it may travel in the body; the header still carries it.
    const ENV_KEY: &str = "sk-from-the-environment-31337";
    let llm = ScriptedLlm::start(vec![Script::containing("my key", vec![Reply::text("ok"), Reply::text("ok")])]).await;
    let toml = format!(
        "[llm]\nbase_url = \"{}\"\napi_key = \"${{PROVIDER_KEY}}\"\nmodel = \"m\"\nretry_attempts = 0\n",
        llm.base_url()
    );
    let lookup = |name: &str| (name == "PROVIDER_KEY").then(|| ENV_KEY.to_string());
    let config = Config::from_toml(&toml, "test.toml", std::env::temp_dir(), &lookup).unwrap();
    let client = minibot_llm::provider_for(&config.main_llm()).unwrap();
    let call = minibot_llm::ToolCall {
        id: "1".into(),
        name: "bash".into(),
        arguments: format!("{{\"command\":\"curl -H 'Authorization: Bearer {ENV_KEY}' …\"}}"),
    };
    let request = ChatRequest {
        model: "m".into(),
        messages: vec![
            Message::User(format!("my key is {ENV_KEY}")),
            Message::assistant_calls(Some(format!("I will use {ENV_KEY}")), vec![call]),
            Message::Tool { call_id: "1".into(), name: "bash".into(), content: format!("OPENAI_API_KEY={ENV_KEY}\n") },
        ],
        ..ChatRequest::default()
    };
    client.complete(&request).await.unwrap();
    let body = llm.requests()[0].to_string();
    assert!(!body.contains(ENV_KEY), "the key travelled in the body: {body}");
    for masked in ["my key is ***", "I will use ***", "Bearer ***", "OPENAI_API_KEY=***"] {
        assert!(body.contains(masked), "{masked}: {body}");
    }
    assert_eq!(llm.authorizations(), [format!("Bearer {ENV_KEY}")]);
}

/// A server that answers every request with `head` and records what it was sent.
async fn raw_server(head: String) -> (String, std::sync::Arc<std::sync::Mutex<String>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let record = std::sync::Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut buffer = vec![0u8; 16 * 1024];
            let read = socket.read(&mut buffer).await.unwrap_or(0);
            record.lock().unwrap().push_str(&String::from_utf8_lossy(&buffer[..read]));
            let _ = socket.write_all(head.as_bytes()).await;
        }
    });
    (url, seen)
}

/// Red-team report (#22, F3): reqwest drops only `Authorization` on a redirect to another host, so Anthropic's
/// `x-api-key` followed a 307 anywhere.
#[tokio::test]
async fn a_redirect_to_another_host_is_not_followed_with_the_key() {
    let (elsewhere, seen_elsewhere) =
        raw_server("HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}".into()).await;
    let moved = format!(
        "HTTP/1.1 307 Temporary Redirect\r\nlocation: {elsewhere}/v1/messages\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    );
    let (base, _) = raw_server(moved).await;
    for provider in ["claude", "google"] {
        let client = client(&format!(
            "[llm]\nprovider = \"{provider}\"\nbase_url = \"{base}\"\napi_key = \"{LLM_KEY}\"\nmodel = \"m\"\n\
             retry_attempts = 0\n"
        ));
        let request =
            ChatRequest { model: "m".into(), messages: vec![Message::User("hi".into())], ..ChatRequest::default() };
        let refused = client.complete(&request).await.expect_err("a redirect is not an answer");
        assert!(!refused.to_string().contains(LLM_KEY), "{refused}");
    }
    assert_eq!(seen_elsewhere.lock().unwrap().as_str(), "", "the other host was sent a request");
}
