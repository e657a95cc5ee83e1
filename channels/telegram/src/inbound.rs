//! A Telegram message as the model reads it: the user's text (or caption), the message it replies to, and the
//! media it carries, downloaded into the managed-file root so the file tools can open them. Images are not
//! inlined: the model sees a list of saved files and uses `self_insert_artifact` when it wants to look.
//!
//! The policy (which attachments, under which limits, under which name, how the blocks read) is every
//! channel's, in [`minibot_channel::attachments`]; this module reads Telegram's message and fetches its files.

use super::api::{ApiError, BotApi};
use frankenstein::AsyncTelegramApi;
use frankenstein::methods::GetFileParams;
use frankenstein::types::Message;
use minibot_channel::attachments::{
    self, Budget, Kind, Limits, Saved, SkipReason, Skipped, file_name, mime_or_guess, normalize_mime,
};
pub use minibot_channel::attachments::{NOT_PROCESSED, Prepared};
use minibot_tools::files::ManagedRoot;
use std::path::PathBuf;

/// Longest reply-context text shown to the model, in characters.
const MAX_REPLY_CHARS: usize = 1000;
/// Where Telegram's files go under the incoming folder, and who [`SkipReason::Unavailable`] blames.
const CHANNEL: &str = "telegram";
const SERVICE: &str = "Telegram";

/// What `[channels.telegram]` and `[tools.file_storage]` say about incoming media.
#[derive(Debug, Clone)]
pub struct MediaSettings {
    /// `[channels.telegram] media_enabled`.
    pub media_enabled: bool,
    /// The managed-file root as the file tools resolve it; `None` when `[tools.file_storage]` is off.
    pub root: Option<PathBuf>,
    pub allow_outside_root: bool,
    /// `[tools.file_storage] incoming_temp_subdir`, relative to the root.
    pub incoming_subdir: String,
    /// Photos use the image limit; documents, audio and voice share `max_document_bytes`; the MIME list
    /// applies to all but photos.
    pub limits: Limits,
}

impl MediaSettings {
    pub fn from_config(config: &minibot_config::Config) -> Self {
        let telegram = &config.channels.telegram;
        let storage = &config.tools.file_storage;
        Self {
            media_enabled: telegram.media_enabled,
            root: storage.enabled.then(|| config.resolve_path(&storage.root_dir)),
            allow_outside_root: storage.allow_outside_root,
            incoming_subdir: storage.incoming_temp_subdir.clone(),
            limits: Limits {
                max_attachments: telegram.max_attachments_per_message,
                max_image_bytes: telegram.max_photo_bytes.bytes(),
                max_document_bytes: telegram.max_document_bytes.bytes(),
                max_audio_bytes: telegram.max_document_bytes.bytes(),
                max_total_bytes: telegram.max_total_media_bytes.bytes(),
                allowed_mime_types: telegram.allowed_document_mime_types.iter().map(|m| normalize_mime(m)).collect(),
            },
        }
    }
}

/// One piece of media a message carries, before any limit is applied.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Attachment {
    kind: Kind,
    file_id: String,
    /// Already sanitised.
    name: String,
    mime: String,
    /// What Telegram says the size is, when it says.
    declared_size: Option<u64>,
}

pub async fn prepare(api: &BotApi, media: &MediaSettings, message: &Message) -> Prepared {
    let text = message_text(message).map(str::to_string);
    let attachments = attachments(message);
    let names = || attachments.iter().map(|a| a.name.as_str());
    let mut saved = Vec::new();
    let mut skipped = Vec::new();
    match (media.media_enabled, &media.root) {
        _ if attachments.is_empty() => {}
        (false, _) => skipped = attachments::skip_all(names(), &SkipReason::MediaDisabled),
        (true, None) => skipped = attachments::skip_all(names(), &SkipReason::StorageDisabled),
        (true, Some(root)) => match ManagedRoot::create(root, media.allow_outside_root) {
            Ok(root) => (saved, skipped) = fetch_all(api, media, &root, message, &attachments).await,
            Err(error) => {
                tracing::warn!(root = %root.display(), %error, "the managed-file root is unavailable; attachments skipped");
                skipped = attachments::skip_all(names(), &SkipReason::SaveFailed);
            }
        },
    }
    attachments::compose(text.as_deref(), reply_block(message).as_deref(), message.caption.as_deref(), &saved, &skipped)
}

