//! A Telegram message as the model reads it: the user's text (or caption), the message it replies to, and the
//! media it carries, downloaded into the managed-file root so the file tools can open them. Images are not
//! inlined: the model sees a list of saved files and uses `self_insert_artifact` when it wants to look.
//!
//! The decisions (which attachments, under which limits, under which name, how the blocks read) are pure
//! functions; only [`prepare`] talks to Telegram and the disk.

use super::api::{ApiError, BotApi};
use frankenstein::AsyncTelegramApi;
use frankenstein::methods::GetFileParams;
use frankenstein::types::Message;
use minibot_tools::files::ManagedRoot;
use std::fmt;
use std::path::PathBuf;

/// The answer when a message carried only media and none of it could be used.
pub const NOT_PROCESSED: &str = "I could not process the attachment you sent.";
const STORAGE_OFF: &str =
    "I could not process the attachment you sent: file storage is turned off, so I cannot keep files.";
const MEDIA_OFF: &str = "I could not process the attachment you sent: attachments are turned off.";

/// Longest stored file name (without the `<message_id>-` prefix), in bytes.
const MAX_NAME_BYTES: usize = 120;
/// Longest reply-context text shown to the model, in characters.
const MAX_REPLY_CHARS: usize = 1000;

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
    pub max_photo_bytes: u64,
    /// Also the limit for audio and voice.
    pub max_document_bytes: u64,
    pub max_total_bytes: u64,
    pub max_attachments: u32,
    /// Lower-case MIME types; empty = all. Applies to documents, audio and voice (not photos).
    pub allowed_mime_types: Vec<String>,
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
            max_photo_bytes: telegram.max_photo_bytes.bytes(),
            max_document_bytes: telegram.max_document_bytes.bytes(),
            max_total_bytes: telegram.max_total_media_bytes.bytes(),
            max_attachments: telegram.max_attachments_per_message,
            allowed_mime_types: telegram.allowed_document_mime_types.iter().map(|m| normalize_mime(m)).collect(),
        }
    }
}

pub enum Prepared {
    /// The text for the model (the user's words plus the reply and file blocks).
    Text(String),
    /// Nothing to answer with a turn; this reply goes to the user instead.
    Refused(String),
    /// Nothing the bot handles (a sticker, a location): ignored.
    Nothing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Photo,
    Document,
    Audio,
    Voice,
}

impl Source {
    fn as_str(self) -> &'static str {
        match self {
            Self::Photo => "photo",
            Self::Document => "document",
            Self::Audio => "audio",
            Self::Voice => "voice",
        }
    }
}

/// One piece of media a message carries, before any limit is applied.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Attachment {
    source: Source,
    file_id: String,
    /// Already sanitised.
    name: String,
    mime: String,
    /// What Telegram says the size is, when it says.
    declared_size: Option<u64>,
}

