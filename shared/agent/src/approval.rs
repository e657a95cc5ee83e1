//! Tool approvals: the types the approval gate and the channels share. The gate (in the agent loop) decides
//! which calls need the user's yes; an [`ApprovalPrompt`] (a channel, a worker's event path, or a fixed
//! answer) asks and returns the decision. Channels plug in through the trait, so the loop knows no channel.

use crate::approval_detail::{approval_detail, display_tool_name};
use futures_util::future::BoxFuture;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// One question to the user: may this tool call run?
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRequest {
    /// Unique per question (uuid hex); answers name it.
    pub approval_id: String,
    /// The tool as the user should read it: its name, escaped and capped; for a lazy MCP `call_tool`,
    /// `<remote name> (via <call_tool name>)` ([`ApprovalRequest::tool_names`] splits it again).
    pub tool: String,
    /// The arguments, redacted, pruned, escaped and capped (see the reference, 5.4).
    pub detail: String,
    /// Why it is asked when a pattern is not the reason (the safety classifier's verdict).
    pub reason: Option<String>,
}

/// The user's answer, or why there is none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalDecision {
    Approved,
    /// The user said no (or stopped the turn).
    Denied,
    /// Nobody could be asked or nobody answered: the channel cannot ask, the wait timed out, the path broke.
    /// The text says why, for the model and the log.
    Unavailable(String),
}

/// How a lazy MCP call is named in [`ApprovalRequest::tool`]: `<remote name> (via <call_tool name>)`.
const VIA: &str = " (via ";

impl ApprovalRequest {
    /// A question about one call: a new id, the tool's name (for a lazy MCP call, `remote (via call_tool)`),
    /// escaped and capped, and the arguments as [`approval_detail`] shows them.
    pub fn for_call(tool: &str, lazy_remote: Option<&str>, args: &Value, reason: Option<String>) -> Self {
        let tool = match lazy_remote {
            Some(remote) => format!("{}{VIA}{})", display_tool_name(remote), display_tool_name(tool)),
            None => display_tool_name(tool),
        };
        Self { approval_id: uuid::Uuid::new_v4().simple().to_string(), tool, detail: approval_detail(args), reason }
    }

    /// The names the call is known by, to match approval patterns (`--approve`) against: the tool's name, and
    /// for a lazy MCP call also the remote tool's.
    pub fn tool_names(&self) -> Vec<&str> {
        if let Some((remote, canonical)) = self.tool.strip_suffix(')').and_then(|rest| rest.rsplit_once(VIA)) {
            return vec![canonical, remote];
        }
        vec![self.tool.as_str()]
    }
}

impl ApprovalDecision {
    pub fn is_approved(&self) -> bool {
        matches!(self, Self::Approved)
    }
}

/// Asks the user. Implemented by channels (console, later Telegram and web), by the worker (over the task's
/// event path) and by fixed answers (`--once`).
pub trait ApprovalPrompt: Send + Sync {
    fn ask(&self, request: ApprovalRequest) -> BoxFuture<'_, ApprovalDecision>;
}

/// The `error_code` of a call the user did not approve. The agent loop skips the rest of that model response's
/// calls when it sees it, whoever denied (the gate, a file tool guarding a protected path, the safety classifier).
pub const APPROVAL_DENIED_CODE: &str = "tool_approval:denied";

/// What a running turn asks through: the channel's (or worker's) prompt and the approval timeout. A turn without
/// one cannot ask, and every call that needs approval is denied.
#[derive(Clone)]
pub struct Approver {
    prompt: Arc<dyn ApprovalPrompt>,
    timeout: Duration,
}

impl Approver {
    pub fn new(prompt: Arc<dyn ApprovalPrompt>, timeout: Duration) -> Self {
        Self { prompt, timeout }
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Asks and waits at most the approval timeout; no answer in time is a denial.
    pub async fn ask(&self, request: ApprovalRequest) -> ApprovalDecision {
        match tokio::time::timeout(self.timeout, self.prompt.ask(request)).await {
            Ok(decision) => decision,
            Err(_) => ApprovalDecision::Unavailable(format!(
                "nobody answered the approval request within {} s",
                self.timeout.as_secs()
            )),
        }
    }
}

impl std::fmt::Debug for Approver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Approver").field("timeout", &self.timeout).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_lazy_call_is_asked_under_both_names() {
        let request = ApprovalRequest::for_call("mcp_gh__call_tool", Some("mcp_gh__delete_repo"), &json!({}), None);
        assert_eq!(request.tool, "mcp_gh__delete_repo (via mcp_gh__call_tool)");
        assert_eq!(request.tool_names(), ["mcp_gh__call_tool", "mcp_gh__delete_repo"]);
        assert_eq!(request.approval_id.len(), 32);
        let plain = ApprovalRequest::for_call("bash\n", None, &json!({"command": "ls"}), None);
        assert_eq!(plain.tool_names(), ["bash\\n"]);
        assert_eq!(plain.detail, "- command: ls");
    }
}
