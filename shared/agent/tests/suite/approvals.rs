//! The approval gate in the loop: which calls ask, what the user's answer (or its absence) does to the call and
//! to the rest of the model's response, and what the model is told.

use super::{Agent, Behaviour, COUNTER, CountingTool, FAILING, limits, tool_results};
use futures_util::future::BoxFuture;
use minibot_agent::{
    APPROVAL_DENIED_CODE, AgentOutcome, AgentRun, ApprovalDecision, ApprovalGate, ApprovalPrompt, ApprovalRequest,
    Approver, Limits, Patterns, StopReason, TIMEOUT_REPLY, Tool, ToolContext, ToolError, ToolRegistry, ToolResult,
    dyn_tool,
};
use minibot_test_support::{Reply, Script};
use serde_json::{Value, json};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A user who gives the same answer to every question, or (`None`) never answers; it remembers what it was asked.
#[derive(Default)]
struct User {
    answer: Option<ApprovalDecision>,
    asked: Mutex<Vec<ApprovalRequest>>,
}

impl User {
    fn answering(answer: ApprovalDecision) -> Arc<Self> {
        Arc::new(Self { answer: Some(answer), ..Self::default() })
    }

    fn asked(&self) -> Vec<ApprovalRequest> {
        self.asked.lock().unwrap().clone()
    }
}

impl ApprovalPrompt for User {
    fn ask(&self, request: ApprovalRequest) -> BoxFuture<'_, ApprovalDecision> {
        self.asked.lock().unwrap().push(request);
        let answer = self.answer.clone();
        Box::pin(async move {
            match answer {
                Some(answer) => answer,
                None => std::future::pending().await,
            }
        })
    }
}

fn approver(user: &Arc<User>, timeout: Duration) -> Option<Approver> {
    Some(Approver::new(user.clone(), timeout))
}

fn gate(patterns: &[&str]) -> ApprovalGate {
    ApprovalGate::new(Patterns::new(patterns).unwrap())
}

/// One run of `agent` with `tools`, the gate and the approver.
async fn run(
    agent: &Agent,
    tools: &ToolRegistry,
    user: &str,
    gate: &ApprovalGate,
    approver: Option<Approver>,
    limits: Limits,
) -> AgentOutcome {
    AgentRun {
        provider: agent.provider.as_ref(),
        model: &agent.model,
        tools,
        system_prompt: "You are a test agent.".into(),
        history: Vec::new(),
        user_message: user.into(),
        limits,
        context: ToolContext { approver, ..ToolContext::default() },
        approvals: Some(gate),
        inbox: None,
        on_event: &|_| {},
        keys: Default::default(),
        stream: false,
        known_tokens: None,
        compaction: None,
    }
    .run()
    .await
    .unwrap()
}

/// The tool results the model read in its second request.
fn results_seen(agent: &Agent) -> Vec<Value> {
    let requests = agent.requests();
    assert_eq!(requests.len(), 2, "the model is called again after the tool calls");
    tool_results(&requests[1])
}

fn assert_denied(result: &Value, tool: &str, message: &str) {
    assert_eq!(result["ok"], false, "{result}");
    assert_eq!(result["error_code"], APPROVAL_DENIED_CODE, "{result}");
    assert_eq!(result["tool"], tool, "{result}");
    assert_eq!(result["error"], message, "{result}");
}