/// A file saved under the managed root.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Saved {
    name: String,
    /// Relative to the managed root (the absolute path when the root lets files live outside it).
    path: String,
    mime: String,
    size: u64,
    source: Source,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum SkipReason {
    MediaDisabled,
    StorageDisabled,
    TooMany { max: u32 },
    MimeRefused(String),
    TooLarge { limit: u64 },
    OverTotal { limit: u64 },
    Unavailable,
    DownloadFailed,
    SaveFailed,
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MediaDisabled => write!(f, "attachments are turned off"),
            Self::StorageDisabled => write!(f, "file storage is turned off"),
            Self::TooMany { max } => write!(f, "more than {max} attachments in one message"),
            Self::MimeRefused(mime) => write!(f, "type {mime} is not allowed"),
            Self::TooLarge { limit } => write!(f, "larger than the {limit}-byte limit"),
            Self::OverTotal { limit } => write!(f, "over the {limit}-byte total for one message"),
            Self::Unavailable => write!(f, "Telegram did not provide the file"),
            Self::DownloadFailed => write!(f, "the download failed"),
            Self::SaveFailed => write!(f, "it could not be saved"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Skipped {
    name: String,
    reason: SkipReason,
}

/// How many attachments and bytes this message has used so far.
#[derive(Debug, Default, Clone, Copy)]
struct Budget {
    count: u32,
    bytes: u64,
}

pub async fn prepare(api: &BotApi, media: &MediaSettings, message: &Message) -> Prepared {
    let text = message_text(message).map(str::to_string);
    let attachments = attachments(message);
    let mut saved = Vec::new();
    let mut skipped = Vec::new();
    match (media.media_enabled, &media.root) {
        _ if attachments.is_empty() => {}
        (false, _) => skipped = skip_all(&attachments, SkipReason::MediaDisabled),
        (true, None) => skipped = skip_all(&attachments, SkipReason::StorageDisabled),
        (true, Some(root)) => match ManagedRoot::create(root, media.allow_outside_root) {
            Ok(root) => (saved, skipped) = fetch_all(api, media, &root, message, &attachments).await,
            Err(error) => {
                tracing::warn!(root = %root.display(), %error, "the managed-file root is unavailable; attachments skipped");
                skipped = skip_all(&attachments, SkipReason::SaveFailed);
            }
        },
    }
    compose(text.as_deref(), reply_block(message).as_deref(), message.caption.as_deref(), &saved, &skipped)
}

fn skip_all(attachments: &[Attachment], reason: SkipReason) -> Vec<Skipped> {
    attachments.iter().map(|a| Skipped { name: a.name.clone(), reason: reason.clone() }).collect()
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
        let name = unique_name(&attachment.name, saved.iter().map(|s| s.name.as_str()));
        match fetch(api, media, root, message, attachment, &name, budget).await {
            Ok(file) => {
                budget.count += 1;
                budget.bytes += file.size;
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
    let source = attachment.source.as_str();
    let limit = admit(attachment, media, budget)?;
    let file = api.get_file(&GetFileParams::builder().file_id(attachment.file_id.clone()).build()).await;
    let file = match file {
        Ok(response) => response.result,
        Err(error) => {
            tracing::warn!(chat_id, message_id, source, %error, "getFile failed; attachment skipped");
            return Err(SkipReason::DownloadFailed);
        }
    };
    // Telegram may know the size only now; checking it spares a download that would be refused anyway.
    check_size(file.file_size, attachment.source, media, budget)?;
    let Some(file_path) = file.file_path else {
        return Err(SkipReason::Unavailable);
    };
    let bytes = match api.download(&file_path, limit).await {
        Ok(bytes) => bytes,
        Err(ApiError::TooLarge { .. }) => return Err(size_refusal(attachment.source, media, budget)),
        Err(error) => {
            tracing::warn!(chat_id, message_id, source, %error, "download failed; attachment skipped");
            return Err(SkipReason::DownloadFailed);
        }
    };
    let relative = target_path(&media.incoming_subdir, chat_id, message_id, name);
    let target = root.resolve(&relative).map_err(|error| {
        tracing::warn!(chat_id, message_id, source, %error, "cannot place the attachment under the managed root");
        SkipReason::SaveFailed
    })?;
    // Through the root's handle, as the file tools write: a folder swapped for a link mid-write cannot take the
    // file outside the root. (A short blocking write: Telegram files are at most 20 MB.) The upload is written
    // private (0600, whatever the umask) under a hidden name next to the target, then renamed over it, so a
    // failed write leaves nothing and a message delivered twice replaces its file whole.
    let save = root
        .create_parent(&target)
        .and_then(|()| root.replace_with_mode(&target, &bytes, minibot_sqlite::private_fs::FILE_MODE));
    if let Err(error) = save {
        tracing::warn!(chat_id, message_id, source, path = %target.absolute.display(), %error, "cannot save the attachment");
        return Err(SkipReason::SaveFailed);
    }
    Ok(Saved {
        name: name.to_string(),
        path: target.display(),
        mime: attachment.mime.clone(),
        size: bytes.len() as u64,
        source: attachment.source,
    })
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
            source: Source::Photo,
            file_id: largest.file_id.clone(),
            name: "photo.jpg".into(),
            mime: "image/jpeg".into(),
            declared_size: largest.file_size,
        });
    }
    if let Some(document) = &message.document {
        let mime = mime_or_guess(document.mime_type.as_deref(), document.file_name.as_deref());
        out.push(Attachment {
            source: Source::Document,
            file_id: document.file_id.clone(),
            name: file_name(document.file_name.as_deref(), "document", &mime),
            mime,
            declared_size: document.file_size,
        });
    }
    if let Some(audio) = &message.audio {
        let mime = mime_or_guess(audio.mime_type.as_deref(), audio.file_name.as_deref());
        out.push(Attachment {
            source: Source::Audio,
            file_id: audio.file_id.clone(),
            name: file_name(audio.file_name.as_deref(), "audio", &mime),
            mime,
            declared_size: audio.file_size,
        });
    }
    if let Some(voice) = &message.voice {
        let mime = voice.mime_type.as_deref().map_or_else(|| "audio/ogg".to_string(), normalize_mime);
        out.push(Attachment {
            source: Source::Voice,
            file_id: voice.file_id.clone(),
            name: file_name(None, "voice", &mime),
            mime,
            declared_size: voice.file_size,
        });
    }
    out
}

/// `type/subtype` in lower case, without parameters.
fn normalize_mime(mime: &str) -> String {
    mime.split(';').next().unwrap_or_default().trim().to_ascii_lowercase()
}

fn mime_or_guess(declared: Option<&str>, file_name: Option<&str>) -> String {
    declared
        .map(normalize_mime)
        .filter(|m| m.contains('/'))
        .or_else(|| file_name.and_then(|n| mime_guess::from_path(n).first()).map(|m| m.essence_str().to_string()))
        .unwrap_or_else(|| "application/octet-stream".into())
}

/// The sanitised name Telegram gave, or `<fallback>.<extension of the MIME type>`.
fn file_name(given: Option<&str>, fallback: &str, mime: &str) -> String {
    let fallback = format!("{fallback}.{}", extension_for(mime));
    given.map_or_else(|| fallback.clone(), |name| sanitize_file_name(name, &fallback))
}

/// The extension for a file Telegram sent without a name (`mime_guess` is built without the reverse table).
fn extension_for(mime: &str) -> &'static str {
    match mime {
        "image/jpeg" => "jpg",
        "image/png" => "png",
        "audio/ogg" | "audio/opus" => "ogg",
        "audio/mpeg" | "audio/mp3" => "mp3",
        "audio/mp4" | "audio/x-m4a" | "audio/m4a" => "m4a",
        "audio/wav" | "audio/x-wav" => "wav",
        "audio/flac" | "audio/x-flac" => "flac",
        "application/pdf" => "pdf",
        "application/zip" => "zip",
        "application/json" => "json",
        "text/plain" => "txt",
        "text/csv" => "csv",
        _ => "bin",
    }
}

