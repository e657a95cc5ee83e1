//! Calls one tool makes on the agent's behalf (a `run_tools_script` script's calls). They go through what a
//! direct call goes through: the approval gate and the events the channels show, marked with the calling
//! call's id (`parent_call_id`). They are not the model's calls: they do not count against the run's tool-call
//! cap, and their results go whole to the calling tool (the spill wrapper steps aside for them).

use crate::approval_gate::ApprovalGate;
use crate::outcome::AgentEvent;
use crate::tool::{DynTool, ToolContext, ToolResult};
use serde_json::Value;
use std::time::Instant;
use tokio::sync::mpsc::UnboundedSender;

/// What the agent loop hands a tool so it can run other tools as the loop would: the run's approval gate and a
/// way to report events, which the loop passes on while the calling tool runs.
#[derive(Debug, Clone)]
pub struct NestedCalls {
    approvals: Option<ApprovalGate>,
    events: UnboundedSender<AgentEvent>,
    /// The user said no to one of this tool's calls: like the rest of a response after a denial, its later calls
    /// that need approval are refused without asking again (a script catching the denial cannot ask fifty times).
    denied: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl NestedCalls {
    pub fn new(approvals: Option<ApprovalGate>, events: UnboundedSender<AgentEvent>) -> Self {
        Self { approvals, events, denied: std::sync::Arc::default() }
    }

    /// Runs `tool` with `args` as call `call_id`, made by the tool whose context is `parent`: asks for approval
    /// when `[tools.approval]` says so (through `parent.approver`), then runs it, reporting `ToolStarted` and
    /// `ToolFinished` with `parent_call_id` set to `parent.call_id`. A denial is the gate's error
    /// ([`crate::APPROVAL_DENIED_CODE`]).
    pub async fn call(&self, tool: &dyn DynTool, args: Value, call_id: String, parent: &ToolContext) -> ToolResult {
        let name = tool.name().to_string();
        let context = ToolContext {
            call_id: call_id.clone(),
            parent_call_id: Some(parent.call_id.clone()),
            // A nested call cannot make calls of its own: run_tools_script is never among a script's tools.
            nested: None,
            ..parent.clone()
        };
        if let Some(gate) = &self.approvals {
            use std::sync::atomic::Ordering;
            if self.denied.load(Ordering::SeqCst) && gate.requires(&name, &args) {
                count(&name, "denied");
                return Err(crate::tool::ToolError::respond(
                    crate::APPROVAL_DENIED_CODE,
                    format!(
                        "Not asked: the user did not approve an earlier call of this script, so {name} was not run."
                    ),
                ));
            }
            if let Err(denial) = gate.check(&name, &args, &context).await {
                self.denied.store(true, Ordering::SeqCst);
                count(&name, "denied");
                return Err(denial);
            }
        }
        let parent_call_id = Some(parent.call_id.clone());
        // A receiver gone (the run ended) only means nobody watches any more.
        let _ = self.events.send(AgentEvent::ToolStarted {
            call_id: call_id.clone(),
            name: name.clone(),
            parent_call_id: parent_call_id.clone(),
        });
        let started = Instant::now();
        let outcome = tool.call_json(args, &context).await;
        let ok = match &outcome {
            Ok(value) => value.get("ok") != Some(&Value::Bool(false)),
            Err(_) => false,
        };
        count(&name, if ok { "ok" } else { "error" });
        let _ = self.events.send(AgentEvent::ToolFinished {
            call_id,
            name,
            ok,
            duration: started.elapsed(),
            parent_call_id,
        });
        outcome
    }
}

fn count(tool: &str, outcome: &'static str) {
    metrics::counter!("minibot_tool_calls_total", "tool" => tool.to_string(), "outcome" => outcome).increment(1);
}
