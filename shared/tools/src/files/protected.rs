//! Files the model must not change on its own: the assistant's config file and its secrets vault. A file tool
//! that would write, move, delete or patch one of them (or a folder holding one) asks the user first, through
//! the turn's approver, whatever `[tools.approval]` says: a model that may edit its own settings could lift any
//! other limit it has.
//!
//! Paths are compared after resolving symbolic links, both the way the program opens the file (the link itself
//! counts: replacing it changes what is loaded) and the way the link points (writing through another link to the
//! same file counts too).

use super::root::real_path;
use minibot_agent::{APPROVAL_DENIED_CODE, ApprovalRequest, ToolContext, ToolError, ask_approval};
use minibot_config::Config;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// One protected file and how the user reads what it is.
#[derive(Debug, Clone)]
struct Protected {
    path: PathBuf,
    what: &'static str,
}

/// The protected files of one process.
#[derive(Debug, Clone, Default)]
pub struct ProtectedPaths {
    files: Vec<Protected>,
}

impl ProtectedPaths {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a file; a relative path is taken from the current folder.
    pub fn with(mut self, path: &Path, what: &'static str) -> Self {
        let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        self.files.push(Protected { path, what });
        self
    }

    /// The config file (where the defaults-only run would find one: `config.toml` in its folder) and the vault
    /// file (`[vault] path` against the config's folder, whether or not the vault is enabled: enabling it later
    /// must not load a file the model wrote).
    pub fn from_config(config: &Config) -> Self {
        Self::new().with(&config.config_file(), "config file").with(&config.vault_file(), "secrets vault file")
    }

    /// The protected file that changing `target` would change: `target` is it, or a folder that holds it.
    /// `target` is a path the file tools resolved (real folders, the last component as the tool acts on it).
    pub fn hit(&self, target: &Path) -> Option<(&Path, &'static str)> {
        self.files.iter().find_map(|file| {
            let hit = forms(&file.path).iter().any(|form| form.starts_with(target));
            hit.then_some((file.path.as_path(), file.what))
        })
    }

    /// Lets a change of `targets` go ahead when none is protected or the user approves it; otherwise the error
    /// with `tool_approval:denied`. `verb` says what the tool does ("writes", "deletes", ...), `args` are the
    /// call's arguments as the question shows them.
    pub async fn guard(
        &self,
        ctx: &ToolContext,
        tool: &str,
        args: &Value,
        verb: &str,
        targets: &[&Path],
    ) -> Result<(), ToolError> {
        let Some((path, what)) = targets.iter().find_map(|target| self.hit(target)) else {
            return Ok(());
        };
        let reason = format!("{verb} the assistant's {what} ({})", path.display());
        let request = ApprovalRequest::for_call(tool, None, args, Some(reason));
        ask_approval(ctx, request).await.map_err(|denied| {
            ToolError::respond(
                APPROVAL_DENIED_CODE,
                format!(
                    "{} is the assistant's {what}; changing it needs the user's approval. {denied}",
                    path.display()
                ),
            )
        })
    }
}

/// The file as the program opens it (real folder, the name as written, so a link counts as itself) and as it
/// really is (every link followed).
fn forms(path: &Path) -> Vec<PathBuf> {
    let mut out = Vec::with_capacity(2);
    if let (Some(parent), Some(name)) = (path.parent(), path.file_name()) {
        out.push(real_path(parent).map(|p| p.join(name)).unwrap_or_else(|_| path.to_path_buf()));
    }
    if let Ok(real) = real_path(path)
        && !out.contains(&real)
    {
        out.push(real);
    }
    if out.is_empty() {
        out.push(path.to_path_buf());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_and_folders_holding_the_file_count() {
        let dir = tempfile::tempdir().expect("tempdir");
        let real = dir.path().canonicalize().expect("canonical");
        std::fs::create_dir(real.join("etc")).expect("mkdir");
        std::fs::write(real.join("etc/config.toml"), "x").expect("write");
        std::os::unix::fs::symlink(real.join("etc/config.toml"), real.join("link.toml")).expect("symlink");
        let protected = ProtectedPaths::new().with(&real.join("link.toml"), "config file");
        assert!(protected.hit(&real.join("link.toml")).is_some(), "the link the program opens");
        assert!(protected.hit(&real.join("etc/config.toml")).is_some(), "the file it points to");
        assert!(protected.hit(&real.join("etc")).is_some(), "a folder holding the file");
        assert!(protected.hit(&real.join("etc/other.toml")).is_none());
        assert!(protected.hit(&real.join("etc/config.toml.bak")).is_none(), "components, not prefixes");
    }
}