/// A name safe to store: the last path component only, no leading dots, letters, digits and a few plain
/// punctuation marks kept, everything else (separators, control and look-alike characters) turned into `_`,
/// at most [`MAX_NAME_BYTES`] with the extension kept. `fallback` when nothing usable is left.
fn sanitize_file_name(raw: &str, fallback: &str) -> String {
    let base = raw.rsplit(['/', '\\']).next().unwrap_or_default();
    let mapped: String =
        base.chars().map(|c| if c.is_alphanumeric() || "._-+()[]@=, ".contains(c) { c } else { '_' }).collect();
    let trimmed = mapped.trim_start_matches(['.', ' ']).trim_end_matches(['.', ' ']);
    if trimmed.chars().all(|c| c == '_' || c == '.' || c == ' ') {
        return fallback.to_string();
    }
    truncate_name(trimmed, MAX_NAME_BYTES)
}

/// Cuts the stem so the whole name fits in `max` bytes, keeping a short extension.
fn truncate_name(name: &str, max: usize) -> String {
    if name.len() <= max {
        return name.to_string();
    }
    let (stem, ext) = match name.rfind('.') {
        Some(dot) if dot > 0 && name.len() - dot <= 16 => name.split_at(dot),
        _ => (name, ""),
    };
    let mut cut = max.saturating_sub(ext.len());
    while !stem.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{ext}", &stem[..cut])
}

/// `name`, or `<n>-name` if an earlier file of the same message already took it.
fn unique_name<'a>(name: &str, taken: impl Iterator<Item = &'a str> + Clone) -> String {
    let mut candidate = name.to_string();
    let mut n = 2;
    while taken.clone().any(|t| t == candidate) {
        candidate = format!("{n}-{name}");
        n += 1;
    }
    candidate
}

/// `<incoming_temp_subdir>/telegram/<chat_id>/<message_id>-<name>`, relative to the managed root.
fn target_path(incoming_subdir: &str, chat_id: i64, message_id: i32, name: &str) -> String {
    let subdir = incoming_subdir.trim_matches('/');
    let file = format!("telegram/{chat_id}/{message_id}-{name}");
    if subdir.is_empty() { file } else { format!("{subdir}/{file}") }
}

