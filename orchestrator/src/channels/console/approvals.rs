//! Approval questions in the terminal. The console prints the question; the next line typed answers it (`y` or
//! `yes` approves, anything else denies; a line that is not a yes or no also goes on as a message), and
//! `/stop`, `/exit` or Ctrl-C deny every open question. Calls matching
//! `--approve` are approved without asking; a `--once` run cannot ask, so it denies the rest and says how to
//! allow them.
//!
//! A question is withdrawn when whoever asked stops waiting (the turn stopped, the approval timeout passed), so a
//! line typed after that is an ordinary message again.

use crate::channels::approval_wait;
use crate::messages::{ApprovalDecision, ApprovalRequest, AskApproval};
use actix::dev::{MessageResponse, OneshotSender};
use actix::prelude::*;
use minibot_agent::Patterns;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// One question waiting for its line.
struct Open {
    approval_id: String,
    tool: String,
    answer: oneshot::Sender<ApprovalDecision>,
}

/// The open questions, oldest first. Shared by the actor (which asks) and the input side (which answers).
#[derive(Clone, Default)]
pub struct Questions(Arc<Mutex<VecDeque<Open>>>);

impl Questions {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Open>> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    fn push(&self, open: Open) {
        self.lock().push_back(open);
    }

    fn withdraw(&self, approval_id: &str) -> bool {
        let mut open = self.lock();
        let before = open.len();
        open.retain(|question| question.approval_id != approval_id);
        open.len() != before
    }

    /// Answers the question printed last (the one on the screen) with `line`; returns the tool and whether it
    /// was approved, or `None` when no question is open (the line is a message).
    pub fn answer(&self, line: &str) -> Option<(String, bool)> {
        let open = self.lock().pop_back()?;
        let approved = matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes");
        let decision = if approved { ApprovalDecision::Approved } else { ApprovalDecision::Denied };
        let _ = open.answer.send(decision);
        Some((open.tool, approved))
    }

    /// Denies every open question (the user stopped the turn or is leaving); returns how many there were.
    pub fn deny_all(&self) -> usize {
        let open: Vec<Open> = self.lock().drain(..).collect();
        let count = open.len();
        for question in open {
            let _ = question.answer.send(ApprovalDecision::Denied);
        }
        count
    }
}

/// Whether a line is a reply to a question (`y`, `yes`, `n`, `no`, or just Enter). Any other line denies the
/// open question and still goes on as a message, so text typed while a question appeared is not lost.
pub fn is_reply(line: &str) -> bool {
    matches!(line.trim().to_ascii_lowercase().as_str(), "" | "y" | "yes" | "n" | "no")
}

/// How this console answers approval questions.
#[derive(Clone, Default)]
pub struct ConsoleApprovals {
    /// `--approve` patterns: matching calls are approved without asking.
    pub pre_approved: Patterns,
    /// Where questions wait for the user's line; `None` in a `--once` run, which cannot ask.
    pub questions: Option<Questions>,
}

/// A notice printed by the actor (the answer side runs outside it).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Notice(pub String);

/// The actor's reply to [`AskApproval`]: a decision now, or one that waits for the user's line and is withdrawn
/// when the asker stops waiting.
pub enum Answer {
    Now(ApprovalDecision),
    Wait { answer: oneshot::Receiver<ApprovalDecision>, questions: Questions, approval_id: String, tool: String },
}

/// For any actor that prints [`Notice`]s (the console), so this module does not depend on the actor's.
impl<A> MessageResponse<A, AskApproval> for Answer
where
    A: Actor<Context = Context<A>> + Handler<Notice>,
{
    fn handle(self, ctx: &mut Context<A>, tx: Option<OneshotSender<ApprovalDecision>>) {
        let (answer, questions, approval_id, tool) = match self {
            Answer::Now(decision) => {
                if let Some(tx) = tx {
                    let _ = tx.send(decision);
                }
                return;
            }
            Answer::Wait { answer, questions, approval_id, tool } => (answer, questions, approval_id, tool),
        };
        let console = ctx.address();
        let withdraw = async move {
            if questions.withdraw(&approval_id) {
                console.do_send(Notice(format!("(no longer waiting for approval of {tool})")));
            }
        };
        approval_wait::answer_or_withdraw(answer, tx, "console", withdraw);
    }
}

