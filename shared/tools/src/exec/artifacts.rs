//! Artifact export for `python_execute`: files the code wrote in its run folder that match the requested
//! globs and the allowed extensions are copied into managed storage before the folder is deleted.
//!
//! The code owns its run folder and may still be running in the background (a process that left the group),
//! so nothing in it is trusted: the folder is opened once as a handle, walked without following links, and
//! each file is opened by name from its folder's handle with `O_NOFOLLOW` and must be a regular file once
//! open. Copies go into the managed root through the root's handle, so a destination folder swapped for a
//! link (the code can reach the managed root too) is refused, not written through.

use crate::files::{Found, ManagedPath, ManagedRoot, WalkOptions, mime_for, open_regular, walk_files};
use cap_std::fs::{Dir, OpenOptions};
use globset::{GlobBuilder, GlobSetBuilder};
use minibot_agent::ToolError;
use minibot_config::PythonExecSection;
use serde_json::{Value, json};
use std::io::Read;
use std::ops::ControlFlow;
use std::path::Path;

/// Which artifacts to copy out of the run folder, checked before the code runs.
pub(crate) struct ArtifactPlan {
    globs: globset::GlobSet,
    files: ManagedRoot,
    destination: ManagedPath,
    max_files: usize,
}

impl ArtifactPlan {
    /// Checks the caller's artifact options before any code runs.
    pub(crate) fn new(
        c: &PythonExecSection,
        files: Option<&ManagedRoot>,
        requested_globs: Option<&[String]>,
        subdir: Option<&str>,
        max_artifacts: Option<i64>,
    ) -> Result<Self, ToolError> {
        if !c.artifacts_enabled {
            return Err(ToolError::respond("artifacts_disabled", "artifact export is turned off in config"));
        }
        let Some(files) = files else {
            return Err(ToolError::respond(
                "file_storage_unavailable",
                "artifacts need [tools.file_storage] enabled; run without save_artifacts",
            ));
        };
        let patterns: Vec<String> = match requested_globs {
            Some(globs) if !globs.is_empty() => globs.to_vec(),
            _ => c.artifacts_allowed_extensions.iter().map(|ext| format!("*{ext}")).collect(),
        };
        let mut set = GlobSetBuilder::new();
        for pattern in &patterns {
            if pattern.starts_with('/') || pattern.split('/').any(|p| p == "..") {
                return Err(ToolError::respond(
                    "invalid_artifact_options",
                    format!("glob `{pattern}` must stay inside the run folder"),
                ));
            }
            for candidate in [pattern.clone(), format!("**/{pattern}")] {
                let glob = GlobBuilder::new(&candidate).literal_separator(true).build().map_err(|e| {
                    ToolError::respond("invalid_artifact_options", format!("invalid glob `{pattern}`: {e}"))
                })?;
                set.add(glob);
            }
        }
        let globs = set
            .build()
            .map_err(|e| ToolError::respond("invalid_artifact_options", format!("invalid artifact globs: {e}")))?;
        let subdir = subdir.map_or_else(|| c.artifacts_default_subdir.clone(), str::to_string);
        let destination = files.resolve(&subdir)?;
        let max_files = match max_artifacts {
            None => c.artifacts_max_files as usize,
            Some(n) if n >= 1 => (n as usize).min(c.artifacts_max_files as usize),
            Some(_) => {
                return Err(ToolError::respond("invalid_artifact_options", "max_artifacts must be at least 1"));
            }
        };
        Ok(ArtifactPlan { globs, files: files.clone(), destination, max_files })
    }

    /// Copies matching files out of the run folder into managed storage. Links are never followed, so code
    /// cannot export `/etc/passwd` by linking to it, even by swapping a link in while the export runs. `run` is
    /// the handle on the run folder taken before the code ran, so moving the folder away meanwhile does not
    /// make the export walk another.
    pub(crate) fn export(&self, c: &PythonExecSection, run: &Dir) -> (Vec<Value>, Vec<Value>) {
        let plan = self;
        let allowed: Vec<String> = c.artifacts_allowed_extensions.iter().map(|e| e.to_lowercase()).collect();
        let mut saved = Vec::new();
        let mut skipped = Vec::new();
        let mut total = 0u64;
        // Opened when the first artifact is copied, so a run without artifacts creates no folder.
        let mut destination: Option<Dir> = None;
        let walk = WalkOptions { include_hidden: true, max_depth: None };
        let _ = walk_files(run, walk, &mut |found: Found<'_>| {
            if !plan.globs.is_match(found.relative) {
                return ControlFlow::Continue(());
            }
            let name = found.relative.to_string_lossy().into_owned();
            let skip = |reason: &str| json!({ "name": name, "reason": reason });
            let ext = found.relative.extension().map(|e| format!(".{}", e.to_string_lossy().to_lowercase()));
            if !ext.as_ref().is_some_and(|e| allowed.contains(e)) {
                skipped.push(skip("extension_not_allowed"));
                return ControlFlow::Continue(());
            }
            if saved.len() >= plan.max_files {
                skipped.push(skip("max_files_reached"));
                return ControlFlow::Continue(());
            }
            let (source, meta) = match open_regular(found.folder, found.name) {
                Ok(opened) => opened,
                Err(_) => {
                    skipped.push(skip("not_a_regular_file"));
                    return ControlFlow::Continue(());
                }
            };
            let size = meta.len();
            if size > c.artifacts_max_file_bytes.bytes() {
                skipped.push(skip("file_too_large"));
                return ControlFlow::Continue(());
            }
            if total + size > c.artifacts_max_total_bytes.bytes() {
                skipped.push(skip("total_size_exceeded"));
                return ControlFlow::Continue(());
            }
            let folder = match &destination {
                Some(folder) => folder,
                None => match plan.open_destination() {
                    Ok(folder) => destination.insert(folder),
                    Err(err) => {
                        skipped.push(skip(&format!("copy_failed: {err}")));
                        return ControlFlow::Continue(());
                    }
                },
            };
            // Copies no more than was measured, however the file grows in the meantime.
            match copy_unique(source.take(size), found.relative, folder) {
                Ok(file_name) => {
                    total += size;
                    let target = plan.destination.child(&file_name);
                    saved.push(json!({
                        "path": target.display(),
                        "path_absolute": target.absolute.display().to_string(),
                        "name": file_name,
                        "size_bytes": size,
                        "mime": mime_for(&target.absolute),
                    }));
                }
                Err(err) => skipped.push(skip(&format!("copy_failed: {err}"))),
            }
            ControlFlow::Continue(())
        });
        (saved, skipped)
    }

    /// The destination folder, created if needed, as a handle from the managed root's.
    fn open_destination(&self) -> std::io::Result<Dir> {
        self.files.create_dir_all(&self.destination)?;
        self.files.open_dir(&self.destination)
    }
}

/// Copies `source` (named `name` in the run folder) into `folder`, adding `-1`, `-2`, … before the extension if
/// the name is taken; returns the name it got.
fn copy_unique(mut source: impl Read, name: &Path, folder: &Dir) -> std::io::Result<String> {
    let stem = name.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "artifact".into());
    let ext = name.extension().map(|e| format!(".{}", e.to_string_lossy())).unwrap_or_default();
    for n in 0..1000 {
        let file_name = if n == 0 { format!("{stem}{ext}") } else { format!("{stem}-{n}{ext}") };
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        match folder.open_with(&file_name, &options) {
            Ok(mut file) => {
                std::io::copy(&mut source, &mut file)?;
                return Ok(file_name);
            }
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(err) => return Err(err),
        }
    }
    Err(std::io::Error::other("no free artifact name"))
}
