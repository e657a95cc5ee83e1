//! Sending to one chat: answers rendered for Telegram and split under its limit, files as documents or photos,
//! and the edits of a task's progress message and of a live draft (which the answer's first message replaces).
//! A part Telegram cannot parse is rewritten by the model (format repair) and, failing that, sent as plain text;
//! a part that still fails is logged and the rest go on.

use super::api::{ApiError, BotApi};
use super::markdown;
use actix::Recipient;
use frankenstein::AsyncTelegramApi;
use frankenstein::ParseMode;
use frankenstein::methods::{EditMessageTextParams, SendDocumentParams, SendMessageParams, SendPhotoParams};
use frankenstein::types::{ReplyMarkup, ReplyParameters};
use minibot_agent::ReplyKind;
use minibot_channel::messages::{Outbound, OutboundFile, RepairFormat};
use minibot_channel::render;

/// Telegram's limit on a caption.
const MAX_CAPTION_CHARS: usize = 1024;
/// The Bot API uploads photos up to 10 MB; larger images go as documents.
const MAX_PHOTO_UPLOAD_BYTES: u64 = 10_000_000;
/// The Bot API takes uploads up to 50 MB.
const MAX_DOCUMENT_UPLOAD_BYTES: u64 = 50_000_000;
const PHOTO_EXTENSIONS: &[&str] = &["jpg", "jpeg", "png", "webp"];
/// Most messages one answer becomes in a chat: past this, the first ones go out and the last says the rest was
/// cut (a task's says `get_task` reads all of it). About 30 000 characters; a 1 MiB answer once became 289
/// messages.
pub const MAX_PARTS_PER_ANSWER: usize = 8;

/// How a part is marked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Markup {
    MarkdownV2,
    Html,
    Plain,
}

#[derive(Clone)]
pub struct Sender {
    pub api: BotApi,
    /// The model rewrites a part Telegram could not parse, at most this many times (`format_repair_*`).
    pub repair: Option<(Recipient<RepairFormat>, u32)>,
}

/// Where a part goes: a new message (replying to one), or over a message the bot sent (a live draft; as a new
/// message replying to `reply_to` when the draft cannot be edited any more).
#[derive(Debug, Clone, Copy)]
enum Target {
    New(Option<i32>),
    Edit { message_id: i32, reply_to: Option<i32> },
}

/// One part to send: the text as marked up, and the source it came from (for the plain fallback and repair).
struct Part {
    text: String,
    source: String,
    markup: Markup,
}

impl Sender {
    /// Sends an answer; returns the id of the first message sent (what a later reply threads to).
    pub async fn send(&self, message: &Outbound, reply_to: Option<i32>) -> Option<i32> {
        self.send_into(message, reply_to, None).await
    }

    /// Sends an answer whose first message replaces the text of `draft` (a live draft the bot sent, which
    /// already replies where the answer should), with the same formatting and fallbacks as a new message.
    pub async fn send_into(&self, message: &Outbound, reply_to: Option<i32>, draft: Option<i32>) -> Option<i32> {
        let mut first = None;
        let mut draft = draft;
        for (i, part) in parts(message).into_iter().enumerate() {
            let reply_to = if i == 0 { reply_to } else { None };
            let target = match draft.take() {
                Some(message_id) => Target::Edit { message_id, reply_to },
                None => Target::New(reply_to),
            };
            match self.send_part(message, part, target).await {
                Ok(id) => {
                    first.get_or_insert(id);
                }
                Err(error) => {
                    tracing::error!(chat_id = message.chat_id, error = %error, "Telegram did not take a message part; skipped")
                }
            }
        }
        first
    }

    async fn send_part(&self, message: &Outbound, part: Part, target: Target) -> Result<i32, ApiError> {
        let chat_id = message.chat_id;
        let error = match self.put(chat_id, &part.text, part.markup, target).await {
            Ok(id) => return Ok(id),
            Err(error) if error.is_parse_error() && part.markup != Markup::Plain => error,
            Err(error) => return Err(error),
        };
        tracing::warn!(chat_id, error = %error, "Telegram could not parse a message; repairing its format");
        if let Some((repair, attempts)) = &self.repair {
            let mut parse_error = error.to_string();
            for attempt in 1..=*attempts {
                let request = RepairFormat {
                    channel: message.channel.clone(),
                    chat_id,
                    text: part.source.clone(),
                    parse_error: parse_error.clone(),
                    instructions: markdown::REPAIR_INSTRUCTIONS.into(),
                };
                let repaired = match repair.send(request).await {
                    Ok(Ok(text)) => text,
                    Ok(Err(why)) => {
                        tracing::warn!(chat_id, attempt, why = %why, "format repair failed");
                        break;
                    }
                    Err(error) => {
                        tracing::warn!(chat_id, attempt, error = %error, "format repair is not running");
                        break;
                    }
                };
                match self.put(chat_id, &repaired, Markup::MarkdownV2, target).await {
                    Ok(id) => return Ok(id),
                    Err(error) if error.is_parse_error() => parse_error = error.to_string(),
                    // Too long, or anything else about the rewrite: the plain original still goes out.
                    Err(error) => {
                        tracing::warn!(chat_id, error = %error, "the repaired message was refused; sending plain text");
                        break;
                    }
                }
            }
        }
        let plain = match part.markup {
            Markup::Html => render::html_to_text(&part.source),
            _ => part.source,
        };
        let mut first = None;
        for (i, chunk) in markdown::split_plain(&plain, markdown::MAX_MESSAGE_CHARS).iter().enumerate() {
            let target = if i == 0 { target } else { Target::New(None) };
            let id = self.put(chat_id, chunk, Markup::Plain, target).await?;
            first.get_or_insert(id);
        }
        first.ok_or(error)
    }

