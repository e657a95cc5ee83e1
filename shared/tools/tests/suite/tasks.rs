//! The delegation tools against a recording task service: what they validate and what they hand on.

use futures_util::future::BoxFuture;
use minibot_agent::{ToolContext, ToolError, ToolRegistry};
use minibot_config::DelegationMode;
use minibot_tools::tasks::{TaskRequest, TaskService, TaskStatus, register};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

/// Answers every call with `{"ok": true}` and records it as text.
#[derive(Default)]
struct Recorder {
    calls: Mutex<Vec<String>>,
    roster: Vec<(String, String)>,
}

impl Recorder {
    fn answer(&self, call: String) -> BoxFuture<'_, Result<Value, ToolError>> {
        self.calls.lock().unwrap().push(call);
        Box::pin(async { Ok(json!({ "ok": true })) })
    }
}

impl TaskService for Recorder {
    fn submit<'a>(&'a self, request: TaskRequest, _ctx: &'a ToolContext) -> BoxFuture<'a, Result<Value, ToolError>> {
        self.answer(format!("submit {} {}", request.delivery, request.prompt))
    }
    fn cancel<'a>(&'a self, task_id: &'a str, _ctx: &'a ToolContext) -> BoxFuture<'a, Result<Value, ToolError>> {
        self.answer(format!("cancel {task_id}"))
    }
    fn message<'a>(
        &'a self,
        task_id: &'a str,
        text: &'a str,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        self.answer(format!("message {task_id} {text}"))
    }
    fn list<'a>(
        &'a self,
        status: Option<TaskStatus>,
        limit: u32,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        self.answer(format!("list {status:?} {limit}"))
    }
    fn get<'a>(
        &'a self,
        task_id: &'a str,
        include_events: bool,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        self.answer(format!("get {task_id} {include_events}"))
    }
    fn agent_info<'a>(&'a self, agent_name: &'a str) -> BoxFuture<'a, Result<Value, ToolError>> {
        self.answer(format!("agent_info {agent_name}"))
    }
    fn roster(&self) -> Vec<(String, String)> {
        self.roster.clone()
    }
}

fn tools(service: &Arc<Recorder>, mode: DelegationMode) -> ToolRegistry {
    let mut config = minibot_config::Config::defaults("/tmp");
    config.tasks.delegation_mode = mode;
    let mut registry = ToolRegistry::new();
    register(&mut registry, service.clone(), &Arc::new(config));
    registry
}

async fn call(registry: &ToolRegistry, name: &str, args: Value) -> Result<Value, ToolError> {
    registry.get(name).unwrap().call_json(args, &ToolContext::default()).await
}

#[test]
fn the_mode_and_the_roster_choose_the_tools() {
    let plain = Arc::new(Recorder::default());
    assert_eq!(
        tools(&plain, DelegationMode::Delegate).names(),
        ["delegate", "cancel_task", "message_task", "list_tasks", "get_task"]
    );
    let staffed =
        Arc::new(Recorder { roster: vec![("researcher".into(), "finds things".into())], ..Default::default() });
    let names = tools(&staffed, DelegationMode::Auto).names();
    assert_eq!(names.first().map(String::as_str), Some("spawn_task"));
    assert_eq!(names.last().map(String::as_str), Some("fetch_agent_info"));
    let status = tools(&staffed, DelegationMode::Auto).get("list_tasks").unwrap().spec().parameters;
    assert_eq!(
        status["properties"]["status"]["enum"],
        json!([null, "pending", "running", "done", "failed", "cancelled", "timed_out"])
    );
}

#[tokio::test]
async fn arguments_are_checked_and_handed_on() {
    let service = Arc::new(Recorder::default());
    let registry = tools(&service, DelegationMode::Auto);
    call(&registry, "list_tasks", json!({ "status": "timed_out", "limit": 500 })).await.unwrap();
    call(&registry, "list_tasks", json!({ "status": "" })).await.unwrap();
    let error = call(&registry, "list_tasks", json!({ "status": "leased" })).await.unwrap_err();
    assert_eq!(
        error,
        ToolError::invalid_arguments("status must be one of pending, running, done, failed, cancelled, timed_out")
    );
    call(&registry, "get_task", json!({ "task_id": " abc " })).await.unwrap();
    call(&registry, "get_task", json!({ "task_id": "abc", "include_events": false })).await.unwrap();
    call(&registry, "cancel_task", json!({ "task_id": "abc" })).await.unwrap();
    call(&registry, "message_task", json!({ "task_id": "abc", "message": " faster " })).await.unwrap();
    assert!(call(&registry, "message_task", json!({ "task_id": "abc", "message": " " })).await.is_err());
    call(&registry, "spawn_task", json!({ "prompt": " go " })).await.unwrap();
    call(&registry, "delegate", json!({ "prompt": "check" })).await.unwrap();
    assert_eq!(
        *service.calls.lock().unwrap(),
        [
            "list Some(TimedOut) 100",
            "list None 20",
            "get abc true",
            "get abc false",
            "cancel abc",
            "message abc faster",
            "submit spawn go",
            "submit delegate check",
        ]
    );
}