async fn fetch_all(
    api: &BotApi,
    media: &MediaSettings,
    root: &ManagedRoot,
    message: &Message,
    attachments: &[Attachment],
) -> (Vec<Saved>, Vec<Skipped>) {
    let mut budget = Budget::default();
    let mut saved: Vec<Saved> = Vec::new();
    let mut skipped = Vec::new();
    for attachment in attachments {
        let name = attachments::unique_name(&attachment.name, saved.iter().map(|s| s.name.as_str()));
        match fetch(api, media, root, message, attachment, &name, budget).await {
            Ok(file) => {
                budget.take(&file);
                saved.push(file);
            }
            Err(reason) => skipped.push(Skipped { name: attachment.name.clone(), reason }),
        }
    }
    (saved, skipped)
}

/// Downloads one attachment and writes it under the managed root.
async fn fetch(
    api: &BotApi,
    media: &MediaSettings,
    root: &ManagedRoot,
    message: &Message,
    attachment: &Attachment,
    name: &str,
    budget: Budget,
) -> Result<Saved, SkipReason> {
    let (chat_id, message_id) = (message.chat.id, message.message_id);
    let (kind, limits) = (attachment.kind, &media.limits);
    let source = kind.as_str();
    let limit = attachments::admit(kind, &attachment.mime, attachment.declared_size, limits, budget)?;
    let file = api.get_file(&GetFileParams::builder().file_id(attachment.file_id.clone()).build()).await;
    let file = match file {
        Ok(response) => response.result,
        Err(error) => {
            tracing::warn!(chat_id, message_id, source, %error, "getFile failed; attachment skipped");
            return Err(SkipReason::DownloadFailed);
        }
    };
    // Telegram may know the size only now; checking it spares a download that would be refused anyway.
    attachments::check_size(file.file_size, kind, limits, budget)?;
    let Some(file_path) = file.file_path else {
        return Err(SkipReason::Unavailable(SERVICE));
    };
    let bytes = match api.download(&file_path, limit).await {
        Ok(bytes) => bytes,
        Err(ApiError::TooLarge { .. }) => return Err(attachments::size_refusal(kind, limits, budget)),
        Err(error) => {
            tracing::warn!(chat_id, message_id, source, %error, "download failed; attachment skipped");
            return Err(SkipReason::DownloadFailed);
        }
    };
    let relative = attachments::target_path(&media.incoming_subdir, CHANNEL, chat_id, &message_id.to_string(), name);
    // A short blocking write: Telegram files are at most 20 MB.
    let path = attachments::save(root, &relative, &bytes).map_err(|error| {
        tracing::warn!(chat_id, message_id, source, %error, "cannot save the attachment");
        SkipReason::SaveFailed
    })?;
    Ok(Saved { name: name.to_string(), path, mime: attachment.mime.clone(), size: bytes.len() as u64, kind })
}

/// The text the user wrote: `text`, else the caption. Blank counts as none.
fn message_text(message: &Message) -> Option<&str> {
    message.text.as_deref().or(message.caption.as_deref()).filter(|t| !t.trim().is_empty())
}

