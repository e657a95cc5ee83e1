//! The approval gate: before a tool call runs, the loop asks the user when the call's name matches
//! `[tools.approval] require_approval`. A lazy MCP `…__call_tool` call is also known by the remote tool it calls
//! (`<prefix>_<server>__<tool_name>`), and either name matching asks, so a pattern written for an MCP tool holds
//! whether the server is eager or lazy.

use crate::approval::{APPROVAL_DENIED_CODE, ApprovalDecision, ApprovalRequest};
use crate::policy::{PatternError, Patterns};
use crate::tool::{ToolContext, ToolError};
use minibot_config::schema::ApprovalSection;
use serde_json::Value;

/// The binding name ending of a lazy MCP server's call tool (`<prefix>_<server>__call_tool`).
/// The name ending of a lazy MCP server's call tool (`<prefix>_<server>__call_tool`).
pub(crate) const LAZY_CALL_SUFFIX: &str = "__call_tool";
/// Why a call is denied when the turn has no way to ask.
const CANNOT_ASK: &str = "this conversation cannot ask the user for approval";

/// A bad `require_approval` pattern, named by its config key. The pattern error is part of the message, not a
/// source, so an error chain does not print it twice.
#[derive(Debug, thiserror::Error)]
#[error("tools.approval.require_approval: {0}")]
pub struct GateConfigError(PatternError);

/// Which tool calls need the user's approval. Empty (the default) lets every call run.
#[derive(Debug, Clone, Default)]
pub struct ApprovalGate {
    patterns: Patterns,
}

impl ApprovalGate {
    pub fn new(patterns: Patterns) -> Self {
        Self { patterns }
    }

    pub fn from_config(section: &ApprovalSection) -> Result<Self, GateConfigError> {
        Ok(Self::new(Patterns::new(&section.require_approval).map_err(GateConfigError)?))
    }

    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// Whether a call of `name` with `args` must be approved first.
    pub fn requires(&self, name: &str, args: &Value) -> bool {
        matches_call(&self.patterns, name, args)
    }

    /// Lets the call run (`Ok`) or returns the denial the model reads. Asks only when a pattern matches.
    pub async fn check(&self, name: &str, args: &Value, ctx: &ToolContext) -> Result<(), ToolError> {
        if !self.requires(name, args) {
            return Ok(());
        }
        let remote = lazy_remote_name(name, args);
        let request = ApprovalRequest::for_call(name, remote.as_deref(), args, None);
        ask_approval(ctx, request).await
    }
}

/// Whether `patterns` match a call by its own name or, for a lazy MCP call, by the remote tool's name.
pub(crate) fn matches_call(patterns: &Patterns, name: &str, args: &Value) -> bool {
    patterns.matches(name) || lazy_remote_name(name, args).is_some_and(|remote| patterns.matches(&remote))
}

/// The user's decision on `request`, through the turn's approver; a turn without one cannot ask.
pub(crate) async fn decide(ctx: &ToolContext, request: ApprovalRequest) -> ApprovalDecision {
    match &ctx.approver {
        Some(approver) => approver.ask(request).await,
        None => ApprovalDecision::Unavailable(CANNOT_ASK.into()),
    }
}

/// `<prefix>_<server>__<tool_name>` for a lazy MCP call tool's call, `None` for any other call.
pub fn lazy_remote_name(name: &str, args: &Value) -> Option<String> {
    let stem = name.strip_suffix(LAZY_CALL_SUFFIX).filter(|stem| !stem.is_empty())?;
    let remote = args.get("tool_name").and_then(Value::as_str).map(str::trim).filter(|t| !t.is_empty())?;
    Some(format!("{stem}__{remote}"))
}