    /// One `sendMessage`; returns the new message's id.
    pub async fn send_text(
        &self,
        chat_id: i64,
        text: &str,
        markup: Markup,
        reply_to: Option<i32>,
        keyboard: Option<ReplyMarkup>,
    ) -> Result<i32, ApiError> {
        let params = SendMessageParams::builder()
            .chat_id(chat_id)
            .text(text)
            .maybe_parse_mode(parse_mode(markup))
            .maybe_reply_parameters(reply_to.map(reply_parameters))
            .maybe_reply_markup(keyboard)
            .build();
        Ok(self.api.send_message(&params).await?.result.message_id)
    }

    /// A part as a new message or over the draft; returns the message's id.
    async fn put(&self, chat_id: i64, text: &str, markup: Markup, target: Target) -> Result<i32, ApiError> {
        match target {
            Target::New(reply_to) => self.send_text(chat_id, text, markup, reply_to, None).await,
            Target::Edit { message_id, reply_to } => match self.edit(chat_id, message_id, text, markup).await {
                Ok(()) => Ok(message_id),
                Err(error) if error.is_parse_error() => Err(error),
                // The user deleted the draft, or it is too old to edit: the part still reaches the chat.
                Err(error) => {
                    tracing::debug!(chat_id, error = %error, "draft not replaced; sending the answer as a new message");
                    self.send_text(chat_id, text, markup, reply_to, None).await
                }
            },
        }
    }

    /// Replaces the text of a message the bot sent (a task's progress, a live draft).
    pub async fn edit_text(&self, chat_id: i64, message_id: i32, text: &str) -> Result<(), ApiError> {
        let text: String = text.chars().take(markdown::MAX_MESSAGE_CHARS).collect();
        self.edit(chat_id, message_id, &text, Markup::Plain).await
    }

    async fn edit(&self, chat_id: i64, message_id: i32, text: &str, markup: Markup) -> Result<(), ApiError> {
        let params = EditMessageTextParams::builder()
            .chat_id(chat_id)
            .message_id(message_id)
            .text(text)
            .maybe_parse_mode(parse_mode(markup))
            .build();
        match self.api.edit_message_text(&params).await {
            Ok(_) => Ok(()),
            Err(error) if error.is_not_modified() => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// A file: images as photos, anything else as a document.
    pub async fn send_file(&self, file: &OutboundFile, reply_to: Option<i32>) -> Result<i32, ApiError> {
        let caption = file
            .caption
            .as_deref()
            .filter(|c| !c.trim().is_empty())
            .map(|c| c.chars().take(MAX_CAPTION_CHARS).collect::<String>());
        let size = minibot_sandbox::open_without_links(&file.path)
            .and_then(|opened| opened.metadata())
            .map_err(|e| ApiError::File { path: file.path.display().to_string(), detail: e.to_string() })?
            .len();
        let is_photo = file
            .path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| PHOTO_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()));
        if size > MAX_DOCUMENT_UPLOAD_BYTES {
            return Err(ApiError::TooLarge { limit: MAX_DOCUMENT_UPLOAD_BYTES });
        }
        let reply = reply_to.map(reply_parameters);
        if is_photo && size <= MAX_PHOTO_UPLOAD_BYTES {
            let params = SendPhotoParams::builder()
                .chat_id(file.chat_id)
                .photo(file.path.clone())
                .maybe_caption(caption.clone())
                .maybe_reply_parameters(reply.clone())
                .build();
            match self.api.send_photo(&params).await {
                Ok(message) => return Ok(message.result.message_id),
                // Telegram refuses some images as photos (a very tall screenshot); as a document it takes them.
                Err(ApiError::Api { code: 400, description, .. }) => {
                    tracing::info!(path = %file.path.display(), why = %description, "not taken as a photo; sending it as a document");
                }
                Err(error) => return Err(error),
            }
        }
        let params = SendDocumentParams::builder()
            .chat_id(file.chat_id)
            .document(file.path.clone())
            .maybe_caption(caption)
            .maybe_reply_parameters(reply)
            .build();
        Ok(self.api.send_document(&params).await?.result.message_id)
    }
}

