//! What a running turn has streamed to its chat: the text of its current step, as the channel shows it. A turn
//! stopped mid-stream keeps that text on screen with [`CUT_MARK`], and its history stores the same
//! ([`ShownText::stopped_note`]), so the model later reads what the user read.

use crate::messages::STOPPED_HISTORY_NOTE;
use minibot_agent::AgentEvent;
use std::sync::{Arc, Mutex};

/// Ends the text of an answer that `/stop` cut short, on screen and in the history.
pub const CUT_MARK: &str = " … [stopped]";

/// The streamed text of the running turn's current step. The turn writes it as the model's text arrives; the
/// conversation reads it when the user stops the turn.
#[derive(Debug, Clone, Default)]
pub struct ShownText(Arc<Mutex<String>>);

impl ShownText {
    /// Follows the turn's events: text adds to the step's text; a new step or a tool call starts over, since
    /// the text before a tool call is complete (not cut) and is not the answer.
    pub fn follow(&self, event: &AgentEvent) {
        let Ok(mut text) = self.0.lock() else { return };
        match event {
            AgentEvent::AnswerText { text: piece, .. } => text.push_str(piece),
            AgentEvent::StepStarted { .. } | AgentEvent::ToolStarted { .. } => text.clear(),
            _ => {}
        }
    }

    /// The assistant's entry for a stopped turn: what was shown with [`CUT_MARK`], or the plain note when
    /// nothing was streamed.
    pub fn stopped_note(&self) -> String {
        let text = self.0.lock().map(|t| t.clone()).unwrap_or_default();
        if text.trim().is_empty() { STOPPED_HISTORY_NOTE.to_string() } else { format!("{}{CUT_MARK}", text.trim_end()) }
    }
}

#[cfg(test)]
mod tests {
    use crate::messages::STOPPED_HISTORY_NOTE;
    use crate::shown::{CUT_MARK, ShownText};
    use minibot_agent::AgentEvent;

    fn text(step: u32, text: &str) -> AgentEvent {
        AgentEvent::AnswerText { step, text: text.into() }
    }

    #[test]
    fn a_stopped_turn_keeps_the_text_of_its_last_step_with_the_mark() {
        let shown = ShownText::default();
        assert_eq!(shown.stopped_note(), STOPPED_HISTORY_NOTE);
        shown.follow(&AgentEvent::StepStarted { step: 1 });
        shown.follow(&text(1, "Let me look "));
        shown.follow(&text(1, "that up."));
        shown.follow(&AgentEvent::ToolStarted { call_id: "c".into(), name: "bash".into(), parent_call_id: None });
        assert_eq!(shown.stopped_note(), STOPPED_HISTORY_NOTE, "the text before a tool call was not cut");
        shown.follow(&AgentEvent::StepStarted { step: 2 });
        shown.follow(&text(2, "The answer is "));
        assert_eq!(shown.stopped_note(), format!("The answer is{CUT_MARK}"));
    }
}
