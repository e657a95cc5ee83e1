//! Approval questions with inline ✅/❌ buttons (reference 5.1). A question lives until the requester clicks,
//! or until whoever asked stops waiting (the approval timeout passed, the turn stopped): then the buttons go and
//! the chat reads "⌛ No answer: denied". A click on a question that is gone answers "Expired".

use frankenstein::types::{InlineKeyboardButton, InlineKeyboardMarkup, ReplyMarkup};
use minibot_channel::messages::{ApprovalDecision, ApprovalRequest};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

pub const APPROVED_REPLY: &str = "✅ Approved";
pub const DENIED_REPLY: &str = "❌ Denied";
pub const TIMED_OUT_REPLY: &str = "⌛ No answer: denied";
pub const EXPIRED_NOTICE: &str = "Expired";
pub const NOT_REQUESTER_NOTICE: &str = "Only the requester can answer this.";

/// An open question.
pub struct Question {
    pub chat_id: i64,
    pub requester: Option<i64>,
    /// The message with the buttons, once sent.
    pub message_id: Option<i32>,
    pub answer: oneshot::Sender<ApprovalDecision>,
}

/// Open questions by approval id, shared by the actor (clicks) and the waiting side (withdrawal).
#[derive(Clone, Default)]
pub struct Questions(Arc<Mutex<HashMap<String, Question>>>);

impl Questions {
    pub fn insert(&self, approval_id: String, question: Question) {
        if let Ok(mut open) = self.0.lock() {
            open.insert(approval_id, question);
        }
    }

    pub fn set_message(&self, approval_id: &str, message_id: i32) {
        if let Ok(mut open) = self.0.lock()
            && let Some(question) = open.get_mut(approval_id)
        {
            question.message_id = Some(message_id);
        }
    }

    pub fn take(&self, approval_id: &str) -> Option<Question> {
        self.0.lock().ok()?.remove(approval_id)
    }

    /// Who may answer: `None` when the question is gone, `Some(None)` when anyone in the chat may.
    pub fn requester(&self, approval_id: &str) -> Option<Option<i64>> {
        Some(self.0.lock().ok()?.get(approval_id)?.requester)
    }
}

/// A click on an approval button: `approval:<id>:y` or `approval:<id>:n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub approval_id: String,
    pub approved: bool,
}

pub fn parse_choice(data: &str) -> Option<Choice> {
    let rest = data.strip_prefix("approval:")?;
    let (approval_id, answer) = rest.rsplit_once(':')?;
    let approved = match answer {
        "y" => true,
        "n" => false,
        _ => return None,
    };
    (!approval_id.is_empty()).then(|| Choice { approval_id: approval_id.to_string(), approved })
}

/// The question as HTML: the tool in bold, then what it would do.
pub fn question_html(request: &ApprovalRequest) -> String {
    let mut text =
        format!("🔐 Approval required\n<b>{}</b>\n\n{}", escape_html(&request.tool), escape_html(&request.detail));
    if let Some(reason) = request.reason.as_deref().filter(|r| !r.trim().is_empty()) {
        text.push_str(&format!("\n\n<i>{}</i>", escape_html(reason)));
    }
    text
}

pub fn buttons(approval_id: &str) -> ReplyMarkup {
    let button = |text: &str, answer: &str| {
        InlineKeyboardButton::builder().text(text).callback_data(format!("approval:{approval_id}:{answer}")).build()
    };
    ReplyMarkup::InlineKeyboardMarkup(
        InlineKeyboardMarkup::builder()
            .inline_keyboard(vec![vec![button("✅ Approve", "y"), button("❌ Deny", "n")]])
            .build(),
    )
}

pub fn escape_html(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use crate::approvals::*;

    #[test]
    fn button_data_is_read_back_and_anything_else_is_not_an_answer() {
        let choice = parse_choice("approval:ab12:y");
        assert_eq!(choice, Some(Choice { approval_id: "ab12".into(), approved: true }));
        assert_eq!(parse_choice("approval:ab12:n").map(|c| c.approved), Some(false));
        assert_eq!(parse_choice("approval::y"), None);
        assert_eq!(parse_choice("approval:ab12:maybe"), None);
        assert_eq!(parse_choice("other:ab12:y"), None);
    }

    #[test]
    fn the_question_escapes_what_the_model_wrote() {
        let request = ApprovalRequest {
            approval_id: "1".into(),
            tool: "bash".into(),
            detail: "- command: echo <b>&</b>".into(),
            reason: None,
        };
        assert_eq!(
            question_html(&request),
            "🔐 Approval required\n<b>bash</b>\n\n- command: echo &lt;b&gt;&amp;&lt;/b&gt;"
        );
    }
}
