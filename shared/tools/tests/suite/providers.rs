//! Model providers a task may select: `fetch_agent_info` offers only those this build can call with the
//! credentials it has, and `spawn_task` / `delegate` refuse any other before anything is queued.

use futures_util::future::BoxFuture;
use minibot_agent::{ToolContext, ToolError, ToolRegistry};
use minibot_config::{ApiFormat, Config};
use minibot_tools::tasks::{TaskRequest, TaskService, TaskStatus, register};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

/// Queues nothing; records what it was asked to queue.
#[derive(Default)]
struct Queue {
    submitted: Mutex<Vec<Option<String>>>,
}

impl TaskService for Queue {
    fn submit<'a>(&'a self, request: TaskRequest, _ctx: &'a ToolContext) -> BoxFuture<'a, Result<Value, ToolError>> {
        self.submitted.lock().unwrap().push(request.model_provider);
        Box::pin(async { Ok(json!({ "ok": true, "status": "queued" })) })
    }
    fn cancel<'a>(&'a self, _: &'a str, _: &'a ToolContext) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async { Ok(json!({})) })
    }
    fn message<'a>(&'a self, _: &'a str, _: &'a str, _: &'a ToolContext) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async { Ok(json!({})) })
    }
    fn list<'a>(
        &'a self,
        _: Option<TaskStatus>,
        _: u32,
        _: &'a ToolContext,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async { Ok(json!({})) })
    }
    fn get<'a>(&'a self, _: &'a str, _: bool, _: &'a ToolContext) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async { Ok(json!({})) })
    }
    fn agent_info<'a>(&'a self, agent_name: &'a str) -> BoxFuture<'a, Result<Value, ToolError>> {
        // What the orchestrator's service answered before: every provider with a key, callable or not.
        Box::pin(async move {
            Ok(json!({ "ok": true, "agent": agent_name,
                       "available_providers": [{ "name": "codex", "api_format": "chatgpt_codex", "models": [] }] }))
        })
    }
    fn roster(&self) -> Vec<(String, String)> {
        vec![("writer".into(), "writes".into())]
    }
}

const CONFIG: &str = "[llm]\napi_key = \"sk-main\"\n\
    [providers.local]\napi_format = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodels = [\"qwen\"]\n\
    [providers.anthropic]\napi_format = \"claude\"\napi_key = \"sk-ant\"\n\
    [providers.codex]\napi_format = \"chatgpt_codex\"\napi_key = \"sk-codex\"\n";

fn setup() -> (Arc<Queue>, ToolRegistry) {
    let config = Config::from_toml(CONFIG, "config.toml", "/srv", &|_| None).unwrap();
    let queue = Arc::new(Queue::default());
    let mut registry = ToolRegistry::new();
    register(&mut registry, queue.clone(), &Arc::new(config));
    (queue, registry)
}

async fn call(registry: &ToolRegistry, name: &str, args: Value) -> Result<Value, ToolError> {
    let ctx = ToolContext { chat_id: Some(1), ..Default::default() };
    registry.get(name).unwrap().call_json(args, &ctx).await
}

#[tokio::test]
async fn fetch_agent_info_offers_only_callable_providers() {
    let (_queue, registry) = setup();
    let info = call(&registry, "fetch_agent_info", json!({ "agent_name": "writer" })).await.unwrap();
    assert_eq!(
        info["available_providers"],
        json!([
            { "name": "openai", "api_format": "openai", "models": [] },
            { "name": "anthropic", "api_format": "claude", "models": [] },
            { "name": "local", "api_format": "openai", "models": ["qwen"] },
        ])
    );
    assert_eq!(info["agent"], "writer");
}

#[tokio::test]
async fn a_provider_no_worker_can_call_is_refused_before_it_is_queued() {
    let (queue, registry) = setup();
    for tool in ["spawn_task", "delegate"] {
        let error =
            call(&registry, tool, json!({ "prompt": "write a poem", "model_provider": "codex" })).await.unwrap_err();
        let ToolError::RespondToModel { code, message } = error else { panic!("{tool}: fatal error") };
        assert_eq!(code, "provider_unavailable");
        assert!(message.contains("`codex`") && message.contains("`chatgpt_codex` API format"), "{message}");
        assert!(message.contains("Available providers: openai, anthropic, local"), "{message}");

        let error = call(&registry, tool, json!({ "prompt": "x", "model_provider": "nowhere" })).await.unwrap_err();
        let ToolError::RespondToModel { code, message } = error else { panic!("{tool}: fatal error") };
        assert_eq!(code, "provider_unavailable");
        assert!(message.contains("`nowhere` is not a configured provider"), "{message}");
    }
    assert!(queue.submitted.lock().unwrap().is_empty(), "nothing may be queued");

    call(&registry, "spawn_task", json!({ "prompt": "x", "model_provider": "local" })).await.unwrap();
    call(&registry, "delegate", json!({ "prompt": "x", "model_provider": " " })).await.unwrap();
    assert_eq!(*queue.submitted.lock().unwrap(), [Some("local".to_string()), None]);
}

#[tokio::test]
async fn a_provider_without_credentials_is_refused_and_not_offered() {
    if std::env::var_os("OPENROUTER_API_KEY").is_some() {
        return; // the variable would supply the key
    }
    let text = format!("{CONFIG}[providers.router]\napi_format = \"openrouter\"\n");
    let config = Config::from_toml(&text, "config.toml", "/srv", &|_| None).unwrap();
    let queue = Arc::new(Queue::default());
    let mut registry = ToolRegistry::new();
    register(&mut registry, queue.clone(), &Arc::new(config));
    let error = call(&registry, "spawn_task", json!({ "prompt": "x", "model_provider": "router" })).await.unwrap_err();
    let ToolError::RespondToModel { code, message } = error else { panic!("fatal") };
    assert_eq!(code, "provider_unavailable");
    assert!(message.contains("providers.router.api_key") && message.contains("OPENROUTER_API_KEY"), "{message}");
    let info = call(&registry, "fetch_agent_info", json!({ "agent_name": "writer" })).await.unwrap();
    assert!(!info["available_providers"].to_string().contains("router"), "{info}");
}

#[test]
fn the_support_table_and_the_llm_clients_agree() {
    for name in minibot_config::API_FORMATS {
        let format = ApiFormat::parse(name).unwrap();
        let mut config = Config::defaults("/srv");
        config.llm.provider = name.to_string();
        config.llm.base_url = Some("http://127.0.0.1:9/v1".into());
        let endpoint = config.main_llm();
        assert_eq!(endpoint.api_format, format);
        assert_eq!(
            minibot_llm::provider_for(&endpoint).is_ok(),
            format.is_callable(),
            "{name}: the table in shared/config/src/support.rs says callable = {}",
            format.is_callable()
        );
    }
}
