//! Where updates go, from long polling and from the webhook alike: each becomes a turn, a command, a button
//! click or a refusal. A batch is recorded (update ids and the turns they carry, one write) before anything
//! acts on it, and an update recorded before is skipped: that is what makes a restart or a redelivery safe.

use super::access::{self, Access};
use super::actor::{ButtonClick, Telegram};
use super::api::BotApi;
use super::capabilities::CHANNEL;
use super::inbound::{self, MediaSettings, Prepared};
use actix::Addr;
use frankenstein::updates::{Update, UpdateContent};
use minibot_channel::messages::{AcceptUpdates, Inbound, Intake, Outbound, OutboundRole, StopTurn};
use std::sync::Arc;

pub const GREETING: &str = "Hi! I'm your assistant. Send me a message, a photo or a document and I'll answer here.\n\
Commands: /stop cancels what I'm doing, /help shows this.";

/// An update from Telegram, or the id of one this version could not read.
pub enum Incoming {
    Update(Box<Update>),
    Unreadable { update_id: i64 },
}

/// What one update asks for, once it is recorded.
enum Action {
    Turn(Inbound),
    Stop { chat_id: i64 },
    Reply { chat_id: i64, text: String },
    Click(ButtonClick),
    Nothing,
}

#[derive(Clone)]
pub struct UpdateSink {
    /// `telegram:<bot id>`: the update ids of one bot.
    pub source: String,
    pub intake: Intake,
    pub api: BotApi,
    pub access: Arc<Access>,
    pub media: Arc<MediaSettings>,
    pub actor: Addr<Telegram>,
}

impl UpdateSink {
    /// Records the batch, then acts on its new updates in order. `Err`: nothing was recorded, so the source
    /// must deliver the batch again (the poller does not advance; the webhook answers 500).
    pub async fn handle(&self, updates: Vec<Incoming>) -> Result<(), String> {
        let mut records = Vec::with_capacity(updates.len());
        let mut actions = Vec::with_capacity(updates.len());
        for incoming in updates {
            let (update_id, action) = match incoming {
                Incoming::Update(update) => (i64::from(update.update_id), self.classify(*update).await),
                Incoming::Unreadable { update_id } => (update_id, Action::Nothing),
            };
            let inbound = match &action {
                Action::Turn(inbound) => Some(inbound.clone()),
                _ => None,
            };
            records.push((update_id, inbound));
            actions.push(action);
        }
        let fresh = self
            .intake
            .accept
            .send(AcceptUpdates { source: self.source.clone(), updates: records })
            .await
            .map_err(|e| format!("the router is not running: {e}"))??;
        for (action, is_new) in actions.into_iter().zip(fresh) {
            if !is_new {
                continue;
            }
            // In update order, through the router's one mailbox: a `/stop` after a message stops that message's
            // turn, and one before it cannot stop the turn that follows.
            match action {
                Action::Turn(inbound) => self.intake.inbound.do_send(Inbound { recorded: true, ..inbound }),
                Action::Nothing => {}
                Action::Stop { chat_id } => self.intake.stop.do_send(StopTurn { channel: CHANNEL.into(), chat_id }),
                Action::Reply { chat_id, text } => {
                    self.actor.do_send(Outbound::text(CHANNEL, chat_id, text, OutboundRole::Answer));
                }
                Action::Click(click) => self.actor.do_send(click),
            }
        }
        Ok(())
    }

    async fn classify(&self, update: Update) -> Action {
        match update.content {
            UpdateContent::Message(message) => {
                let chat_id = message.chat.id;
                let user_id = message.from.as_ref().map(|u| u.id as i64);
                if !self.access.allows(chat_id, user_id) {
                    tracing::warn!(chat_id, user_id, "message from a chat or user that is not allowed; refused");
                    return Action::Reply { chat_id, text: access::rejection(chat_id, user_id) };
                }
                let command = message.text.as_deref().map(str::trim).and_then(command_name);
                match command.as_deref() {
                    Some("stop") => return Action::Stop { chat_id },
                    Some("start" | "help") => return Action::Reply { chat_id, text: GREETING.into() },
                    _ => {}
                }
                match inbound::prepare(&self.api, &self.media, &message).await {
                    Prepared::Text(text) => {
                        let mut inbound = Inbound::new(CHANNEL, chat_id, user_id, text);
                        inbound.message_id = Some(i64::from(message.message_id));
                        Action::Turn(inbound)
                    }
                    Prepared::Refused(text) => Action::Reply { chat_id, text },
                    Prepared::Nothing => Action::Nothing,
                }
            }
            UpdateContent::CallbackQuery(query) => {
                let user_id = query.from.id as i64;
                let message = query.message.as_ref().map(|m| match m {
                    frankenstein::types::MaybeInaccessibleMessage::Message(m) => (m.chat.id, m.message_id),
                    frankenstein::types::MaybeInaccessibleMessage::InaccessibleMessage(m) => (m.chat.id, m.message_id),
                });
                let click = ButtonClick {
                    query_id: query.id,
                    user_id,
                    chat_id: message.map(|(chat, _)| chat),
                    message_id: message.map(|(_, id)| id),
                    data: query.data.unwrap_or_default(),
                    authorized: message.is_some_and(|(chat, _)| self.access.allows(chat, Some(user_id))),
                };
                Action::Click(click)
            }
            _ => Action::Nothing,
        }
    }
}

/// `/stop`, `/stop@my_bot` → `stop`; anything else that is not a command → `None`.
fn command_name(text: &str) -> Option<String> {
    let word = text.strip_prefix('/')?.split_whitespace().next()?;
    let name = word.split('@').next().unwrap_or(word);
    Some(name.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use crate::updates::command_name;

    #[test]
    fn commands_are_recognised_with_or_without_the_bot_name() {
        assert_eq!(command_name("/stop").as_deref(), Some("stop"));
        assert_eq!(command_name("/Stop@minibot_bot now").as_deref(), Some("stop"));
        assert_eq!(command_name("stop"), None);
        assert_eq!(command_name("/"), None);
    }
}
