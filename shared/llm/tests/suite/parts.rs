//! A user message made of parts reaches the server in the shape OpenAI-compatible vision APIs take.

use minibot_config::Config;
use minibot_llm::{ChatProvider, ChatRequest, ContentPart, Message};
use minibot_test_support::{Reply, Script, ScriptedLlm};
use serde_json::json;

fn client(llm: &ScriptedLlm) -> std::sync::Arc<dyn ChatProvider> {
    let toml = format!("[llm]\nbase_url = \"{}\"\napi_key = \"sk-test\"\nmodel = \"m\"\n", llm.base_url());
    let config = Config::from_toml(&toml, "test.toml", std::env::temp_dir(), &|_| None).unwrap();
    minibot_llm::provider_for(&config.main_llm()).unwrap()
}

#[tokio::test]
async fn text_and_image_parts_are_sent_as_content_parts() {
    let llm = ScriptedLlm::start(vec![Script::new("look", vec![Reply::text("a red dot")])]).await;
    let png: &[u8] = b"\x89PNG\r\n\x1a\nfake";
    let request = ChatRequest {
        model: "m".into(),
        messages: vec![
            Message::System("sys".into()),
            Message::User("look".into()),
            Message::UserParts(vec![ContentPart::Text("dot.png:".into()), ContentPart::image_data("image/png", png)]),
        ],
        ..ChatRequest::default()
    };
    let response = client(&llm).complete(&request).await.unwrap();
    // The server picks its script by the last plain-text user message; the parts message follows it.
    assert_eq!(response.content.as_deref(), Some("a red dot"));
    let body = &llm.requests()[0];
    assert_eq!(body["messages"][1], json!({ "role": "user", "content": "look" }), "plain text stays a string");
    assert_eq!(
        body["messages"][2],
        json!({ "role": "user", "content": [
            { "type": "text", "text": "dot.png:" },
            { "type": "image_url", "image_url": { "url": "data:image/png;base64,iVBORw0KGgpmYWtl" } },
        ] })
    );
}
