use crate::files::{ManagedPath, ManagedRoot, PathError, ProtectedPaths, is_escape};
use minibot_agent::{Tool, ToolContext, ToolError, ToolResult};
use minibot_apply_patch::{Options, PatchError, PatchFs, commit_changes_in, parse_patch, plan_changes_in};
use minibot_config::Config;
use serde::Deserialize;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What the patch engine sees of the workspace: it reads and writes through the workspace's handle, on the
/// paths [`ApplyPatch::resolve`] returned (relative inside the workspace, absolute outside it when that is
/// allowed).
struct WorkspaceFs<'a>(&'a ManagedRoot);

impl WorkspaceFs<'_> {
    fn managed(&self, path: &Path) -> ManagedPath {
        if path.is_absolute() {
            ManagedPath { absolute: path.to_path_buf(), relative: None }
        } else {
            ManagedPath { absolute: self.0.path().join(path), relative: Some(path.to_string_lossy().into_owned()) }
        }
    }
}

/// The handle's refusal to leave the workspace, in the words the resolver uses for the same refusal.
fn escape_message(err: std::io::Error) -> std::io::Error {
    if is_escape(&err) { std::io::Error::new(err.kind(), "path escapes workspace root") } else { err }
}

impl PatchFs for WorkspaceFs<'_> {
    fn is_dir(&self, path: &Path) -> bool {
        self.0.metadata(&self.managed(path)).is_ok_and(|m| m.is_dir())
    }

    fn is_file(&self, path: &Path) -> bool {
        self.0.metadata(&self.managed(path)).is_ok_and(|m| m.is_file())
    }

    fn read(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        let mut file = self.0.open_read(&self.managed(path)).map_err(escape_message)?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut file, &mut bytes)?;
        Ok(bytes)
    }

    /// A new file renamed over the old one, so a hard link to the old file keeps its content.
    fn write(&self, path: &Path, contents: &[u8]) -> std::io::Result<()> {
        let managed = self.managed(path);
        self.0.create_parent(&managed).map_err(escape_message)?;
        self.0.replace(&managed, contents).map_err(escape_message)
    }

    fn remove_file(&self, path: &Path) -> std::io::Result<()> {
        self.0.remove_file(&self.managed(path)).map_err(escape_message)
    }
}

pub struct ApplyPatch {
    workspace: ManagedRoot,
    options: Options,
    max_patch_bytes: u64,
    /// What the assistant runs or trusts: a patch that touches any of it asks the user first.
    protected: ProtectedPaths,
}

impl ApplyPatch {
    pub fn new(config: &Config) -> std::io::Result<Self> {
        let section = &config.tools.apply_patch;
        let root = config.resolve_path(&section.workspace_root);
        let confined = section.restrict_to_workspace && !section.allow_outside_workspace;
        Ok(Self {
            workspace: ManagedRoot::create(&root, !confined)?,
            options: Options { preserve_trailing_newline: section.preserve_trailing_newline },
            max_patch_bytes: section.max_patch_bytes.bytes(),
            protected: ProtectedPaths::from_config(config),
        })
    }

    /// The checked path: relative to the workspace when inside it (the engine hands it back to
    /// [`WorkspaceFs`], which opens it through the workspace's handle), absolute outside.
    fn resolve(&self, written: &str) -> Result<ManagedPath, PatchError> {
        // Absolute paths that point into the workspace are fine even when confined.
        let relative = match Path::new(written).strip_prefix(self.workspace.path()) {
            Ok(rest) => rest.to_string_lossy().into_owned(),
            Err(_) => written.to_string(),
        };
        self.workspace.resolve_required(&relative).map_err(|err| PatchError::Path {
            path: written.to_string(),
            message: match err {
                PathError::Absolute | PathError::Escapes | PathError::DanglingLink => {
                    "path escapes workspace root".into()
                }
                other => other.to_string(),
            },
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    patch_text: String,
}

const FORMAT_HINT: &str = "The patch must start with `*** Begin Patch`, end with `*** End Patch`, and contain \
    `*** Add File: <path>` (every line starting with +), `*** Delete File: <path>` or `*** Update File: <path>` \
    sections; update lines start with ' ' (context), '-' (remove) or '+' (add).";
const CONTEXT_HINT: &str = "The file does not contain those lines as written. Read the current file (read_file or \
    code_read) and write the patch again against its exact contents; include 3 lines of context around each change \
    and an `@@ <line>` anchor when the same lines occur more than once.";

impl Tool for ApplyPatch {
    type Args = Args;

    fn name(&self) -> &str {
        "apply_patch"
    }

    fn description(&self) -> String {
        format!(
            "Edit files with a patch. Format:\n*** Begin Patch\n*** Add File: path/new.txt\n+line\n*** Update File: \
             path/old.py\n*** Move to: path/renamed.py   (optional)\n@@ def anchor():\n context\n-removed\n+added\n\
             *** Delete File: path/gone.txt\n*** End Patch\nPaths are relative to the workspace {}. Every change is \
             checked before any file is written.",
            self.workspace.path().display()
        )
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": { "patch_text": { "type": "string", "description": "The whole patch, Begin to End." } },
            "required": ["patch_text"],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, ctx: &ToolContext) -> ToolResult {
        if args.patch_text.len() as u64 > self.max_patch_bytes {
            return Err(ToolError::respond(
                "patch_too_large",
                format!("patch is {} bytes; the limit is {}; split it", args.patch_text.len(), self.max_patch_bytes),
            ));
        }
        // Every path the patch touches, as resolved, to check against the protected files before anything is
        // written.
        let touched: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
        let resolve = |written: &str| {
            let path = self.resolve(written)?;
            touched.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(path.absolute.clone());
            Ok(match path.absolute.strip_prefix(self.workspace.path()) {
                Ok(inside) if path.inside_root() => {
                    if inside.as_os_str().is_empty() {
                        PathBuf::from(".")
                    } else {
                        inside.to_path_buf()
                    }
                }
                _ => path.absolute,
            })
        };
        let fs = WorkspaceFs(&self.workspace);
        let planned =
            parse_patch(&args.patch_text).and_then(|hunks| plan_changes_in(&fs, &hunks, &resolve, self.options));
        if planned.is_ok() {
            let touched = touched.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner());
            let targets: Vec<&Path> = touched.iter().map(PathBuf::as_path).collect();
            let shown = json!({ "patch_text": args.patch_text });
            self.protected.guard(ctx, "apply_patch", &shown, "patches", &targets).await?;
        }
        let outcome = planned.and_then(|(changes, summary)| commit_changes_in(&fs, &changes).map(|()| summary));
        match outcome {
            Ok(summary) => Ok(json!({
                "ok": true,
                "summary": summary.text(),
                "updated_files": summary.files(),
                "workspace_root": self.workspace.path().display().to_string(),
            })),
            Err(err) => {
                let hint = if err.is_format_error() {
                    Some(FORMAT_HINT)
                } else if err.is_context_error() {
                    Some(CONTEXT_HINT)
                } else {
                    None
                };
                let message = match hint {
                    Some(hint) => format!("apply_patch verification failed: {err}\n{hint}"),
                    None => format!("apply_patch verification failed: {err}"),
                };
                Err(ToolError::respond("apply_patch_failed", message))
            }
        }
    }
}