fn mime_allowed(mime: &str, allowed: &[String]) -> bool {
    allowed.is_empty()
        || allowed
            .iter()
            .any(|a| a == mime || a.strip_suffix("/*").is_some_and(|kind| mime.split('/').next() == Some(kind)))
}

fn kind_limit(source: Source, media: &MediaSettings) -> u64 {
    if source == Source::Photo { media.max_photo_bytes } else { media.max_document_bytes }
}

/// Whether this attachment may be downloaded, and if so the most bytes the download may bring.
fn admit(attachment: &Attachment, media: &MediaSettings, budget: Budget) -> Result<u64, SkipReason> {
    if budget.count >= media.max_attachments {
        return Err(SkipReason::TooMany { max: media.max_attachments });
    }
    if attachment.source != Source::Photo && !mime_allowed(&attachment.mime, &media.allowed_mime_types) {
        return Err(SkipReason::MimeRefused(attachment.mime.clone()));
    }
    check_size(attachment.declared_size, attachment.source, media, budget)?;
    let remaining = media.max_total_bytes.saturating_sub(budget.bytes);
    if remaining == 0 {
        return Err(SkipReason::OverTotal { limit: media.max_total_bytes });
    }
    Ok(kind_limit(attachment.source, media).min(remaining))
}

/// Refuses a known size over the attachment's own limit or over what the message has left.
fn check_size(size: Option<u64>, source: Source, media: &MediaSettings, budget: Budget) -> Result<(), SkipReason> {
    let Some(size) = size else { return Ok(()) };
    let limit = kind_limit(source, media);
    if size > limit {
        return Err(SkipReason::TooLarge { limit });
    }
    if size > media.max_total_bytes.saturating_sub(budget.bytes) {
        return Err(SkipReason::OverTotal { limit: media.max_total_bytes });
    }
    Ok(())
}

