//! What `install_skill` is asked and what it answers: the request, the preview and install results, and the
//! errors with their stable codes.

use serde::Serialize;

/// Why an install or preview did not happen. [`InstallError::code`] is the `error_code` the model sees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InstallError {
    #[error("{0}")]
    InvalidSource(String),
    #[error("{0}")]
    Insecure(String),
    #[error("download failed: {0}")]
    Download(String),
    #[error("source refused: {0}")]
    Refused(String),
    #[error("{0}")]
    PathNotFound(String),
    #[error("{0}")]
    SkillNotFound(String),
    #[error("{0}")]
    SelectionRequired(String),
    #[error("preview the skill first (install: false) and pass its `hash` as expected_hash")]
    PreviewRequired,
    #[error("{0}")]
    HashMismatch(String),
    #[error("{0}")]
    InvalidName(String),
    #[error("{0}")]
    Exists(String),
    #[error("{0}")]
    InvalidDest(String),
    #[error("install failed: {0}")]
    Io(String),
}

impl InstallError {
    /// The stable code, as MiniBot and the bundled `install-skill` skill name them.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidSource(_) => "invalid_source",
            Self::Insecure(_) => "insecure_source",
            Self::Download(_) => "download_failed",
            Self::Refused(_) => "archive_refused",
            Self::PathNotFound(_) => "path_not_found",
            Self::SkillNotFound(_) => "skill_not_found",
            Self::SelectionRequired(_) => "skill_selection_required",
            Self::PreviewRequired => "preview_required",
            Self::HashMismatch(_) => "hash_mismatch",
            Self::InvalidName(_) => "invalid_skill_name",
            Self::Exists(_) => "skill_exists",
            Self::InvalidDest(_) => "invalid_dest",
            Self::Io(_) => "install_failed",
        }
    }
}

/// One `install_skill` call.
#[derive(Debug, Clone, Default)]
pub struct InstallRequest {
    pub source: String,
    /// Which skill, when the source holds several (name or folder name, any case).
    pub skill: Option<String>,
    /// `false`: preview only.
    pub install: bool,
    pub expected_hash: Option<String>,
    pub force: bool,
    /// One of the discovery folders; the write folder when `None`.
    pub dest: Option<String>,
}

/// A skill already available under the same name.
#[derive(Debug, Clone, Serialize)]
pub struct Existing {
    pub source: &'static str,
    pub path: String,
}

/// A valid skill found in a source.
#[derive(Debug, Clone, Serialize)]
pub struct Candidate {
    pub name: String,
    pub description: String,
    pub compatibility: Option<String>,
    /// Its folder inside the source ("." for the root).
    pub skill_path: String,
    pub hash: String,
    pub instructions_chars: usize,
    pub instructions_preview: String,
    pub existing: Option<Existing>,
    pub file_count: usize,
    pub files: Vec<String>,
}

/// A skill folder of the source that cannot be installed, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Rejected {
    pub skill_path: String,
    pub error: String,
}

/// What a preview found.
#[derive(Debug, Clone, Serialize)]
pub struct Preview {
    pub ok: bool,
    pub source: String,
    pub resolved_url: String,
    #[serde(rename = "ref")]
    pub reference: Option<String>,
    pub dest: String,
    pub skills: Vec<Candidate>,
    pub invalid: Vec<Rejected>,
}

/// What an install wrote.
#[derive(Debug, Clone, Serialize)]
pub struct Installed {
    pub ok: bool,
    pub source: String,
    pub resolved_url: String,
    #[serde(rename = "ref")]
    pub reference: Option<String>,
    pub dest: String,
    pub installed: String,
    pub path: String,
    pub hash: String,
    pub compatibility: Option<String>,
    pub lock_file: String,
}

/// The result of a call.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Outcome {
    Preview(Preview),
    Installed(Installed),
}
