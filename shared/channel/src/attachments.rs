//! The one policy for files users send, whatever the channel: which attachments are taken (count, size per
//! kind, total, MIME allow-list), under which name and path they are stored in the managed-file root, how they
//! are written (private, atomic), and how the model is told about them ("Incoming managed files").
//!
//! A channel only reads its own message format and fetches the bytes. Telegram asks [`admit`] before each
//! download (its sizes are known late); the web chat has the bytes in hand and calls [`intake`]. Both end with
//! [`compose`]. [`cleanup_older_than`] is the retention sweep for folders of uploads.

use minibot_tools::files::{ManagedRoot, PathError};
use std::fmt;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// The answer when a message carried only attachments and none of it could be used.
pub const NOT_PROCESSED: &str = "I could not process the attachment you sent.";
const STORAGE_OFF: &str =
    "I could not process the attachment you sent: file storage is turned off, so I cannot keep files.";
const MEDIA_OFF: &str = "I could not process the attachment you sent: attachments are turned off.";

/// Longest stored file name (without the `<message key>-` prefix), in bytes.
pub const MAX_NAME_BYTES: usize = 120;

/// What an attachment is, which picks its size limit and the `source=` the model reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A photo the channel re-encoded itself (Telegram's are always JPEG), so the MIME allow-list does not
    /// apply: the user could not choose its type.
    Photo,
    /// An image file as the user sent it (a browser upload).
    Image,
    Document,
    Audio,
    /// A voice note recorded in the client.
    Voice,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Photo => "photo",
            Self::Image => "image",
            Self::Document => "document",
            Self::Audio => "audio",
            Self::Voice => "voice",
        }
    }

    /// `image/*` is an image, `audio/*` audio, anything else a document.
    pub fn from_mime(mime: &str) -> Self {
        match normalize_mime(mime).split('/').next() {
            Some("image") => Self::Image,
            Some("audio") => Self::Audio,
            _ => Self::Document,
        }
    }
}

/// The limits of one channel. A limit of 0 refuses that kind outright.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    pub max_attachments: u32,
    /// Photos and images.
    pub max_image_bytes: u64,
    pub max_document_bytes: u64,
    /// Audio and voice.
    pub max_audio_bytes: u64,
    /// All attachments of one message together.
    pub max_total_bytes: u64,
    /// Lower-case MIME types, `type/*` allowed; empty = all. Applies to every kind but [`Kind::Photo`].
    pub allowed_mime_types: Vec<String>,
}

impl Limits {
    pub fn max_bytes(&self, kind: Kind) -> u64 {
        match kind {
            Kind::Photo | Kind::Image => self.max_image_bytes,
            Kind::Document => self.max_document_bytes,
            Kind::Audio | Kind::Voice => self.max_audio_bytes,
        }
    }
}

/// How many attachments and bytes this message has used so far.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub count: u32,
    pub bytes: u64,
}

impl Budget {
    pub fn take(&mut self, saved: &Saved) {
        self.count += 1;
        self.bytes += saved.size;
    }
}

/// Why an attachment was not kept; the text is what the model (and so the user) reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    MediaDisabled,
    StorageDisabled,
    TooMany {
        max: u32,
    },
    MimeRefused(String),
    TooLarge {
        limit: u64,
    },
    OverTotal {
        limit: u64,
    },
    /// The service named here (`"Telegram"`) did not hand the file over.
    Unavailable(&'static str),
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
            Self::Unavailable(service) => write!(f, "{service} did not provide the file"),
            Self::DownloadFailed => write!(f, "the download failed"),
            Self::SaveFailed => write!(f, "it could not be saved"),
        }
    }
}

/// A file saved under the managed root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Saved {
    pub name: String,
    /// Relative to the managed root (the absolute path when the root lets files live outside it).
    pub path: String,
    pub mime: String,
    pub size: u64,
    pub kind: Kind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The sanitised name, never the raw one the user sent.
    pub name: String,
    pub reason: SkipReason,
}

/// Every attachment refused for the same reason (attachments or storage turned off).
pub fn skip_all<'a>(names: impl IntoIterator<Item = &'a str>, reason: &SkipReason) -> Vec<Skipped> {
    names.into_iter().map(|name| Skipped { name: name.to_string(), reason: reason.clone() }).collect()
}