/// Why a `--once` run denies a call, with the flag that would allow it.
pub fn cannot_ask(request: &ApprovalRequest) -> String {
    let name = request.tool_names().first().copied().unwrap_or("TOOL").to_string();
    format!("the console --once run cannot ask; pass --approve {name} to allow it")
}

/// The question as printed: the tool, why it is asked (when a pattern is not the reason) and the arguments.
pub fn question_text(request: &ApprovalRequest) -> String {
    let mut text = format!("Approval needed: {}", request.tool);
    if let Some(reason) = &request.reason {
        // The reason may come from the safety classifier, which read what it checks: one line, capped, so it
        // cannot add lines of its own to the question.
        let reason: String = reason.chars().map(|c| if c.is_control() { ' ' } else { c }).take(300).collect();
        text.push_str(&format!("\n  why: {reason}"));
    }
    for line in request.detail.lines() {
        text.push_str("\n  ");
        text.push_str(line);
    }
    text.push_str(&format!("\nApprove {}? [y/N]", request.tool));
    text
}

impl ConsoleApprovals {
    /// Whether `--approve` covers the call (any of its names).
    pub fn pre_approves(&self, request: &ApprovalRequest) -> bool {
        request.tool_names().iter().any(|name| self.pre_approved.matches(name))
    }
}

/// Asks a question: registers it and returns the reply that waits for its line.
pub fn ask(questions: &Questions, request: &ApprovalRequest) -> Answer {
    let (tx, rx) = oneshot::channel();
    questions.push(Open { approval_id: request.approval_id.clone(), tool: request.tool.clone(), answer: tx });
    Answer::Wait {
        answer: rx,
        questions: questions.clone(),
        approval_id: request.approval_id.clone(),
        tool: request.tool.clone(),
    }
}

#[cfg(test)]
mod tests {
    // By its full path: the module layout test reads `super::` as the console module.
    use crate::channels::console::approvals::{
        Answer, ApprovalDecision, ApprovalRequest, Questions, ask, is_reply, question_text,
    };

    fn request(tool: &str) -> ApprovalRequest {
        ApprovalRequest::for_call(tool, None, &serde_json::json!({"command": "ls\nrm -rf /"}), None)
    }

    #[tokio::test]
    async fn lines_answer_the_question_printed_last() {
        let questions = Questions::default();
        let Answer::Wait { answer: first, .. } = ask(&questions, &request("bash")) else { panic!("waits") };
        let Answer::Wait { answer: second, .. } = ask(&questions, &request("python_execute")) else { panic!("waits") };
        assert_eq!(questions.answer(" YES "), Some(("python_execute".into(), true)));
        assert_eq!(questions.answer("sure"), Some(("bash".into(), false)));
        assert_eq!(questions.answer("y"), None, "no question left: the line is a message");
        assert_eq!(second.await.ok(), Some(ApprovalDecision::Approved));
        assert_eq!(first.await.ok(), Some(ApprovalDecision::Denied));
    }

    #[test]
    fn only_yes_no_and_enter_are_replies() {
        for reply in ["y", " YES ", "n", "No", ""] {
            assert!(is_reply(reply), "{reply:?}");
        }
        // Denies the question, then goes on as a message.
        for message in ["sure", "what does it do?", "yes please"] {
            assert!(!is_reply(message), "{message:?}");
        }
    }

    #[tokio::test]
    async fn stopping_denies_every_open_question() {
        let questions = Questions::default();
        let Answer::Wait { answer, .. } = ask(&questions, &request("bash")) else { panic!("waits") };
        assert_eq!(questions.deny_all(), 1);
        assert!(questions.is_empty());
        assert_eq!(answer.await.ok(), Some(ApprovalDecision::Denied));
    }

    #[test]
    fn the_question_shows_the_escaped_arguments() {
        let text = question_text(&request("bash"));
        assert_eq!(text, "Approval needed: bash\n  - command: ls\\nrm -rf /\nApprove bash? [y/N]");
    }
}