/// Asks through the turn's approver (none: denied at once). `Ok(())` when approved; otherwise the error with
/// [`APPROVAL_DENIED_CODE`] that tells the model not to retry. For tools that ask on their own account (a file
/// tool about to write a protected file, the safety classifier), as the gate does.
pub async fn ask_approval(ctx: &ToolContext, request: ApprovalRequest) -> Result<(), ToolError> {
    let decision = decide(ctx, request.clone()).await;
    match &decision {
        ApprovalDecision::Approved => {
            tracing::info!(tool = %request.tool, approval_id = %request.approval_id, "tool call approved");
            Ok(())
        }
        ApprovalDecision::Denied => {
            tracing::info!(tool = %request.tool, approval_id = %request.approval_id, "tool call denied by the user");
            Err(ToolError::respond(APPROVAL_DENIED_CODE, denial_message(&request.tool, &decision)))
        }
        ApprovalDecision::Unavailable(why) => {
            tracing::info!(tool = %request.tool, approval_id = %request.approval_id, reason = %why, "tool call denied: no approval");
            Err(ToolError::respond(APPROVAL_DENIED_CODE, denial_message(&request.tool, &decision)))
        }
    }
}

/// What the model reads when a call is not approved. It names the reason when nobody could answer, so the
/// model can tell the user what to change.
pub fn denial_message(tool: &str, decision: &ApprovalDecision) -> String {
    const DO_NOT_RETRY: &str = "Do not retry it unless the user asks again.";
    match decision {
        ApprovalDecision::Unavailable(why) => {
            format!("The user did not approve {tool}: {}. {DO_NOT_RETRY}", why.trim().trim_end_matches('.'))
        }
        ApprovalDecision::Approved | ApprovalDecision::Denied => {
            format!("The user did not approve {tool}. {DO_NOT_RETRY}")
        }
    }
}

/// Whether a tool result is a denial, whoever produced it (the gate, a file tool, the safety classifier, a
/// wrapped result that kept its `error_code`).
pub fn is_denial(result: &Value) -> bool {
    result.get("error_code").and_then(Value::as_str) == Some(APPROVAL_DENIED_CODE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gate(patterns: &[&str]) -> ApprovalGate {
        ApprovalGate::new(Patterns::new(patterns).expect("valid patterns"))
    }

    #[test]
    fn canonical_names_match_case_sensitively() {
        let gate = gate(&["bash", "write_*"]);
        assert!(gate.requires("bash", &json!({})));
        assert!(gate.requires("write_file", &json!({})));
        assert!(!gate.requires("Bash", &json!({})));
        assert!(!gate.requires("read_file", &json!({})));
        assert!(!ApprovalGate::default().requires("bash", &json!({})));
    }

    #[test]
    fn a_lazy_call_matches_by_either_name() {
        let args = json!({"tool_name": "delete_repo", "arguments": {}});
        assert_eq!(lazy_remote_name("mcp_gh__call_tool", &args).as_deref(), Some("mcp_gh__delete_repo"));
        assert!(gate(&["mcp_gh__delete_*"]).requires("mcp_gh__call_tool", &args));
        assert!(gate(&["mcp_gh__call_tool"]).requires("mcp_gh__call_tool", &args));
        assert!(!gate(&["mcp_gh__delete_*"]).requires("mcp_gh__call_tool", &json!({"tool_name": "list_repos"})));
        assert_eq!(lazy_remote_name("mcp_gh__list_tools", &args), None);
        assert_eq!(lazy_remote_name("__call_tool", &args), None);
        assert_eq!(lazy_remote_name("mcp_gh__call_tool", &json!({"tool_name": " "})), None);
    }

    #[test]
    fn a_bad_pattern_names_the_key() {
        let section = ApprovalSection { require_approval: vec!["[bash".into()], ..ApprovalSection::default() };
        let error = ApprovalGate::from_config(&section).expect_err("an unclosed class is invalid");
        assert!(error.to_string().starts_with("tools.approval.require_approval: invalid tool pattern `[bash`"));
    }

    #[test]
    fn denial_messages() {
        assert_eq!(
            denial_message("bash", &ApprovalDecision::Denied),
            "The user did not approve bash. Do not retry it unless the user asks again."
        );
        assert_eq!(
            denial_message("bash", &ApprovalDecision::Unavailable("nobody answered within 90 s.".into())),
            "The user did not approve bash: nobody answered within 90 s. Do not retry it unless the user asks again."
        );
    }
}