/// Which limit a download that grew too large ran into.
fn size_refusal(source: Source, media: &MediaSettings, budget: Budget) -> SkipReason {
    let limit = kind_limit(source, media);
    if limit <= media.max_total_bytes.saturating_sub(budget.bytes) {
        SkipReason::TooLarge { limit }
    } else {
        SkipReason::OverTotal { limit: media.max_total_bytes }
    }
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

/// The "Incoming managed files" block.
fn files_block(saved: &[Saved], caption: Option<&str>) -> String {
    let caption = caption.map(one_line).filter(|c| !c.is_empty());
    let mut block = String::from("Incoming managed files:");
    for file in saved {
        block.push_str(&format!(
            "\n- {} (path={}, mime={}, size={}, source={}",
            file.name,
            file.path,
            file.mime,
            file.size,
            file.source.as_str()
        ));
        if let Some(caption) = &caption {
            block.push_str(&format!(", caption={caption}"));
        }
        block.push(')');
    }
    block
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn skipped_line(skipped: &[Skipped]) -> String {
    let items: Vec<String> = skipped.iter().map(|s| format!("{} ({})", s.name, s.reason)).collect();
    format!("Skipped attachments: {}", items.join(", "))
}

/// Puts the pieces together, or decides there is no turn to run.
fn compose(
    text: Option<&str>,
    reply: Option<&str>,
    caption: Option<&str>,
    saved: &[Saved],
    skipped: &[Skipped],
) -> Prepared {
    if text.is_none() && saved.is_empty() {
        let Some(first) = skipped.first() else {
            return Prepared::Nothing;
        };
        let all_same = skipped.iter().all(|s| s.reason == first.reason);
        let answer = match first.reason {
            SkipReason::StorageDisabled if all_same => STORAGE_OFF,
            SkipReason::MediaDisabled if all_same => MEDIA_OFF,
            _ => NOT_PROCESSED,
        };
        return Prepared::Refused(answer.to_string());
    }
    let mut parts: Vec<String> = Vec::new();
    if let Some(text) = text {
        parts.push(text.to_string());
    }
    if !skipped.is_empty() {
        parts.push(skipped_line(skipped));
    }
    if let Some(reply) = reply {
        parts.push(reply.to_string());
    }
    if !saved.is_empty() {
        parts.push(files_block(saved, caption));
    }
    Prepared::Text(parts.join("\n\n"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::inbound::*;
    use serde_json::json;

    fn settings() -> MediaSettings {
        MediaSettings {
            media_enabled: true,
            root: Some(PathBuf::from("/tmp/files")),
            allow_outside_root: false,
            incoming_subdir: "uploads/temp".into(),
            max_photo_bytes: 100,
            max_document_bytes: 200,
            max_total_bytes: 250,
            max_attachments: 3,
            allowed_mime_types: vec![],
        }
    }

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

    fn doc(mime: &str, size: Option<u64>) -> Attachment {
        Attachment {
            source: Source::Document,
            file_id: "f".into(),
            name: "a.pdf".into(),
            mime: mime.into(),
            declared_size: size,
        }
    }

    fn saved(name: &str, source: Source) -> Saved {
        Saved {
            name: name.into(),
            path: format!("uploads/temp/telegram/5/7-{name}"),
            mime: "image/jpeg".into(),
            size: 42,
            source,
        }
    }

    fn text_of(prepared: Prepared) -> String {
        match prepared {
            Prepared::Text(text) => text,
            Prepared::Refused(text) => panic!("refused: {text}"),
            Prepared::Nothing => panic!("nothing"),
        }
    }

    #[test]
    fn names_are_sanitised() {
        assert_eq!(sanitize_file_name("report.pdf", "x"), "report.pdf");
        assert_eq!(sanitize_file_name("../../etc/passwd", "x"), "passwd");
        assert_eq!(sanitize_file_name("C:\\docs\\report.pdf", "x"), "report.pdf");
        assert_eq!(sanitize_file_name(".bashrc", "x"), "bashrc");
        assert_eq!(sanitize_file_name("...", "doc.bin"), "doc.bin");
        assert_eq!(sanitize_file_name("", "doc.bin"), "doc.bin");
        assert_eq!(sanitize_file_name("a\nb\u{202E}c\u{2215}d.txt", "x"), "a_b_c_d.txt");
        assert_eq!(sanitize_file_name("Отчёт 2024.pdf", "x"), "Отчёт 2024.pdf");
        assert_eq!(sanitize_file_name("dir/", "doc.bin"), "doc.bin");
    }

    #[test]
    fn long_names_keep_their_extension() {
        let long = format!("{}.pdf", "é".repeat(100));
        let name = sanitize_file_name(&long, "x");
        assert!(name.len() <= MAX_NAME_BYTES);
        assert!(name.ends_with(".pdf"));
        assert!(name.starts_with('é'));
    }

    #[test]
    fn target_path_is_under_the_incoming_folder() {
        assert_eq!(target_path("uploads/temp", -100, 7, "a.pdf"), "uploads/temp/telegram/-100/7-a.pdf");
        assert_eq!(target_path("/in/", 5, 1, "photo.jpg"), "in/telegram/5/1-photo.jpg");
        assert_eq!(target_path("", 5, 1, "photo.jpg"), "telegram/5/1-photo.jpg");
    }

    #[test]
    fn duplicate_names_get_a_prefix() {
        assert_eq!(unique_name("a.pdf", ["b.pdf"].into_iter()), "a.pdf");
        assert_eq!(unique_name("a.pdf", ["a.pdf", "2-a.pdf"].into_iter()), "3-a.pdf");
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
            (found[0].name.as_str(), found[0].mime.as_str(), found[0].source),
            ("voice.ogg", "audio/ogg", Source::Voice)
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
    fn limits_decide_what_is_downloaded() {
        let media = settings();
        let fresh = Budget::default();
        assert_eq!(admit(&doc("application/pdf", Some(150)), &media, fresh), Ok(200));
        assert_eq!(admit(&doc("application/pdf", Some(201)), &media, fresh), Err(SkipReason::TooLarge { limit: 200 }));
        // The total left (250 - 100) caps the download.
        let used = Budget { count: 1, bytes: 100 };
        assert_eq!(admit(&doc("application/pdf", None), &media, used), Ok(150));
        assert_eq!(admit(&doc("application/pdf", Some(160)), &media, used), Err(SkipReason::OverTotal { limit: 250 }));
        let full = Budget { count: 1, bytes: 250 };
        assert_eq!(admit(&doc("application/pdf", None), &media, full), Err(SkipReason::OverTotal { limit: 250 }));
        let many = Budget { count: 3, bytes: 0 };
        assert_eq!(admit(&doc("application/pdf", None), &media, many), Err(SkipReason::TooMany { max: 3 }));

        let photo = Attachment { source: Source::Photo, ..doc("image/jpeg", Some(101)) };
        assert_eq!(admit(&photo, &media, fresh), Err(SkipReason::TooLarge { limit: 100 }));
    }

    #[test]
    fn the_mime_list_applies_to_everything_but_photos() {
        let media =
            MediaSettings { allowed_mime_types: vec!["application/pdf".into(), "audio/*".into()], ..settings() };
        let fresh = Budget::default();
        assert!(admit(&doc("application/pdf", None), &media, fresh).is_ok());
        assert_eq!(
            admit(&doc("application/zip", None), &media, fresh),
            Err(SkipReason::MimeRefused("application/zip".into()))
        );
        let voice = Attachment { source: Source::Voice, ..doc("audio/ogg", None) };
        assert!(admit(&voice, &media, fresh).is_ok());
        let photo = Attachment { source: Source::Photo, ..doc("image/jpeg", None) };
        assert!(admit(&photo, &media, fresh).is_ok());
        assert_eq!(normalize_mime("Application/PDF; charset=x"), "application/pdf");
    }

    #[test]
    fn an_oversized_download_names_the_limit_it_hit() {
        let media = settings();
        assert_eq!(size_refusal(Source::Document, &media, Budget::default()), SkipReason::TooLarge { limit: 200 });
        let used = Budget { count: 1, bytes: 100 };
        assert_eq!(size_refusal(Source::Document, &media, used), SkipReason::OverTotal { limit: 250 });
    }

    #[test]
    fn the_files_block_lists_each_file() {
        let files = [saved("photo.jpg", Source::Photo)];
        assert_eq!(
            files_block(&files, Some("a\nsunset")),
            "Incoming managed files:\n- photo.jpg (path=uploads/temp/telegram/5/7-photo.jpg, mime=image/jpeg, \
             size=42, source=photo, caption=a sunset)"
        );
        assert_eq!(
            files_block(&files, None),
            "Incoming managed files:\n- photo.jpg (path=uploads/temp/telegram/5/7-photo.jpg, mime=image/jpeg, \
             size=42, source=photo)"
        );
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

    #[test]
    fn compose_orders_text_reply_and_files() {
        let reply = "Telegram reply context:\n- replying to message 3 from bob: x";
        let files = [saved("photo.jpg", Source::Photo)];
        let text = text_of(compose(Some("see"), Some(reply), Some("see"), &files, &[]));
        assert!(text.starts_with("see\n\nTelegram reply context:"), "{text}");
        assert!(text.ends_with(", source=photo, caption=see)"), "{text}");
        assert!(text.find("Telegram reply").unwrap() < text.find("Incoming managed files").unwrap());

        let text = text_of(compose(None, None, None, &files, &[]));
        assert!(text.starts_with("Incoming managed files:\n- photo.jpg"), "{text}");
    }

    #[test]
    fn skipped_media_are_reported_or_refused() {
        let skipped = [Skipped { name: "a.zip".into(), reason: SkipReason::MimeRefused("application/zip".into()) }];
        let text = text_of(compose(Some("here"), None, Some("here"), &[], &skipped));
        assert_eq!(text, "here\n\nSkipped attachments: a.zip (type application/zip is not allowed)");

        match compose(None, None, None, &[], &skipped) {
            Prepared::Refused(answer) => assert_eq!(answer, NOT_PROCESSED),
            _ => panic!("expected a refusal"),
        }
        let off = [Skipped { name: "photo.jpg".into(), reason: SkipReason::StorageDisabled }];
        match compose(None, None, None, &[], &off) {
            Prepared::Refused(answer) => assert!(answer.contains("file storage is turned off"), "{answer}"),
            _ => panic!("expected a refusal"),
        }
        let text = text_of(compose(Some("hi"), None, None, &[], &off));
        assert!(text.ends_with("Skipped attachments: photo.jpg (file storage is turned off)"), "{text}");
    }

    #[test]
    fn a_message_without_content_is_nothing() {
        assert!(matches!(compose(None, Some("Telegram reply context:"), None, &[], &[]), Prepared::Nothing));
    }
}
