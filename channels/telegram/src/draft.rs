//! A turn's live draft in a Telegram chat. While the model writes, the text so far goes out as a plain message
//! that is edited at most every [`DRAFT_EVERY`]; the answer then replaces it, formatted
//! ([`super::outbound::Sender::send_into`]). An answer that comes within [`DRAFT_EVERY`] of its first piece gets
//! no draft at all, so a short answer does not flash one. While an update is on its way (or flood control holds
//! the chat back), the next ones wait and only the latest text goes: the edits stay bounded whatever the model's
//! pace. The text of a step that ends in tool calls stays as it was last shown, completed.
//!
//! Editing: <https://core.telegram.org/bots/api#editmessagetext>; flood control: `retry_after` in
//! <https://core.telegram.org/bots/api#responseparameters>.

use super::markdown::MAX_MESSAGE_CHARS;
use super::outbound::{Markup, Sender};
use actix::SpawnHandle;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A draft is first shown this long after its first piece, then edited at most this often.
pub const DRAFT_EVERY: Duration = Duration::from_secs(1);

/// The draft message as the chat's send queue knows it; shared with the actor, which decides when to update it.
#[derive(Debug, Clone, Default)]
pub struct DraftMessage(Arc<Mutex<Slot>>);

#[derive(Debug, Default)]
struct Slot {
    /// Set once the draft is in the chat.
    message_id: Option<i32>,
    /// The text last queued (and, once its update ran, shown).
    queued: String,
    /// An update is queued or being sent.
    busy: bool,
    /// Flood control asked for no calls before this.
    quiet_until: Option<Instant>,
}

impl DraftMessage {
    fn slot(&self) -> MutexGuard<'_, Slot> {
        match self.0.lock() {
            Ok(slot) => slot,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// The draft's message in the chat, once it was sent.
    pub fn message_id(&self) -> Option<i32> {
        self.slot().message_id
    }

    /// A draft was sent or is on its way.
    pub fn started(&self) -> bool {
        let slot = self.slot();
        slot.message_id.is_some() || slot.busy
    }

    /// Takes the slot for `text` when it should go now: not while an update is on its way (unless `last`: the
    /// text is complete and goes after it), not during flood control (unless `last`), not when it is shown.
    fn claim(&self, text: &str, last: bool) -> bool {
        let mut slot = self.slot();
        let quiet = slot.quiet_until.is_some_and(|until| Instant::now() < until);
        if text.trim().is_empty() || slot.queued == text || (!last && (slot.busy || quiet)) {
            return false;
        }
        slot.queued = text.to_string();
        slot.busy = true;
        true
    }
}

/// One update of a draft, for the chat's send queue.
pub struct DraftUpdate {
    pub chat_id: i64,
    reply_to: Option<i32>,
    text: String,
    message: DraftMessage,
    /// The text is complete: it goes even after flood control's wait.
    last: bool,
}

/// What the actor keeps of a chat's streaming turn.
pub struct LiveDraft {
    /// The text of the current step so far.
    pub text: String,
    pub message: DraftMessage,
    reply_to: Option<i32>,
    /// The timer that offers the text every [`DRAFT_EVERY`].
    pub ticker: SpawnHandle,
}

impl LiveDraft {
    pub fn new(reply_to: Option<i64>, ticker: SpawnHandle) -> Self {
        let reply_to = reply_to.and_then(|id| i32::try_from(id).ok());
        Self { text: String::new(), message: DraftMessage::default(), reply_to, ticker }
    }

    /// The update due at a tick of the timer, if any.
    pub fn due(&self, chat_id: i64) -> Option<DraftUpdate> {
        self.update(chat_id, &self.text, false)
    }

    /// The update that completes a draft already shown (or on its way) with the whole text and `suffix`. With
    /// `even_unshown`, a draft not shown yet is sent as well (a stopped turn shows what it had).
    pub fn complete(&self, chat_id: i64, suffix: &str, even_unshown: bool) -> Option<DraftUpdate> {
        if !even_unshown && !self.message.started() {
            return None;
        }
        self.update(chat_id, &format!("{}{suffix}", self.text.trim_end()), true)
    }

    fn update(&self, chat_id: i64, text: &str, last: bool) -> Option<DraftUpdate> {
        let text = fitted(text);
        self.message.claim(&text, last).then(|| DraftUpdate {
            chat_id,
            reply_to: self.reply_to,
            text,
            message: self.message.clone(),
            last,
        })
    }
}

/// The draft's text within Telegram's limit: a longer one shows its start (the answer brings the rest).
fn fitted(text: &str) -> String {
    if text.chars().count() <= MAX_MESSAGE_CHARS {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(MAX_MESSAGE_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// Sends the draft (plain text, replying to the user's message) or edits it. Run by the chat's send queue, so
/// the answer that replaces the draft comes after it.
pub async fn show(sender: &Sender, update: DraftUpdate) {
    let DraftUpdate { chat_id, reply_to, text, message, last } = update;
    let quiet_until = message.slot().quiet_until;
    if let Some(until) = quiet_until.filter(|until| Instant::now() < *until) {
        if !last {
            message.slot().busy = false;
            return;
        }
        tokio::time::sleep_until(until.into()).await;
    }
    let result = match message.message_id() {
        Some(id) => sender.edit_text(chat_id, id, &text).await.map(|()| id),
        None => sender.send_text(chat_id, &text, Markup::Plain, reply_to, None).await,
    };
    let mut slot = message.slot();
    slot.busy = false;
    match result {
        Ok(id) => slot.message_id = Some(id),
        Err(error) => {
            tracing::debug!(chat_id, error = %error, "draft not updated on Telegram");
            // Offered again at the next tick.
            slot.queued.clear();
            if let Some(wait) = error.asked_wait() {
                slot.quiet_until = Some(Instant::now() + wait);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::draft::{DraftMessage, fitted};

    #[test]
    fn an_update_waits_for_the_one_on_its_way_unless_it_completes_the_draft() {
        let draft = DraftMessage::default();
        assert!(!draft.claim("   ", false), "an empty draft is not sent");
        assert!(draft.claim("Hello", false));
        assert!(draft.started());
        assert!(!draft.claim("Hello wor", false), "sent while the first was on its way");
        assert!(draft.claim("Hello world", true), "the complete text goes after it");
        assert!(!draft.claim("Hello world", true), "the same text twice");
        draft.slot().busy = false;
        draft.slot().quiet_until = Some(std::time::Instant::now() + std::time::Duration::from_secs(5));
        assert!(!draft.claim("Hello world, again", false), "sent during flood control");
    }

    #[test]
    fn a_draft_longer_than_a_message_shows_its_start() {
        let long = "x".repeat(5000);
        let shown = fitted(&long);
        assert_eq!(shown.chars().count(), 4096);
        assert!(shown.ends_with('…'));
        assert_eq!(fitted("short"), "short");
    }
}
