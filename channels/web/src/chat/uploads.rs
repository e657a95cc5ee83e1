//! Files the user attaches in the chat. Each is uploaded over HTTP (`POST /chat/upload?c=<n>`, the raw bytes,
//! `Content-Type` and a URL-encoded `X-File-Name`) before the message is sent: it is checked against the
//! `[http] chat_upload_*` limits, written privately under `<incoming_temp_subdir>/web/<chat>/` in the managed
//! root, and kept by id until a message of the same chat names it. The message then applies the count and
//! total limits and hands the model the same "Incoming managed files" block Telegram does
//! ([`minibot_channel::attachments`]). Files older than `chat_upload_retention_hours` are deleted.

use minibot_channel::attachments::{self, Budget, Kind, Limits, Prepared, Saved, SkipReason, Skipped};
use minibot_config::Config;
use minibot_tools::files::ManagedRoot;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Uploads waiting for their message, at most, in all chats together; one chat may hold at most
/// [`UploadLimits::max_waiting_per_chat`] of them.
const MAX_WAITING: usize = 256;
/// Uploads arriving at once, at most. Each holds up to the largest upload limit in memory until it is in (a
/// page sends its files one after another), so a client that starts many and stalls them holds a bounded
/// amount.
pub const MAX_ARRIVING: usize = 4;
/// An upload no message named within this long is deleted (a page closed before sending).
const UNSENT_FOR: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone)]
pub struct UploadLimits {
    pub max_attachments: u32,
    pub max_image_bytes: u64,
    pub max_audio_bytes: u64,
    pub max_total_bytes: u64,
}

impl UploadLimits {
    pub fn from_config(http: &minibot_config::HttpSection) -> Self {
        Self {
            max_attachments: http.chat_upload_max_attachments,
            max_image_bytes: http.chat_upload_max_image_bytes.bytes(),
            max_audio_bytes: http.chat_upload_max_audio_bytes.bytes(),
            max_total_bytes: http.chat_upload_max_total_bytes.bytes(),
        }
    }

    fn shared(&self) -> Limits {
        Limits {
            max_attachments: self.max_attachments,
            max_image_bytes: self.max_image_bytes,
            max_document_bytes: 0,
            max_audio_bytes: self.max_audio_bytes,
            max_total_bytes: self.max_total_bytes,
            allowed_mime_types: vec!["image/*".into(), "audio/*".into()],
        }
    }

    /// Uploads one chat may hold before its message is sent: a message takes `max_attachments`, and a user may
    /// replace a few.
    pub fn max_waiting_per_chat(&self) -> usize {
        (self.max_attachments as usize * 2).max(6)
    }

    /// The most bytes one upload can be, whatever its kind.
    pub fn largest(&self) -> u64 {
        self.max_image_bytes.max(self.max_audio_bytes).min(self.max_total_bytes)
    }
}

