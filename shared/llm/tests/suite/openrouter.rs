//! OpenRouter: Chat Completions plus its routing options from `[llm.openrouter]`, the attribution headers, a
//! bounded `max_tokens`, and the model's reasoning replayed in the follow-up of a tool loop.

use minibot_config::Config;
use minibot_llm::{ChatProvider, ChatRequest, Message, ToolCall};
use minibot_test_support::{Reply, Script, ScriptedLlm};
use serde_json::json;

fn client(llm: &ScriptedLlm, extra: &str) -> std::sync::Arc<dyn ChatProvider> {
    let toml = format!(
        "[llm]\nprovider = \"openrouter\"\nbase_url = \"{}\"\napi_key = \"sk-or-test\"\nmodel = \"openai/gpt-4o\"\n{extra}",
        llm.base_url()
    );
    let config = Config::from_toml(&toml, "test.toml", std::env::temp_dir(), &|_| None).unwrap();
    minibot_llm::provider_for(&config.main_llm()).unwrap()
}

#[tokio::test]
async fn routing_options_reach_openrouter_in_its_shape() {
    let llm = ScriptedLlm::start(vec![Script::new("route", vec![Reply::text("routed")])]).await;
    let extra = r#"
reasoning_effort = "high"
[llm.openrouter]
models = ["anthropic/claude-sonnet-4", "google/gemini-2.5-pro"]
reasoning_enabled = true
plugins = [{ id = "web", max_results = 3 }]
[llm.openrouter.provider]
order = ["anthropic", "openai"]
allow_fallbacks = false
data_collection = "deny"
sort = "throughput"
max_price = { prompt = 1, completion = 2 }
[llm.openrouter.provider.provider_extra]
experimental = true
"#;
    let request = ChatRequest {
        model: "openai/gpt-4o".into(),
        messages: vec![Message::User("route".into())],
        reasoning_effort: Some("high".into()),
        ..ChatRequest::default()
    };
    let answer = client(&llm, extra).complete(&request).await.unwrap();
    assert_eq!(answer.content.as_deref(), Some("routed"));
    let body = &llm.requests()[0];
    assert_eq!(body["models"], json!(["anthropic/claude-sonnet-4", "google/gemini-2.5-pro"]));
    assert_eq!(
        body["provider"],
        json!({ "order": ["anthropic", "openai"], "allow_fallbacks": false, "data_collection": "deny",
                "sort": "throughput", "max_price": { "prompt": 1, "completion": 2 }, "experimental": true })
    );
    assert_eq!(body["reasoning"], json!({ "effort": "high", "enabled": true }));
    assert!(body.get("reasoning_effort").is_none(), "OpenRouter takes the effort inside `reasoning`: {body}");
    assert_eq!(body["plugins"], json!([{ "id": "web", "max_results": 3 }]));
    assert_eq!(body["max_tokens"], 4096, "a bounded default budget");
}

#[tokio::test]
async fn nothing_configured_sends_no_routing_fields_and_a_large_budget_is_capped() {
    let llm = ScriptedLlm::start(vec![Script::new("plain", vec![Reply::text("ok")])]).await;
    let request = ChatRequest {
        model: "openai/gpt-4o".into(),
        messages: vec![Message::User("plain".into())],
        max_tokens: Some(100_000),
        ..ChatRequest::default()
    };
    client(&llm, "").complete(&request).await.unwrap();
    let body = &llm.requests()[0];
    for absent in ["models", "provider", "reasoning", "plugins"] {
        assert!(body.get(absent).is_none(), "{absent}: {body}");
    }
    assert_eq!(body["max_tokens"], 32768);
}

#[tokio::test]
async fn reasoning_is_replayed_in_the_follow_up_and_attribution_headers_are_sent() {
    let llm = ScriptedLlm::start(vec![Script::new("think", vec![Reply::text("done")])]).await;
    let call = ToolCall { id: "c1".into(), name: "current_datetime".into(), arguments: "{}".into() };
    let request = ChatRequest {
        model: "openai/gpt-4o".into(),
        messages: vec![
            Message::User("think".into()),
            Message::Assistant {
                content: None,
                tool_calls: vec![call],
                reasoning: Some("The user wants the time.".into()),
                replay: None,
            },
            Message::Tool { call_id: "c1".into(), name: "current_datetime".into(), content: "12:00".into() },
        ],
        ..ChatRequest::default()
    };
    client(&llm, "").complete(&request).await.unwrap();
    let body = &llm.requests()[0];
    assert_eq!(body["messages"][1]["reasoning"], "The user wants the time.");
    let headers = llm.headers();
    assert_eq!(headers[0].get("x-openrouter-title").map(String::as_str), Some("MiniBot"));
    assert!(headers[0].contains_key("http-referer"), "{:?}", headers[0]);
}

#[tokio::test]
async fn a_specialists_openrouter_keys_override_the_configs_for_its_requests() {
    let llm = ScriptedLlm::start(vec![Script::new("route", vec![Reply::text("ok")])]).await;
    let toml = format!(
        "[llm]\nprovider = \"openrouter\"\nbase_url = \"{}\"\napi_key = \"sk-or-test\"\n\
         [llm.openrouter.provider]\norder = [\"openai\"]\nallow_fallbacks = true\n",
        llm.base_url()
    );
    let config = Config::from_toml(&toml, "test.toml", std::env::temp_dir(), &|_| None).unwrap();
    let agent = minibot_config::parse_agent(
        "---\nname: researcher\ndescription: finds things\nopenrouter_reasoning_enabled: false\n\
         openrouter_provider_order: [\"anthropic\"]\nopenrouter_provider_data_collection: deny\n---\nYou research.\n",
        std::path::Path::new("agents/researcher.md"),
    )
    .unwrap();
    let mut endpoint = config.main_llm();
    agent.apply_openrouter(&mut endpoint.options.openrouter);
    let request =
        ChatRequest { model: "m".into(), messages: vec![Message::User("route".into())], ..ChatRequest::default() };
    minibot_llm::provider_for(&endpoint).unwrap().complete(&request).await.unwrap();
    let body = &llm.requests()[0];
    assert_eq!(body["provider"], json!({ "order": ["anthropic"], "allow_fallbacks": true, "data_collection": "deny" }));
    assert_eq!(body["reasoning"], json!({ "enabled": false }));
}
