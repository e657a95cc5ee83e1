//! Files the model must not change on its own: everything the assistant runs or trusts (its config, the vault
//! and its password, its databases and logs, its specialists and prompts, the programs and scripts of its MCP
//! servers; `guarded.rs` lists them from the config). A file tool that would write, move, delete or patch one
//! of them, a folder holding one, or anything inside a guarded folder asks the user first, through the turn's
//! approver, whatever `[tools.approval]` says: a model that may edit what the assistant loads or starts could
//! lift any limit it has, or run its own code outside every sandbox at the next start.
//!
//! Paths are compared after resolving symbolic links, both the way the program opens the file (the link itself
//! counts: replacing it changes what is loaded) and the way the link points (writing through another link to the
//! same file counts too).

use super::root::real_path;
use minibot_agent::{APPROVAL_DENIED_CODE, ApprovalRequest, ToolContext, ToolError, ask_approval};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// One guarded path and how the user reads what it is.
#[derive(Debug, Clone)]
struct Protected {
    path: PathBuf,
    /// A whole noun phrase ("the assistant's agents folder", "MCP server `dice`'s script").
    what: String,
    /// Everything inside a guarded folder is guarded too.
    folder: bool,
    /// The assistant's own state (config, vault, password, data, logs): the managed folder may never hold it.
    state: bool,
}

/// How a path a tool would change meets a guarded one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relation {
    /// It is the guarded path.
    Is,
    /// It is a folder that holds the guarded path.
    Holds,
    /// It lies inside a guarded folder.
    Inside,
}

/// A guarded path a change would reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit<'a> {
    pub path: &'a Path,
    pub what: &'a str,
    pub relation: Relation,
}

impl Hit<'_> {
    /// What `target` is to the assistant, for the model and the log.
    pub fn describe(&self, target: &Path) -> String {
        let (path, what) = (self.path.display(), self.what);
        match self.relation {
            Relation::Is if target == self.path => format!("{path} is {what}"),
            Relation::Is => format!("{} is {what} ({path})", target.display()),
            Relation::Holds => format!("{} holds {what} ({path})", target.display()),
            Relation::Inside => format!("{} is inside {what} ({path})", target.display()),
        }
    }

    /// Why the user is asked: `verb` ("writes", "deletes", ...) and what the change reaches.
    fn reason(&self, verb: &str, target: &Path) -> String {
        let (path, what) = (self.path.display(), self.what);
        match self.relation {
            Relation::Is => format!("{verb} {what} ({path})"),
            Relation::Holds => format!("{verb} {}, which holds {what} ({path})", target.display()),
            Relation::Inside => format!("{verb} {}, inside {what} ({path})", target.display()),
        }
    }
}

/// The guarded paths of one process.
#[derive(Debug, Clone, Default)]
pub struct ProtectedPaths {
    entries: Vec<Protected>,
    /// Folders inside a guarded folder that stay the model's (the managed folder under `./data`).
    exempt: Vec<PathBuf>,
}

impl ProtectedPaths {
    pub fn new() -> Self {
        Self::default()
    }

    /// Guards a file (and every folder holding it); a relative path is taken from the current folder.
    pub fn file(self, path: &Path, what: impl Into<String>) -> Self {
        self.push(path, what.into(), false, false)
    }

    /// Guards a folder and everything inside it.
    pub fn folder(self, path: &Path, what: impl Into<String>) -> Self {
        self.push(path, what.into(), true, false)
    }

    /// Guards a file of the assistant's own state, which the managed folder may not hold
    /// ([`super::check_root`]).
    pub(super) fn state_file(self, path: &Path, what: impl Into<String>) -> Self {
        self.push(path, what.into(), false, true)
    }

    /// Guards a folder of the assistant's own state, as [`Self::state_file`] does a file.
    pub(super) fn state_folder(self, path: &Path, what: impl Into<String>) -> Self {
        self.push(path, what.into(), true, true)
    }