/// The media a message carries, in a fixed order. Only the largest size of a photo counts.
fn attachments(message: &Message) -> Vec<Attachment> {
    let mut out = Vec::new();
    if let Some(largest) = message
        .photo
        .as_deref()
        .and_then(|sizes| sizes.iter().max_by_key(|p| (u64::from(p.width) * u64::from(p.height), p.file_size)))
    {
        out.push(Attachment {
            kind: Kind::Photo,
            file_id: largest.file_id.clone(),
            name: "photo.jpg".into(),
            mime: "image/jpeg".into(),
            declared_size: largest.file_size,
        });
    }
    if let Some(document) = &message.document {
        let mime = mime_or_guess(document.mime_type.as_deref(), document.file_name.as_deref());
        out.push(Attachment {
            kind: Kind::Document,
            file_id: document.file_id.clone(),
            name: file_name(document.file_name.as_deref(), "document", &mime),
            mime,
            declared_size: document.file_size,
        });
    }
    if let Some(audio) = &message.audio {
        let mime = mime_or_guess(audio.mime_type.as_deref(), audio.file_name.as_deref());
        out.push(Attachment {
            kind: Kind::Audio,
            file_id: audio.file_id.clone(),
            name: file_name(audio.file_name.as_deref(), "audio", &mime),
            mime,
            declared_size: audio.file_size,
        });
    }
    if let Some(voice) = &message.voice {
        let mime = voice.mime_type.as_deref().map_or_else(|| "audio/ogg".to_string(), normalize_mime);
        out.push(Attachment {
            kind: Kind::Voice,
            file_id: voice.file_id.clone(),
            name: file_name(None, "voice", &mime),
            mime,
            declared_size: voice.file_size,
        });
    }
    out
}