/// Whether an attachment may be fetched, and if so the most bytes the fetch may bring.
pub fn admit(
    kind: Kind,
    mime: &str,
    declared_size: Option<u64>,
    limits: &Limits,
    budget: Budget,
) -> Result<u64, SkipReason> {
    if budget.count >= limits.max_attachments {
        return Err(SkipReason::TooMany { max: limits.max_attachments });
    }
    if kind != Kind::Photo && !mime_allowed(mime, &limits.allowed_mime_types) {
        return Err(SkipReason::MimeRefused(mime.to_string()));
    }
    check_size(declared_size, kind, limits, budget)?;
    let remaining = limits.max_total_bytes.saturating_sub(budget.bytes);
    if remaining == 0 {
        return Err(SkipReason::OverTotal { limit: limits.max_total_bytes });
    }
    Ok(limits.max_bytes(kind).min(remaining))
}

/// Refuses a known size over the attachment's own limit or over what the message has left.
pub fn check_size(size: Option<u64>, kind: Kind, limits: &Limits, budget: Budget) -> Result<(), SkipReason> {
    let Some(size) = size else { return Ok(()) };
    let limit = limits.max_bytes(kind);
    if size > limit {
        return Err(SkipReason::TooLarge { limit });
    }
    if size > limits.max_total_bytes.saturating_sub(budget.bytes) {
        return Err(SkipReason::OverTotal { limit: limits.max_total_bytes });
    }
    Ok(())
}

/// Which limit a fetch that grew past what [`admit`] allowed ran into.
pub fn size_refusal(kind: Kind, limits: &Limits, budget: Budget) -> SkipReason {
    let limit = limits.max_bytes(kind);
    if limit <= limits.max_total_bytes.saturating_sub(budget.bytes) {
        SkipReason::TooLarge { limit }
    } else {
        SkipReason::OverTotal { limit: limits.max_total_bytes }
    }
}

fn mime_allowed(mime: &str, allowed: &[String]) -> bool {
    allowed.is_empty()
        || allowed
            .iter()
            .any(|a| a == mime || a.strip_suffix("/*").is_some_and(|kind| mime.split('/').next() == Some(kind)))
}

/// `type/subtype` in lower case, without parameters.
pub fn normalize_mime(mime: &str) -> String {
    mime.split(';').next().unwrap_or_default().trim().to_ascii_lowercase()
}

/// The declared MIME type when it looks like one, else a guess from the file name, else
/// `application/octet-stream`.
pub fn mime_or_guess(declared: Option<&str>, file_name: Option<&str>) -> String {
    declared
        .map(normalize_mime)
        .filter(|m| m.contains('/'))
        .or_else(|| file_name.and_then(|n| mime_guess::from_path(n).first()).map(|m| m.essence_str().to_string()))
        .unwrap_or_else(|| "application/octet-stream".into())
}