    /// Leaves `path` (and what is inside it) to the model where it lies inside a guarded folder: the managed
    /// folder is `./data/files`, inside the data folder, by default. A guarded path inside it stays guarded.
    pub fn except(mut self, path: &Path) -> Self {
        self.exempt.push(std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()));
        self
    }

    fn push(mut self, path: &Path, what: String, folder: bool, state: bool) -> Self {
        let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let known = self.entries.iter_mut().find(|e| e.path == path);
        match known {
            // A folder that is two things at once (prompts and agents in one folder) keeps its first name.
            Some(entry) => {
                entry.folder |= folder;
                entry.state |= state;
            }
            None => self.entries.push(Protected { path, what, folder, state }),
        }
        self
    }

    /// What changing `target` would reach: a guarded path that `target` is or holds, else a guarded folder it
    /// lies in. `target` is a path the file tools resolved (real folders, the last component as the tool acts
    /// on it).
    pub fn hit(&self, target: &Path) -> Option<Hit<'_>> {
        let direct = self.entries.iter().find_map(|entry| {
            let forms = forms(&entry.path);
            let relation = if forms.iter().any(|form| form == target) {
                Relation::Is
            } else if forms.iter().any(|form| form.starts_with(target)) {
                Relation::Holds
            } else {
                return None;
            };
            Some(Hit { path: &entry.path, what: &entry.what, relation })
        });
        direct.or_else(|| {
            self.entries.iter().filter(|entry| entry.folder).find_map(|entry| {
                let inside =
                    forms(&entry.path).iter().any(|form| target.starts_with(form) && !self.exempted(form, target));
                inside.then_some(Hit { path: &entry.path, what: &entry.what, relation: Relation::Inside })
            })
        })
    }

    /// Whether `target`, inside the guarded `folder`, lies in an exempt folder that is itself inside `folder`.
    fn exempted(&self, folder: &Path, target: &Path) -> bool {
        self.exempt
            .iter()
            .flat_map(|exempt| forms(exempt))
            .any(|exempt| exempt != folder && exempt.starts_with(folder) && target.starts_with(&exempt))
    }

    /// The assistant's own state that lies in `folder` (or is it), with what each is.
    pub(super) fn state_in(&self, folder: &Path) -> Vec<(&Path, &str)> {
        self.entries
            .iter()
            .filter(|entry| entry.state && forms(&entry.path).iter().any(|form| form.starts_with(folder)))
            .map(|entry| (entry.path.as_path(), entry.what.as_str()))
            .collect()
    }

    /// Every guarded path with what it is, in the order they were added.
    pub fn entries(&self) -> impl Iterator<Item = (&Path, &str)> {
        self.entries.iter().map(|entry| (entry.path.as_path(), entry.what.as_str()))
    }

    /// Lets a change of `targets` go ahead when none reaches a guarded path or the user approves it; otherwise
    /// the error with `tool_approval:denied`. `verb` says what the tool does ("writes", "deletes", ...), `args`
    /// are the call's arguments as the question shows them.
    pub async fn guard(
        &self,
        ctx: &ToolContext,
        tool: &str,
        args: &Value,
        verb: &str,
        targets: &[&Path],
    ) -> Result<(), ToolError> {
        let Some((target, hit)) = targets.iter().find_map(|target| self.hit(target).map(|hit| (*target, hit))) else {
            return Ok(());
        };
        let request = ApprovalRequest::for_call(tool, None, args, Some(hit.reason(verb, target)));
        ask_approval(ctx, request).await.map_err(|denied| {
            ToolError::respond(
                APPROVAL_DENIED_CODE,
                format!("{}; changing it needs the user's approval. {denied}", hit.describe(target)),
            )
        })
    }
}

/// The path as the program opens it (real folder, the name as written, so a link counts as itself) and as it
/// really is (every link followed).
pub(super) fn forms(path: &Path) -> Vec<PathBuf> {
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
#[path = "protected_tests.rs"]
mod tests;