pub fn reply_parameters(message_id: i32) -> ReplyParameters {
    ReplyParameters::builder().message_id(message_id).allow_sending_without_reply(true).build()
}

fn parse_mode(markup: Markup) -> Option<ParseMode> {
    match markup {
        Markup::MarkdownV2 => Some(ParseMode::MarkdownV2),
        Markup::Html => Some(ParseMode::Html),
        Markup::Plain => None,
    }
}

/// The parts of an answer: markdown rendered and split by [`markdown`], HTML and errors split as they are; at
/// most [`MAX_PARTS_PER_ANSWER`].
fn parts(message: &Outbound) -> Vec<Part> {
    let limit = markdown::MAX_MESSAGE_CHARS;
    if message.text.trim().is_empty() {
        return Vec::new();
    }
    let parts = match (message.kind, message.is_error) {
        (ReplyKind::Markdown, false) => markdown::split_markdown(&message.text)
            .into_iter()
            .map(|(source, text)| Part { text, source, markup: Markup::MarkdownV2 })
            .collect(),
        (ReplyKind::Html, false) => markdown::split_plain(&message.text, limit - 96)
            .into_iter()
            .map(|text| Part { source: text.clone(), text, markup: Markup::Html })
            .collect(),
        _ => markdown::split_plain(&message.text, limit)
            .into_iter()
            .map(|text| Part { source: text.clone(), text, markup: Markup::Plain })
            .collect(),
    };
    at_most(parts, message)
}

/// The first [`MAX_PARTS_PER_ANSWER`] - 1 parts and a last one that says the rest was cut, when there are more.
fn at_most(mut parts: Vec<Part>, message: &Outbound) -> Vec<Part> {
    if parts.len() <= MAX_PARTS_PER_ANSWER {
        return parts;
    }
    let left_out = parts.len() - (MAX_PARTS_PER_ANSWER - 1);
    tracing::warn!(chat_id = message.chat_id, parts = parts.len(), left_out, "answer too long for the chat; cut");
    parts.truncate(MAX_PARTS_PER_ANSWER - 1);
    let mut notice = format!("✂ Cut here: the rest of this answer would have taken {left_out} more messages.");
    match &message.task_id {
        Some(task_id) => notice
            .push_str(&format!(" The whole result is stored with the task: ask for get_task {task_id} to read it.")),
        None => notice.push_str(" Ask for the part you need."),
    }
    parts.push(Part { source: notice.clone(), text: notice, markup: Markup::Plain });
    parts
}

#[cfg(test)]
mod tests {
    // By its full path: the module layout test reads `super::` as the telegram module.
    use crate::outbound::*;
    use minibot_channel::messages::OutboundRole;

    fn answer(text: String, kind: ReplyKind) -> Outbound {
        Outbound { kind, ..Outbound::text("telegram", 1, text, OutboundRole::Answer) }
    }

    #[test]
    fn a_huge_answer_becomes_at_most_eight_messages_and_the_last_says_it_was_cut() {
        let line = "a line of a very long worker result, repeated until it weighs a mebibyte\n";
        let mut message = answer(line.repeat(1024 * 1024 / line.len()), ReplyKind::Text);
        message.task_id = Some("5f0c2a9e-0000-4000-8000-000000000001".into());
        let sent = parts(&message);
        assert_eq!(sent.len(), MAX_PARTS_PER_ANSWER);
        assert!(sent[..7].iter().all(|p| p.text.starts_with("a line") && p.text.chars().count() <= 4096));
        let last = &sent[7].text;
        assert!(last.starts_with("✂ Cut here: the rest of this answer would have taken "), "{last}");
        assert!(last.ends_with("ask for get_task 5f0c2a9e-0000-4000-8000-000000000001 to read it."), "{last}");
        assert_eq!(sent[7].markup, Markup::Plain);

        // Markdown is cut the same way, and an answer that is not a task's says so differently.
        let paragraph = "Some **bold** words and `code`, then more words to fill the line.\n\n";
        let sent = parts(&answer(paragraph.repeat(3000), ReplyKind::Markdown));
        assert_eq!(sent.len(), MAX_PARTS_PER_ANSWER);
        assert!(sent[..7].iter().all(|p| p.markup == Markup::MarkdownV2));
        assert!(sent[7].text.ends_with("Ask for the part you need."), "{}", sent[7].text);
    }

    #[test]
    fn an_answer_of_eight_messages_is_sent_whole() {
        let block = format!("{}\n", "x".repeat(4000));
        let sent = parts(&answer(block.repeat(MAX_PARTS_PER_ANSWER), ReplyKind::Text));
        assert_eq!(sent.len(), MAX_PARTS_PER_ANSWER);
        let kept: usize = sent.iter().map(|p| p.text.matches('x').count()).sum();
        assert_eq!(kept, 4000 * MAX_PARTS_PER_ANSWER, "nothing cut");
    }
}