/// The extension for a file sent without a name (`mime_guess` is built without the reverse table).
pub fn extension_for(mime: &str) -> &'static str {
    match mime {
        "image/jpeg" => "jpg",
        "image/png" => "png",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "audio/ogg" | "audio/opus" => "ogg",
        "audio/webm" => "webm",
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

/// The sanitised name the user gave, or `<fallback_stem>.<extension of the MIME type>`.
pub fn file_name(given: Option<&str>, fallback_stem: &str, mime: &str) -> String {
    let fallback = format!("{fallback_stem}.{}", extension_for(mime));
    given.map_or_else(|| fallback.clone(), |name| sanitize_file_name(name, &fallback))
}

/// A name safe to store: the last path component only, no leading dots, letters, digits and a few plain
/// punctuation marks kept, everything else (separators, control and look-alike characters) turned into `_`,
/// at most [`MAX_NAME_BYTES`] with the extension kept. `fallback` when nothing usable is left.
pub fn sanitize_file_name(raw: &str, fallback: &str) -> String {
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
pub fn unique_name<'a>(name: &str, taken: impl Iterator<Item = &'a str> + Clone) -> String {
    let mut candidate = name.to_string();
    let mut n = 2;
    while taken.clone().any(|t| t == candidate) {
        candidate = format!("{n}-{name}");
        n += 1;
    }
    candidate
}

/// `<incoming_subdir>/<channel>/<chat_id>/<message_key>-<name>`, relative to the managed root. `name` must
/// already be sanitised; the channel, chat and key are reduced to letters, digits, `-` and `_` because a
/// browser may choose them, which leaves Telegram's numeric ids as they are.
pub fn target_path(
    incoming_subdir: &str,
    channel: &str,
    chat_id: impl fmt::Display,
    message_key: &str,
    name: &str,
) -> String {
    let subdir = incoming_subdir.trim_matches('/');
    let (channel, chat, key) = (path_part(channel), path_part(&chat_id.to_string()), path_part(message_key));
    let file = format!("{channel}/{chat}/{key}-{name}");
    if subdir.is_empty() { file } else { format!("{subdir}/{file}") }
}

fn path_part(raw: &str) -> String {
    if raw.is_empty() {
        return "_".into();
    }
    raw.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}

#[derive(Debug, thiserror::Error)]
pub enum SaveError {
    #[error("cannot place `{path}` under the managed root: {source}")]
    Place { path: String, source: PathError },
    #[error("cannot write `{path}`: {source}")]
    Write { path: String, source: std::io::Error },
}

/// Writes an attachment at `relative` (from [`target_path`]) and returns the path the model is shown.
///
/// Through the root's handle, as the file tools write: a folder swapped for a link mid-write cannot take the
/// file outside the root. The file is written private (0600, whatever the umask) under a hidden name next to
/// the target, then renamed over it, so a failed write leaves nothing and a message delivered twice replaces
/// its file whole. This blocks: async callers with large files should run it on a blocking thread.
pub fn save(root: &ManagedRoot, relative: &str, bytes: &[u8]) -> Result<String, SaveError> {
    let target = root.resolve(relative).map_err(|source| SaveError::Place { path: relative.to_string(), source })?;
    root.create_parent(&target)
        .and_then(|()| root.replace_with_mode(&target, bytes, minibot_sqlite::private_fs::FILE_MODE))
        .map_err(|source| SaveError::Write { path: target.absolute.display().to_string(), source })?;
    Ok(target.display())
}

/// One file a user sent whose bytes are already here (a browser upload). Name and MIME type are as the
/// client claimed them; neither is trusted.
#[derive(Debug, Clone, Copy)]
pub struct Upload<'a> {
    pub kind: Kind,
    pub name: Option<&'a str>,
    pub mime: Option<&'a str>,
    pub bytes: &'a [u8],
}

/// Applies the limits to uploads in order and saves those admitted at `path_for(<unique sanitised name>)`
/// (usually a [`target_path`]). Blocks like [`save`].
pub fn intake(
    root: &ManagedRoot,
    limits: &Limits,
    uploads: &[Upload<'_>],
    path_for: impl Fn(&str) -> String,
) -> (Vec<Saved>, Vec<Skipped>) {
    let mut budget = Budget::default();
    let mut saved: Vec<Saved> = Vec::new();
    let mut skipped = Vec::new();
    for upload in uploads {
        let mime = mime_or_guess(upload.mime, upload.name);
        let sanitised = file_name(upload.name, upload.kind.as_str(), &mime);
        let name = unique_name(&sanitised, saved.iter().map(|s| s.name.as_str()));
        let size = upload.bytes.len() as u64;
        let stored = admit(upload.kind, &mime, Some(size), limits, budget).and_then(|_| {
            save(root, &path_for(&name), upload.bytes).map_err(|error| {
                tracing::warn!(%error, "cannot save an uploaded attachment");
                SkipReason::SaveFailed
            })
        });
        match stored {
            Ok(path) => {
                let file = Saved { name, path, mime, size, kind: upload.kind };
                budget.take(&file);
                saved.push(file);
            }
            Err(reason) => skipped.push(Skipped { name: sanitised, reason }),
        }
    }
    (saved, skipped)
}

/// A user message as the model reads it, or why there is no turn to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prepared {
    /// The text for the model (the user's words plus the reply and file blocks).
    Text(String),
    /// Nothing to answer with a turn; this reply goes to the user instead.
    Refused(String),
    /// Nothing the bot handles (a sticker, a location): ignored.
    Nothing,
}