/// Why an upload was refused, with the HTTP status that says it.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    #[error("The chat cannot keep files: file storage is off ([tools.file_storage] enabled = false).")]
    StorageOff,
    #[error("Only images and audio can be attached here, not {0}.")]
    WrongType(String),
    #[error("The file was sent as {claimed}, but its content is no {kind} format this chat takes.")]
    NotWhatItSays { claimed: String, kind: &'static str },
    #[error("{name} is {size} bytes, over the {limit}-byte limit for {kind} files.")]
    TooLarge { name: String, size: u64, limit: u64, kind: &'static str },
    #[error("Too many uploads are waiting to be sent; send or reload first.")]
    TooManyWaiting,
    #[error("The file could not be saved.")]
    SaveFailed,
}

impl UploadError {
    pub fn status(&self) -> actix_web::http::StatusCode {
        use actix_web::http::StatusCode;
        match self {
            Self::StorageOff => StatusCode::FORBIDDEN,
            Self::WrongType(_) | Self::NotWhatItSays { .. } => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::TooManyWaiting => StatusCode::TOO_MANY_REQUESTS,
            Self::SaveFailed => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// An upload as the page learns of it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Accepted {
    pub upload_id: String,
    pub name: String,
    pub size: u64,
    pub mime: String,
}

pub struct Uploads {
    limits: UploadLimits,
    /// The managed root and `incoming_temp_subdir`; `None` when file storage is off.
    storage: Option<(PathBuf, bool, String)>,
    retention: Option<Duration>,
    waiting: Mutex<HashMap<String, Waiting>>,
    /// Uploads being received: each holds its bytes in memory until it is checked and saved.
    arriving: tokio::sync::Semaphore,
}

struct Waiting {
    chat_id: i64,
    file: Saved,
    since: Instant,
}

impl Uploads {
    pub fn from_config(config: &Config) -> Self {
        let storage = &config.tools.file_storage;
        let hours = config.http.chat_upload_retention_hours;
        Self {
            limits: UploadLimits::from_config(&config.http),
            storage: storage.enabled.then(|| {
                (
                    config.resolve_path(&storage.root_dir),
                    storage.allow_outside_root,
                    storage.incoming_temp_subdir.clone(),
                )
            }),
            retention: (hours > 0).then(|| Duration::from_secs(u64::from(hours) * 3600)),
            waiting: Mutex::default(),
            arriving: tokio::sync::Semaphore::new(MAX_ARRIVING),
        }
    }

    /// A place for one more upload to arrive; `None` while [`MAX_ARRIVING`] others are arriving.
    pub fn begin(&self) -> Option<tokio::sync::SemaphorePermit<'_>> {
        self.arriving.try_acquire().ok()
    }

    pub fn limits(&self) -> &UploadLimits {
        &self.limits
    }

    /// Whether files can be kept at all (`[tools.file_storage]` is on).
    pub fn enabled(&self) -> bool {
        self.storage.is_some()
    }

    /// Checks and saves one upload (blocking: run it off the async threads).
    pub fn accept(
        &self,
        chat_id: i64,
        name: Option<&str>,
        mime: Option<&str>,
        bytes: &[u8],
    ) -> Result<Accepted, UploadError> {
        let Some((root, outside, subdir)) = &self.storage else { return Err(UploadError::StorageOff) };
        let claimed = attachments::mime_or_guess(mime, name);
        let claimed_kind = Kind::from_mime(&claimed);
        if !matches!(claimed_kind, Kind::Image | Kind::Audio) {
            return Err(UploadError::WrongType(claimed));
        }
        let limits = self.limits.shared();
        let size = bytes.len() as u64;
        let too_large =
            |kind: Kind, mime: &str| match attachments::admit(kind, mime, Some(size), &limits, Budget::default()) {
                Ok(_) => None,
                Err(SkipReason::OverTotal { limit } | SkipReason::TooLarge { limit }) => Some(UploadError::TooLarge {
                    name: attachments::file_name(name, kind.as_str(), mime),
                    size,
                    limit,
                    kind: kind.as_str(),
                }),
                Err(SkipReason::MimeRefused(mime)) => Some(UploadError::WrongType(mime)),
                Err(_) => Some(UploadError::SaveFailed),
            };
        if let Some(refusal) = too_large(claimed_kind, &claimed) {
            return Err(refusal);
        }
        // What the bytes are, not what the browser says: the model is told this type, and a file tool may act on
        // it. An image must be an image, audio audio.
        let mime = match sniff(bytes) {
            Some(found) if Kind::from_mime(found) == claimed_kind => found.to_string(),
            _ => return Err(UploadError::NotWhatItSays { claimed, kind: claimed_kind.as_str() }),
        };
        let kind = claimed_kind;
        let shown = with_extension_of(&attachments::file_name(name, kind.as_str(), &mime), &mime);
        self.drop_unsent(root);
        {
            let waiting = self.lock();
            let of_chat = waiting.values().filter(|w| w.chat_id == chat_id).count();
            if waiting.len() >= MAX_WAITING || of_chat >= self.limits.max_waiting_per_chat() {
                return Err(UploadError::TooManyWaiting);
            }
        }
        let upload_id = uuid_like();
        let root = ManagedRoot::create(root, *outside).map_err(|error| {
            tracing::warn!(%error, "the managed-file root is unavailable; upload refused");
            UploadError::SaveFailed
        })?;
        let relative = attachments::target_path(subdir, super::CHANNEL, chat_id, &upload_id, &shown);
        let path = attachments::save(&root, &relative, bytes).map_err(|error| {
            tracing::warn!(%error, "cannot save an upload");
            UploadError::SaveFailed
        })?;
        let file = Saved { name: shown.clone(), path, mime: mime.clone(), size, kind };
        self.lock().insert(upload_id.clone(), Waiting { chat_id, file, since: Instant::now() });
        Ok(Accepted { upload_id, name: shown, size, mime })
    }

    /// The model's text for a message: the user's text and the uploads it names (of this chat; others are
    /// unknown here), under the count and total limits. `Ok(None)`: nothing to send. `Err`: what to tell the
    /// user instead.
    pub fn take_for_message(&self, chat_id: i64, text: &str, upload_ids: &[String]) -> Result<Option<String>, String> {
        let limits = self.limits.shared();
        let mut files = Vec::new();
        {
            let mut waiting = self.lock();
            // All or none: a message naming one unknown upload takes none, so the others stay counted (and sendable).
            let known = upload_ids.iter().all(|id| waiting.get(id).is_some_and(|upload| upload.chat_id == chat_id));
            if !known {
                return Err("An attachment is no longer available; attach it again.".into());
            }
            files.extend(upload_ids.iter().filter_map(|id| waiting.remove(id)).map(|w| w.file));
        }
        let mut budget = Budget::default();
        let (mut saved, mut skipped) = (Vec::new(), Vec::<Skipped>::new());
        for file in files {
            match attachments::admit(file.kind, &file.mime, Some(file.size), &limits, budget) {
                Ok(_) => {
                    budget.take(&file);
                    saved.push(file);
                }
                Err(reason) => skipped.push(Skipped { name: file.name, reason }),
            }
        }
        let text = Some(text).filter(|t| !t.trim().is_empty());
        match attachments::compose(text, None, None, &saved, &skipped) {
            Prepared::Text(text) => Ok(Some(text)),
            Prepared::Refused(answer) => Err(answer),
            Prepared::Nothing => Ok(None),
        }
    }

    /// Forgets uploads no message named within [`UNSENT_FOR`], and deletes their files. Blocking.
    fn drop_unsent(&self, root: &std::path::Path) {
        let stale: Vec<Saved> = {
            let mut waiting = self.lock();
            let ids: Vec<String> =
                waiting.iter().filter(|(_, w)| w.since.elapsed() >= UNSENT_FOR).map(|(id, _)| id.clone()).collect();
            ids.iter().filter_map(|id| waiting.remove(id)).map(|w| w.file).collect()
        };
        for file in stale {
            // The path is the one `save` chose under the root: relative to it, or absolute outside it.
            if let Err(error) = std::fs::remove_file(root.join(&file.path))
                && error.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(%error, path = %file.path, "cannot delete an upload no message named");
            }
        }
    }

    /// Deletes uploads older than the retention period (files and waiting entries). Blocking.
    pub fn clean(&self) {
        let Some(retention) = self.retention else { return };
        self.lock().retain(|_, upload| upload.since.elapsed() < retention);
        let Some((root, _, subdir)) = &self.storage else { return };
        let folder = root.join(subdir.trim_matches('/')).join(super::CHANNEL);
        match attachments::cleanup_older_than(&folder, retention) {
            Ok(0) => {}
            Ok(removed) => tracing::info!(removed, folder = %folder.display(), "old chat uploads deleted"),
            Err(error) => tracing::warn!(%error, folder = %folder.display(), "cannot clean old chat uploads"),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiting>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// `name` with an extension that says what the content is (`x.html` holding a PNG becomes `x.html.png`), so a
/// program that goes by the name opens it as what it is.
fn with_extension_of(name: &str, mime: &str) -> String {
    let fitting: &[&str] = match mime {
        "image/png" => &["png"],
        "image/jpeg" => &["jpg", "jpeg"],
        "image/gif" => &["gif"],
        "image/webp" => &["webp"],
        "audio/wav" => &["wav"],
        "audio/ogg" => &["ogg", "oga", "opus"],
        "audio/flac" => &["flac"],
        "audio/mpeg" => &["mp3"],
        "audio/mp4" => &["m4a", "mp4"],
        "audio/webm" => &["webm", "weba"],
        _ => return name.to_string(),
    };
    let extension = name.rsplit_once('.').map(|(_, ext)| ext.to_ascii_lowercase());
    if extension.is_some_and(|ext| fitting.contains(&ext.as_str())) {
        name.to_string()
    } else {
        format!("{name}.{}", fitting[0])
    }
}

/// The image or audio format the first bytes show; `None` for anything else.
pub fn sniff(bytes: &[u8]) -> Option<&'static str> {
    let at = |offset: usize, magic: &[u8]| bytes.get(offset..offset + magic.len()) == Some(magic);
    Some(match () {
        _ if at(0, b"\x89PNG\r\n\x1a\n") => "image/png",
        _ if at(0, b"\xff\xd8\xff") => "image/jpeg",
        _ if at(0, b"GIF87a") || at(0, b"GIF89a") => "image/gif",
        _ if at(0, b"RIFF") && at(8, b"WEBP") => "image/webp",
        _ if at(0, b"RIFF") && at(8, b"WAVE") => "audio/wav",
        _ if at(0, b"OggS") => "audio/ogg",
        _ if at(0, b"fLaC") => "audio/flac",
        _ if at(0, b"ID3") || (bytes.len() > 1 && bytes[0] == 0xff && bytes[1] & 0xe0 == 0xe0) => "audio/mpeg",
        _ if at(4, b"ftypM4A") => "audio/mp4",
        _ if at(0, b"\x1a\x45\xdf\xa3") => "audio/webm",
        _ => return None,
    })
}

/// 128 random bits as hex: an upload's id, and part of its file name.
fn uuid_like() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // Only uniqueness matters here (the id is checked against the chat that uploaded it).
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        bytes = now.as_nanos().to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uploads(dir: &std::path::Path, max_attachments: u32) -> Uploads {
        Uploads {
            limits: UploadLimits { max_attachments, max_image_bytes: 100, max_audio_bytes: 200, max_total_bytes: 250 },
            storage: Some((dir.to_path_buf(), false, "uploads/temp".into())),
            retention: Some(Duration::from_secs(3600)),
            waiting: Mutex::default(),
            arriving: tokio::sync::Semaphore::new(MAX_ARRIVING),
        }
    }

    #[test]
    fn uploads_reach_the_model_text_only_from_their_own_chat_and_within_the_limits() {
        let dir = tempfile::tempdir().unwrap();
        let up = uploads(dir.path(), 2);
        let png = [&b"\x89PNG\r\n\x1a\n"[..], &[1; 52]].concat();
        let a = up.accept(1, Some("cat.png"), Some("image/png"), &png).unwrap();
        let big = [&png[..], &[1; 41]].concat();
        assert!(matches!(up.accept(1, Some("big.png"), Some("image/png"), &big), Err(UploadError::TooLarge { .. })));
        // A text file that says it is a PNG is not one.
        assert!(matches!(
            up.accept(1, Some("x.png"), Some("image/png"), b"hi\n"),
            Err(UploadError::NotWhatItSays { .. })
        ));
        assert!(matches!(
            up.accept(1, Some("x.pdf"), Some("application/pdf"), &[1; 10]),
            Err(UploadError::WrongType(_))
        ));
        // Another chat cannot send chat 1's upload.
        assert!(up.take_for_message(2, "look", std::slice::from_ref(&a.upload_id)).is_err());
        let text = up.take_for_message(1, "look", std::slice::from_ref(&a.upload_id)).unwrap().unwrap();
        assert!(text.starts_with("look\n\nIncoming managed files:\n- cat.png (path=uploads/temp/web/1/"), "{text}");
        assert!(text.contains("mime=image/png, size=60, source=image"), "{text}");
        let stored = dir.path().join(text.split("path=").nth(1).unwrap().split(',').next().unwrap());
        assert_eq!(std::fs::read(stored).unwrap(), png);
        // A message naming an unknown upload takes none of the others.
        let b = up.accept(1, Some("b.png"), Some("image/png"), &png).unwrap();
        assert!(up.take_for_message(1, "x", &[b.upload_id.clone(), "bogus".into()]).is_err());
        assert!(up.take_for_message(1, "x", std::slice::from_ref(&b.upload_id)).unwrap().is_some());
        // Taken once.
        assert!(up.take_for_message(1, "again", &[a.upload_id]).is_err());
        // Three files when two are allowed: the third is named as skipped.
        let ids: Vec<String> = (0..3)
            .map(|i| {
                up.accept(1, Some(&format!("{i}.ogg")), Some("audio/ogg"), &[&b"OggS"[..], &[2; 46]].concat())
                    .unwrap()
                    .upload_id
            })
            .collect();
        let text = up.take_for_message(1, "", &ids).unwrap().unwrap();
        assert!(text.contains("Skipped attachments: 2.ogg (more than 2 attachments in one message)"), "{text}");
    }

    #[test]
    fn the_name_says_what_the_content_is() {
        assert_eq!(with_extension_of("x.html", "image/png"), "x.html.png");
        assert_eq!(with_extension_of("Cat.JPEG", "image/jpeg"), "Cat.JPEG");
        assert_eq!(with_extension_of("voice", "audio/ogg"), "voice.ogg");
    }

    #[test]
    fn one_chat_cannot_hold_every_waiting_upload() {
        let dir = tempfile::tempdir().unwrap();
        let up = uploads(dir.path(), 1);
        let png = [&b"\x89PNG\r\n\x1a\n"[..], &[1; 8]].concat();
        for _ in 0..6 {
            up.accept(7, Some("a.png"), Some("image/png"), &png).unwrap();
        }
        assert!(matches!(up.accept(7, Some("a.png"), Some("image/png"), &png), Err(UploadError::TooManyWaiting)));
        assert!(up.accept(8, Some("a.png"), Some("image/png"), &png).is_ok(), "another chat still uploads");
    }

    #[test]
    fn without_file_storage_uploads_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut up = uploads(dir.path(), 3);
        up.storage = None;
        assert!(matches!(
            up.accept(1, Some("a.png"), Some("image/png"), b"\x89PNG\r\n\x1a\n"),
            Err(UploadError::StorageOff)
        ));
    }
}
