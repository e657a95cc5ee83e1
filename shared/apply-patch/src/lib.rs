//! The `apply_patch` format: a small, line-oriented patch language that models write reliably.
//!
//! ```text
//! *** Begin Patch
//! *** Add File: notes/todo.md
//! +first line
//! *** Update File: src/app.py
//! *** Move to: src/main.py
//! @@ def main():
//! -    print("hi")
//! +    print("hello")
//! *** Delete File: old.txt
//! *** End Patch
//! ```
//!
//! [`parse_patch`] turns text into [`Hunk`]s; [`apply_chunks`] applies an update's chunks to a file's text
//! with the fuzzy matching MiniBot used (exact, then ignoring trailing whitespace, then all surrounding
//! whitespace, then typographic punctuation); [`plan_changes`] reads and checks every file a patch touches
//! before anything is written, and [`commit_changes`] writes the result, restoring the earlier contents if a
//! write fails part way.
//!
//! Nothing here decides which paths are allowed: callers pass a resolver that maps a path written in the
//! patch to a real path or refuses it, and (with [`plan_changes_in`] / [`commit_changes_in`]) the [`PatchFs`]
//! every read and write goes through.

mod endings;
mod engine;
mod fs;
mod matcher;
mod parser;

pub use engine::{
    FileChange, Options, Summary, apply_chunks, commit_changes, commit_changes_in, plan_changes, plan_changes_in,
};
pub use fs::{PatchFs, StdFs};
pub use parser::{Chunk, Hunk, UnifiedHeader, parse_patch};

/// Why a patch was refused. Nothing was written when any of these is returned by [`plan_changes`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    #[error("Invalid patch format: missing Begin/End markers")]
    MissingMarkers,
    #[error("patch rejected: empty patch")]
    Empty,
    #[error("no hunks found")]
    NoHunks,
    #[error("invalid patch line {line}: {message}")]
    InvalidLine { line: usize, message: String },
    #[error("Failed to find context '{context}' in {path}")]
    ContextNotFound { path: String, context: String },
    #[error("Failed to find expected lines in {path}:\n{lines}")]
    LinesNotFound { path: String, lines: String },
    #[error("Unified hunk location is ambiguous near line {line} in {path}")]
    Ambiguous { path: String, line: usize },
    #[error("Unified hunk did not match near line {line} in {path}")]
    NoMatchNear { path: String, line: usize },
    #[error("{path}: {message}")]
    Path { path: String, message: String },
    #[error("{path}: {message}")]
    Io { path: String, message: String },
}

impl PatchError {
    /// Whether the patch text itself is malformed (as opposed to not matching the files).
    pub fn is_format_error(&self) -> bool {
        matches!(self, Self::MissingMarkers | Self::Empty | Self::NoHunks | Self::InvalidLine { .. })
    }

    /// Whether the patch did not fit the current file contents.
    pub fn is_context_error(&self) -> bool {
        matches!(
            self,
            Self::ContextNotFound { .. }
                | Self::LinesNotFound { .. }
                | Self::Ambiguous { .. }
                | Self::NoMatchNear { .. }
        )
    }
}

pub type Result<T> = std::result::Result<T, PatchError>;