#[tokio::test]
async fn an_approved_call_runs_after_the_user_saw_its_arguments() {
    let agent = Agent::start(vec![Script::new(
        "count",
        vec![Reply::tools_raw(&[(COUNTER, r#"{"n": 7, "api_key": "sk-secret"}"#)]), Reply::text("counted")],
    )])
    .await;
    let user = User::answering(ApprovalDecision::Approved);
    let outcome =
        run(&agent, &agent.tools, "count", &gate(&["count*"]), approver(&user, Duration::from_secs(5)), limits()).await;
    assert_eq!(outcome.answer, "counted");
    assert_eq!(agent.calls(COUNTER), 1);
    let asked = user.asked();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].tool, COUNTER);
    assert_eq!(asked[0].detail, "- n: 7\n- api_key: ***");
    assert_eq!(asked[0].reason, None);
    assert_eq!(results_seen(&agent)[0]["ok"], true);
}

#[tokio::test]
async fn calls_no_pattern_matches_run_without_asking() {
    let agent = Agent::start(vec![Script::new(
        "count",
        vec![Reply::tools_raw(&[(COUNTER, r#"{"n": 1}"#)]), Reply::text("counted")],
    )])
    .await;
    let user = User::answering(ApprovalDecision::Denied);
    run(&agent, &agent.tools, "count", &gate(&["Counter", "fail*"]), approver(&user, Duration::from_secs(5)), limits())
        .await;
    assert_eq!(agent.calls(COUNTER), 1, "patterns are case-sensitive");
    assert!(user.asked().is_empty());
}

#[tokio::test]
async fn a_denied_call_does_not_run_and_the_rest_of_the_response_is_skipped() {
    let agent = Agent::start(vec![Script::new(
        "count and fail",
        vec![
            Reply::tools_raw(&[(COUNTER, r#"{"n": 1}"#), (FAILING, "{}"), (COUNTER, r#"{"n": 2}"#)]),
            Reply::text("the user said no"),
        ],
    )])
    .await;
    let user = User::answering(ApprovalDecision::Denied);
    let outcome = run(
        &agent,
        &agent.tools,
        "count and fail",
        &gate(&[COUNTER]),
        approver(&user, Duration::from_secs(5)),
        limits(),
    )
    .await;
    assert_eq!(outcome.answer, "the user said no");
    assert_eq!(agent.calls(COUNTER), 0, "a denied call never runs");
    assert_eq!(agent.calls(FAILING), 0, "nor does anything after it in the same response, gated or not");
    assert_eq!(user.asked().len(), 1, "the skipped calls are not asked about");
    let results = results_seen(&agent);
    assert_eq!(results.len(), 3, "every call id gets a result");
    assert_denied(
        &results[0],
        COUNTER,
        "The user did not approve counter. Do not retry it unless the user asks again.",
    );
    for (result, tool) in results[1..].iter().zip([FAILING, COUNTER]) {
        assert_eq!(result["skipped"], true, "{result}");
        assert_eq!(result["tool"], tool, "{result}");
        assert!(result["reason"].as_str().unwrap().contains("did not approve an earlier call"), "{result}");
    }
}

#[tokio::test]
async fn calls_before_the_denied_one_keep_their_results() {
    let agent = Agent::start(vec![Script::new(
        "fail then count",
        vec![Reply::tools_raw(&[(FAILING, "{}"), (COUNTER, r#"{"n": 1}"#)]), Reply::text("done")],
    )])
    .await;
    let user = User::answering(ApprovalDecision::Denied);
    run(&agent, &agent.tools, "fail then count", &gate(&[COUNTER]), approver(&user, Duration::from_secs(5)), limits())
        .await;
    assert_eq!(agent.calls(FAILING), 1);
    let results = results_seen(&agent);
    assert_eq!(results[0]["error_code"], "broken");
    assert_eq!(results[1]["error_code"], APPROVAL_DENIED_CODE);
}

#[tokio::test]
async fn without_an_approver_a_gated_call_is_denied_at_once_and_says_why() {
    let agent = Agent::start(vec![Script::new(
        "count",
        vec![Reply::tools_raw(&[(COUNTER, r#"{"n": 1}"#)]), Reply::text("cannot")],
    )])
    .await;
    run(&agent, &agent.tools, "count", &gate(&[COUNTER]), None, limits()).await;
    assert_eq!(agent.calls(COUNTER), 0);
    assert_denied(
        &results_seen(&agent)[0],
        COUNTER,
        "The user did not approve counter: this conversation cannot ask the user for approval. Do not retry it \
         unless the user asks again.",
    );
}

#[tokio::test]
async fn no_answer_within_the_approval_timeout_is_a_denial() {
    let agent = Agent::start(vec![Script::new(
        "count",
        vec![Reply::tools_raw(&[(COUNTER, r#"{"n": 1}"#)]), Reply::text("timed out")],
    )])
    .await;
    let silent = Arc::new(User::default());
    let started = std::time::Instant::now();
    let outcome =
        run(&agent, &agent.tools, "count", &gate(&[COUNTER]), approver(&silent, Duration::from_millis(300)), limits())
            .await;
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(outcome.answer, "timed out");
    assert_eq!(agent.calls(COUNTER), 0);
    assert_eq!(silent.asked().len(), 1);
    let result = &results_seen(&agent)[0];
    assert_eq!(result["error_code"], APPROVAL_DENIED_CODE);
    assert!(result["error"].as_str().unwrap().contains("nobody answered"), "{result}");
}

#[tokio::test]
async fn the_wait_counts_against_the_run_time_limit() {
    let agent = Agent::start(vec![Script::new(
        "count",
        vec![Reply::tools_raw(&[(COUNTER, r#"{"n": 1}"#)]), Reply::text("never reached")],
    )])
    .await;
    let silent = Arc::new(User::default());
    let limits = Limits { timeout: Duration::from_millis(400), ..limits() };
    let outcome =
        run(&agent, &agent.tools, "count", &gate(&[COUNTER]), approver(&silent, Duration::from_secs(60)), limits).await;
    assert_eq!(outcome.stop_reason, StopReason::Timeout);
    assert_eq!(outcome.answer, TIMEOUT_REPLY);
    assert_eq!(agent.calls(COUNTER), 0);
    assert_eq!(agent.requests().len(), 1);
}

/// A registry with a lazy MCP call tool (`mcp_gh__call_tool`) that counts its calls.
fn lazy_tools() -> (ToolRegistry, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let mut tools = ToolRegistry::new();
    tools.register(dyn_tool(CountingTool {
        name: "mcp_gh__call_tool",
        behaviour: Behaviour::Echo,
        calls: calls.clone(),
    }));
    (tools, calls)
}

#[tokio::test]
async fn a_lazy_mcp_call_is_gated_by_the_remote_tool_name() {
    let agent = Agent::start(vec![Script::new(
        "clean up",
        vec![
            Reply::tools_raw(&[
                ("mcp_gh__call_tool", r#"{"tool_name": "list_repos", "arguments": {}}"#),
                ("mcp_gh__call_tool", r#"{"tool_name": "delete_repo", "arguments": {"name": "old", "token": "t"}}"#),
            ]),
            Reply::text("asked"),
        ],
    )])
    .await;
    let (tools, calls) = lazy_tools();
    let user = User::answering(ApprovalDecision::Approved);
    run(&agent, &tools, "clean up", &gate(&["mcp_gh__delete_*"]), approver(&user, Duration::from_secs(5)), limits())
        .await;
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 2);
    let asked = user.asked();
    assert_eq!(asked.len(), 1, "only the remote name the pattern matches asks: {asked:?}");
    assert_eq!(asked[0].tool, "mcp_gh__delete_repo (via mcp_gh__call_tool)");
    assert_eq!(asked[0].tool_names(), ["mcp_gh__call_tool", "mcp_gh__delete_repo"]);
    assert_eq!(asked[0].detail, "- tool_name: delete_repo\n- arguments: {\"name\":\"old\",\"token\":\"***\"}");
}

#[tokio::test]
async fn a_lazy_mcp_call_is_gated_by_its_own_name_too() {
    let agent = Agent::start(vec![Script::new(
        "clean up",
        vec![
            Reply::tools_raw(&[("mcp_gh__call_tool", r#"{"tool_name": "list_repos", "arguments": {}}"#)]),
            Reply::text("denied"),
        ],
    )])
    .await;
    let (tools, calls) = lazy_tools();
    let user = User::answering(ApprovalDecision::Denied);
    run(&agent, &tools, "clean up", &gate(&["mcp_gh__call_tool"]), approver(&user, Duration::from_secs(5)), limits())
        .await;
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert_denied(
        &results_seen(&agent)[0],
        "mcp_gh__call_tool",
        "The user did not approve mcp_gh__list_repos (via mcp_gh__call_tool). Do not retry it unless the user asks \
         again.",
    );
}

/// A tool that guards itself (as the file tools guard the config file): it asks through the context's approver
/// with a reason, and reports the denial with the same code.
struct Guarded;

impl Tool for Guarded {
    type Args = Value;

    fn name(&self) -> &str {
        "guarded"
    }

    fn description(&self) -> String {
        "Asks before it acts.".into()
    }

    fn parameters(&self) -> Value {
        json!({ "type": "object" })
    }

    async fn call(&self, args: Value, ctx: &ToolContext) -> ToolResult {
        let request = ApprovalRequest::for_call("guarded", None, &args, Some("writes the config file".into()));
        minibot_agent::ask_approval(ctx, request).await?;
        Err(ToolError::respond("unreachable", "the test user always denies"))
    }
}

#[tokio::test]
async fn a_denial_reported_by_a_tool_also_skips_the_rest() {
    let agent = Agent::start(vec![Script::new(
        "guard",
        vec![
            Reply::tools_raw(&[("guarded", r#"{"path": "config.toml"}"#), (COUNTER, r#"{"n": 1}"#)]),
            Reply::text("ok"),
        ],
    )])
    .await;
    let mut tools = agent.tools.clone();
    tools.register(dyn_tool(Guarded));
    let user = User::answering(ApprovalDecision::Denied);
    run(&agent, &tools, "guard", &ApprovalGate::default(), approver(&user, Duration::from_secs(5)), limits()).await;
    assert_eq!(user.asked()[0].reason.as_deref(), Some("writes the config file"));
    assert_eq!(agent.calls(COUNTER), 0, "the call after the denial is skipped");
    let results = results_seen(&agent);
    assert_eq!(results[0]["error_code"], APPROVAL_DENIED_CODE);
    assert_eq!(results[1]["skipped"], true);
}