/// The "Telegram reply context" block, when the message replies to another one. A message in a forum topic
/// "replies" to the topic's creation message; that is not a reply the user made.
fn reply_block(message: &Message) -> Option<String> {
    let replied = message.reply_to_message.as_deref().filter(|r| r.forum_topic_created.is_none())?;
    let from = replied.from.as_deref().map_or("unknown", |user| {
        user.username.as_deref().filter(|u| !u.is_empty()).unwrap_or(user.first_name.as_str())
    });
    let from = if from.is_empty() { "unknown" } else { from };
    let mut block = format!("Telegram reply context:\n- replying to message {} from {from}", replied.message_id);
    if let Some(text) = replied.text.as_deref().or(replied.caption.as_deref()).filter(|t| !t.trim().is_empty()) {
        block.push_str(": ");
        block.extend(text.chars().take(MAX_REPLY_CHARS));
    }
    if let Some(quote) = message.quote.as_deref().filter(|q| !q.text.trim().is_empty()) {
        block.push_str("\n- quoted: ");
        block.push_str(&quote.text);
    }
    Some(block)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::inbound::*;
    use serde_json::json;

    fn message(extra: serde_json::Value) -> Message {
        let mut base = json!({
            "message_id": 7,
            "date": 0,
            "chat": {"id": -100, "type": "private"},
            "from": {"id": 1, "is_bot": false, "first_name": "Ann"},
        });
        for (key, value) in extra.as_object().unwrap() {
            base[key] = value.clone();
        }
        serde_json::from_value(base).unwrap()
    }

    fn settings(toml: &str) -> MediaSettings {
        let config = minibot_config::Config::from_toml(toml, "config.toml", "/tmp", &|_| None).unwrap();
        MediaSettings::from_config(&config)
    }

    #[test]
    fn the_largest_photo_and_other_media_are_collected() {
        let m = message(json!({
            "photo": [
                {"file_id": "small", "file_unique_id": "s", "width": 90, "height": 90, "file_size": 10},
                {"file_id": "big", "file_unique_id": "b", "width": 800, "height": 600, "file_size": 50},
            ],
            "caption": "look",
        }));
        let found = attachments(&m);
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].file_id.as_str(), found[0].name.as_str()), ("big", "photo.jpg"));
        assert_eq!(found[0].mime, "image/jpeg");
        assert_eq!(found[0].declared_size, Some(50));

        let m = message(json!({"document": {"file_id": "d", "file_unique_id": "d", "file_name": "../x.PDF"}}));
        let found = attachments(&m);
        assert_eq!((found[0].name.as_str(), found[0].mime.as_str()), ("x.PDF", "application/pdf"));

        let m = message(json!({"voice": {"file_id": "v", "file_unique_id": "v", "duration": 3}}));
        let found = attachments(&m);
        assert_eq!(
            (found[0].name.as_str(), found[0].mime.as_str(), found[0].kind),
            ("voice.ogg", "audio/ogg", Kind::Voice)
        );

        let m = message(
            json!({"audio": {"file_id": "a", "file_unique_id": "a", "duration": 3, "mime_type": "audio/mpeg"}}),
        );
        assert_eq!(attachments(&m)[0].name, "audio.mp3");

        let m = message(
            json!({"sticker": {"file_id": "s", "file_unique_id": "s", "type": "regular", "width": 1, "height": 1, "is_animated": false, "is_video": false}}),
        );
        assert!(attachments(&m).is_empty());
    }

    #[test]
    fn the_telegram_settings_become_the_shared_limits() {
        let media = settings(
            "[channels.telegram]\nmax_photo_bytes = 100\nmax_document_bytes = 200\nmax_total_media_bytes = 250\n\
             max_attachments_per_message = 2\nallowed_document_mime_types = [\"Application/PDF\"]\n",
        );
        let limits = &media.limits;
        assert_eq!(
            [Kind::Photo, Kind::Document, Kind::Audio, Kind::Voice].map(|k| limits.max_bytes(k)),
            [100, 200, 200, 200]
        );
        assert_eq!((limits.max_total_bytes, limits.max_attachments), (250, 2));
        let fresh = Budget::default();
        assert_eq!(attachments::admit(Kind::Document, "application/pdf", Some(150), limits, fresh), Ok(200));
        assert_eq!(
            attachments::admit(Kind::Photo, "image/jpeg", Some(101), limits, fresh),
            Err(SkipReason::TooLarge { limit: 100 })
        );
        assert_eq!(
            attachments::admit(Kind::Audio, "audio/mpeg", None, limits, fresh),
            Err(SkipReason::MimeRefused("audio/mpeg".into()))
        );
        // Telegram's files keep their place: <incoming>/telegram/<chat>/<message id>-<name>.
        let path = attachments::target_path("uploads/temp", CHANNEL, -100_i64, &7_i32.to_string(), "a.pdf");
        assert_eq!(path, "uploads/temp/telegram/-100/7-a.pdf");
        assert_eq!(SkipReason::Unavailable(SERVICE).to_string(), "Telegram did not provide the file");
    }

    #[test]
    fn the_reply_block_names_the_author_and_quote() {
        let m = message(json!({
            "text": "and this?",
            "reply_to_message": {
                "message_id": 3, "date": 0, "chat": {"id": -100, "type": "private"},
                "from": {"id": 2, "is_bot": false, "first_name": "Bob", "username": "bobby"},
                "caption": "x".repeat(1500),
            },
            "quote": {"text": "xx", "position": 0},
        }));
        let block = reply_block(&m).unwrap();
        let expected =
            format!("Telegram reply context:\n- replying to message 3 from bobby: {}\n- quoted: xx", "x".repeat(1000));
        assert_eq!(block, expected);

        let m = message(json!({
            "text": "hi",
            "reply_to_message": {"message_id": 4, "date": 0, "chat": {"id": -100, "type": "private"},
                "from": {"id": 2, "is_bot": false, "first_name": "Bob"}, "text": "hello"},
        }));
        assert_eq!(reply_block(&m).unwrap(), "Telegram reply context:\n- replying to message 4 from Bob: hello");

        let m = message(json!({
            "text": "hi",
            "reply_to_message": {"message_id": 5, "date": 0, "chat": {"id": -100, "type": "private"}, "text": "t"},
        }));
        assert_eq!(reply_block(&m).unwrap(), "Telegram reply context:\n- replying to message 5 from unknown: t");

        assert!(reply_block(&message(json!({"text": "hi"}))).is_none());
    }

    #[test]
    fn text_comes_from_the_text_or_the_caption() {
        assert_eq!(message_text(&message(json!({"text": "hi"}))), Some("hi"));
        assert_eq!(message_text(&message(json!({"caption": "cap"}))), Some("cap"));
        assert_eq!(message_text(&message(json!({"text": "  "}))), None);
    }
}