/// Puts the pieces together: the user's text, the skipped attachments, the channel's reply block, and the
/// "Incoming managed files" block (each file tagged with `caption`). A message with no text and no saved file
/// is refused when something was skipped, else nothing.
pub fn compose(
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

/// The "Incoming managed files" block.
pub fn files_block(saved: &[Saved], caption: Option<&str>) -> String {
    let caption = caption.map(one_line).filter(|c| !c.is_empty());
    let mut block = String::from("Incoming managed files:");
    for file in saved {
        block.push_str(&format!(
            "\n- {} (path={}, mime={}, size={}, source={}",
            file.name,
            file.path,
            file.mime,
            file.size,
            file.kind.as_str()
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

/// Deletes the files under `root_dir` last modified more than `max_age` ago, and the folders that are left
/// empty and are as old (a fresh empty folder may be an upload about to be written). Returns how many files
/// went. Links are neither followed nor removed, and every step goes through a handle on `root_dir`, so
/// nothing outside it is touched. A missing `root_dir` is nothing to clean.
pub fn cleanup_older_than(root_dir: &Path, max_age: Duration) -> std::io::Result<usize> {
    let Some(cutoff) = SystemTime::now().checked_sub(max_age) else { return Ok(0) };
    let dir = match cap_std::fs::Dir::open_ambient_dir(root_dir, cap_std::ambient_authority()) {
        Ok(dir) => dir,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(error) => return Err(error),
    };
    sweep(&dir, cutoff)
}

fn sweep(dir: &cap_std::fs::Dir, cutoff: SystemTime) -> std::io::Result<usize> {
    let mut removed = 0;
    for entry in dir.entries()? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let old = entry.metadata()?.modified()?.into_std() < cutoff;
        if kind.is_dir() {
            // The mtime was read before the sweep: removing files inside makes the folder look new.
            removed += sweep(&entry.open_dir()?, cutoff)?;
            if old {
                // Fails, as it should, when files are left inside.
                let _ = entry.remove_dir();
            }
        } else if kind.is_file() && old {
            entry.remove_file()?;
            removed += 1;
        }
    }
    Ok(removed)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn limits() -> Limits {
        Limits {
            max_attachments: 3,
            max_image_bytes: 100,
            max_document_bytes: 200,
            max_audio_bytes: 200,
            max_total_bytes: 250,
            allowed_mime_types: vec![],
        }
    }

    /// The web chat's shape: images and audio only, three at most.
    fn web_limits() -> Limits {
        Limits {
            max_attachments: 3,
            max_image_bytes: 10,
            max_document_bytes: 0,
            max_audio_bytes: 20,
            max_total_bytes: 30,
            allowed_mime_types: vec!["image/*".into(), "audio/*".into()],
        }
    }

    fn saved(name: &str, kind: Kind) -> Saved {
        Saved {
            name: name.into(),
            path: format!("uploads/temp/telegram/5/7-{name}"),
            mime: "image/jpeg".into(),
            size: 42,
            kind,
        }
    }

    fn text_of(prepared: Prepared) -> String {
        match prepared {
            Prepared::Text(text) => text,
            other => panic!("expected text, got {other:?}"),
        }
    }

    fn image<'a>(name: &'a str, bytes: &'a [u8]) -> Upload<'a> {
        Upload { kind: Kind::Image, name: Some(name), mime: Some("image/png"), bytes }
    }

    fn web_intake(dir: &Path, uploads: &[Upload<'_>]) -> (Vec<Saved>, Vec<Skipped>) {
        let root = ManagedRoot::create(dir, false).unwrap();
        intake(&root, &web_limits(), uploads, |name| target_path("uploads/temp", "web", "c1", "m1", name))
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
    fn nameless_files_are_named_after_their_kind_and_type() {
        assert_eq!(file_name(None, "voice", "audio/ogg"), "voice.ogg");
        assert_eq!(file_name(None, "audio", "audio/mpeg"), "audio.mp3");
        assert_eq!(file_name(Some("../x.PDF"), "document", "application/pdf"), "x.PDF");
        assert_eq!(file_name(Some(".."), "image", "image/png"), "image.png");
        assert_eq!(mime_or_guess(None, Some("x.PDF")), "application/pdf");
        assert_eq!(mime_or_guess(Some("nonsense"), None), "application/octet-stream");
        assert_eq!(Kind::from_mime("Image/PNG"), Kind::Image);
        assert_eq!(Kind::from_mime("audio/webm;codecs=opus"), Kind::Audio);
        assert_eq!(Kind::from_mime("application/pdf"), Kind::Document);
    }

    #[test]
    fn target_path_is_under_the_incoming_folder() {
        assert_eq!(target_path("uploads/temp", "telegram", -100, "7", "a.pdf"), "uploads/temp/telegram/-100/7-a.pdf");
        assert_eq!(target_path("/in/", "telegram", 5, "1", "photo.jpg"), "in/telegram/5/1-photo.jpg");
        assert_eq!(target_path("", "telegram", 5, "1", "photo.jpg"), "telegram/5/1-photo.jpg");
        // A chat or key a browser chose cannot add folders or climb out.
        assert_eq!(target_path("in", "web", "../..", "a/b", "x.png"), "in/web/_____/a_b-x.png");
        assert_eq!(target_path("in", "web", "", "", "x.png"), "in/web/_/_-x.png");
    }

    #[test]
    fn duplicate_names_get_a_prefix() {
        assert_eq!(unique_name("a.pdf", ["b.pdf"].into_iter()), "a.pdf");
        assert_eq!(unique_name("a.pdf", ["a.pdf", "2-a.pdf"].into_iter()), "3-a.pdf");
    }

    #[test]
    fn limits_decide_what_is_downloaded() {
        let limits = limits();
        let pdf = "application/pdf";
        let fresh = Budget::default();
        assert_eq!(admit(Kind::Document, pdf, Some(150), &limits, fresh), Ok(200));
        assert_eq!(admit(Kind::Document, pdf, Some(201), &limits, fresh), Err(SkipReason::TooLarge { limit: 200 }));
        // The total left (250 - 100) caps the download.
        let used = Budget { count: 1, bytes: 100 };
        assert_eq!(admit(Kind::Document, pdf, None, &limits, used), Ok(150));
        assert_eq!(admit(Kind::Document, pdf, Some(160), &limits, used), Err(SkipReason::OverTotal { limit: 250 }));
        let full = Budget { count: 1, bytes: 250 };
        assert_eq!(admit(Kind::Document, pdf, None, &limits, full), Err(SkipReason::OverTotal { limit: 250 }));
        let many = Budget { count: 3, bytes: 0 };
        assert_eq!(admit(Kind::Document, pdf, None, &limits, many), Err(SkipReason::TooMany { max: 3 }));
        assert_eq!(
            admit(Kind::Photo, "image/jpeg", Some(101), &limits, fresh),
            Err(SkipReason::TooLarge { limit: 100 })
        );
    }

    #[test]
    fn the_mime_list_applies_to_everything_but_photos() {
        let limits = Limits { allowed_mime_types: vec!["application/pdf".into(), "audio/*".into()], ..limits() };
        let fresh = Budget::default();
        assert!(admit(Kind::Document, "application/pdf", None, &limits, fresh).is_ok());
        assert_eq!(
            admit(Kind::Document, "application/zip", None, &limits, fresh),
            Err(SkipReason::MimeRefused("application/zip".into()))
        );
        assert!(admit(Kind::Voice, "audio/ogg", None, &limits, fresh).is_ok());
        assert!(admit(Kind::Photo, "image/jpeg", None, &limits, fresh).is_ok());
        assert_eq!(
            admit(Kind::Image, "image/png", None, &limits, fresh),
            Err(SkipReason::MimeRefused("image/png".into()))
        );
        assert_eq!(normalize_mime("Application/PDF; charset=x"), "application/pdf");
    }

    #[test]
    fn an_oversized_download_names_the_limit_it_hit() {
        let limits = limits();
        assert_eq!(size_refusal(Kind::Document, &limits, Budget::default()), SkipReason::TooLarge { limit: 200 });
        let used = Budget { count: 1, bytes: 100 };
        assert_eq!(size_refusal(Kind::Document, &limits, used), SkipReason::OverTotal { limit: 250 });
    }

    #[test]
    fn the_files_block_lists_each_file() {
        let files = [saved("photo.jpg", Kind::Photo)];
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
    fn compose_orders_text_reply_and_files() {
        let reply = "Telegram reply context:\n- replying to message 3 from bob: x";
        let files = [saved("photo.jpg", Kind::Photo)];
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

        assert_eq!(compose(None, None, None, &[], &skipped), Prepared::Refused(NOT_PROCESSED.into()));
        let off = skip_all(["photo.jpg"], &SkipReason::StorageDisabled);
        match compose(None, None, None, &[], &off) {
            Prepared::Refused(answer) => assert!(answer.contains("file storage is turned off"), "{answer}"),
            other => panic!("expected a refusal, got {other:?}"),
        }
        let text = text_of(compose(Some("hi"), None, None, &[], &off));
        assert!(text.ends_with("Skipped attachments: photo.jpg (file storage is turned off)"), "{text}");
        let off = skip_all(["a", "b"], &SkipReason::MediaDisabled);
        assert_eq!(
            compose(None, None, None, &[], &off),
            Prepared::Refused("I could not process the attachment you sent: attachments are turned off.".into())
        );
        assert_eq!(SkipReason::Unavailable("Telegram").to_string(), "Telegram did not provide the file");
    }

    #[test]
    fn a_message_without_content_is_nothing() {
        assert_eq!(compose(None, Some("Telegram reply context:"), None, &[], &[]), Prepared::Nothing);
    }

    #[test]
    fn an_upload_is_stored_privately_where_the_model_is_told() {
        let dir = tempfile::tempdir().unwrap();
        let (saved, skipped) = web_intake(dir.path(), &[image("cat.png", b"png")]);
        assert!(skipped.is_empty(), "{skipped:?}");
        assert_eq!(saved[0].path, "uploads/temp/web/c1/m1-cat.png");
        let on_disk = dir.path().join(&saved[0].path);
        assert_eq!(std::fs::read(&on_disk).unwrap(), b"png");
        assert_eq!(std::fs::metadata(&on_disk).unwrap().permissions().mode() & 0o777, 0o600);
        let text = text_of(compose(Some("what is it?"), None, None, &saved, &skipped));
        assert_eq!(
            text,
            "what is it?\n\nIncoming managed files:\n- cat.png (path=uploads/temp/web/c1/m1-cat.png, \
             mime=image/png, size=3, source=image)"
        );
    }

    #[test]
    fn an_image_over_its_limit_is_refused_with_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let (saved, skipped) = web_intake(dir.path(), &[image("big.png", &[0; 11])]);
        assert!(saved.is_empty());
        assert_eq!(skipped, [Skipped { name: "big.png".into(), reason: SkipReason::TooLarge { limit: 10 } }]);
        let text = text_of(compose(Some("look"), None, None, &saved, &skipped));
        assert_eq!(text, "look\n\nSkipped attachments: big.png (larger than the 10-byte limit)");
        assert!(!dir.path().join("uploads/temp/web/c1/m1-big.png").exists());
    }

    #[test]
    fn a_fourth_attachment_is_refused_when_three_are_allowed() {
        let dir = tempfile::tempdir().unwrap();
        let uploads = [image("a.png", b"1"), image("a.png", b"2"), image("c.png", b"3"), image("d.png", b"4")];
        let (saved, skipped) = web_intake(dir.path(), &uploads);
        let names: Vec<&str> = saved.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a.png", "2-a.png", "c.png"]);
        assert_eq!(std::fs::read(dir.path().join("uploads/temp/web/c1/m1-2-a.png")).unwrap(), b"2");
        assert_eq!(skipped, [Skipped { name: "d.png".into(), reason: SkipReason::TooMany { max: 3 } }]);
        assert_eq!(skipped[0].reason.to_string(), "more than 3 attachments in one message");
    }

    #[test]
    fn the_total_limit_refuses_what_no_longer_fits() {
        let dir = tempfile::tempdir().unwrap();
        let voice = Upload { kind: Kind::Voice, name: None, mime: Some("audio/ogg"), bytes: &[0; 20] };
        let uploads = [voice, image("a.png", &[0; 10]), image("b.png", &[0; 1])];
        let (saved, skipped) = web_intake(dir.path(), &uploads);
        let names: Vec<&str> = saved.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["voice.ogg", "a.png"]);
        assert_eq!(skipped, [Skipped { name: "b.png".into(), reason: SkipReason::OverTotal { limit: 30 } }]);
        assert_eq!(skipped[0].reason.to_string(), "over the 30-byte total for one message");
    }

    #[test]
    fn types_outside_the_list_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let pdf = Upload { kind: Kind::Document, name: Some("a.pdf"), mime: None, bytes: b"%PDF" };
        let (saved, skipped) = web_intake(dir.path(), &[pdf]);
        assert!(saved.is_empty());
        assert_eq!(skipped[0].reason.to_string(), "type application/pdf is not allowed");
    }

    #[test]
    fn hostile_names_are_stored_inside_under_a_plain_name() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let uploads = [image("../../etc/passwd", b"1"), image("\u{202e}gpj.exe", b"2"), image("..", b"3")];
        let (saved, skipped) = web_intake(&root, &uploads);
        assert!(skipped.is_empty(), "{skipped:?}");
        let paths: Vec<&str> = saved.iter().map(|s| s.path.as_str()).collect();
        assert_eq!(
            paths,
            ["uploads/temp/web/c1/m1-passwd", "uploads/temp/web/c1/m1-_gpj.exe", "uploads/temp/web/c1/m1-image.png"]
        );
        for file in &saved {
            assert!(root.join(&file.path).is_file(), "{}", file.path);
        }
        // Nothing landed next to the root.
        let beside: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(beside, ["root"]);
    }

    #[test]
    fn a_redelivered_message_replaces_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let root = ManagedRoot::create(dir.path(), false).unwrap();
        let path = target_path("in", "telegram", 5, "7", "a.pdf");
        assert_eq!(save(&root, &path, b"old").unwrap(), "in/telegram/5/7-a.pdf");
        save(&root, &path, b"new").unwrap();
        assert_eq!(std::fs::read(dir.path().join(&path)).unwrap(), b"new");
        let files: Vec<_> = std::fs::read_dir(dir.path().join("in/telegram/5")).unwrap().collect();
        assert_eq!(files.len(), 1, "no temporary file is left behind");
        let error = save(&root, "../outside", b"x").unwrap_err();
        assert!(error.to_string().contains("`../outside`"), "{error}");
    }

    fn age(path: &Path, hours: u64) {
        let when = SystemTime::now() - Duration::from_secs(hours * 3600);
        std::fs::File::options().write(true).open(path).unwrap().set_modified(when).unwrap();
    }

    fn age_dir(path: &Path, hours: u64) {
        let when = SystemTime::now() - Duration::from_secs(hours * 3600);
        std::fs::File::open(path).unwrap().set_modified(when).unwrap();
    }

    #[test]
    fn cleanup_removes_only_old_files_and_stays_inside() {
        let dir = tempfile::tempdir().unwrap();
        let uploads = dir.path().join("web");
        let chat = uploads.join("c1");
        std::fs::create_dir_all(&chat).unwrap();
        let outside = dir.path().join("keep.txt");
        std::fs::write(&outside, "outside").unwrap();
        age(&outside, 48);
        for (name, hours) in [("old.png", 30), ("new.png", 1)] {
            std::fs::write(chat.join(name), name).unwrap();
            age(&chat.join(name), hours);
        }
        // A link to an old file outside, and a link to a folder outside: neither is followed.
        std::os::unix::fs::symlink(&outside, chat.join("link.txt")).unwrap();
        std::os::unix::fs::symlink(dir.path(), uploads.join("up")).unwrap();
        let empty_old = uploads.join("c2");
        std::fs::create_dir(&empty_old).unwrap();
        std::fs::write(empty_old.join("gone.png"), "x").unwrap();
        age(&empty_old.join("gone.png"), 30);
        age_dir(&empty_old, 30);
        let fresh_empty = uploads.join("c3");
        std::fs::create_dir(&fresh_empty).unwrap();

        let removed = cleanup_older_than(&uploads, Duration::from_secs(24 * 3600)).unwrap();

        assert_eq!(removed, 2);
        assert!(!chat.join("old.png").exists());
        assert!(chat.join("new.png").exists());
        assert!(chat.join("link.txt").symlink_metadata().is_ok());
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "outside");
        assert!(!empty_old.exists(), "an old folder left empty goes");
        assert!(fresh_empty.exists(), "a fresh empty folder may be an upload in progress");
        assert!(chat.exists());
        assert!(uploads.exists());
    }

    #[test]
    fn cleanup_of_a_missing_folder_is_nothing() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(cleanup_older_than(&dir.path().join("none"), Duration::from_secs(1)).unwrap(), 0);
    }
}
