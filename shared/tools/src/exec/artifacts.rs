//! Artifact export for `python_execute`: files the code wrote in its run folder that match the requested
//! globs and the allowed extensions are copied into managed storage before the folder is deleted.

use crate::files::{ManagedPath, ManagedRoot, mime_for};
use globset::{GlobBuilder, GlobSetBuilder};
use minibot_agent::ToolError;
use minibot_config::PythonExecSection;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// Which artifacts to copy out of the run folder, checked before the code runs.
pub(crate) struct ArtifactPlan {
    globs: globset::GlobSet,
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
        Ok(ArtifactPlan { globs, destination, max_files })
    }

    /// Copies matching files out of the run folder into managed storage. Symlinks are never followed, so code
    /// cannot export `/etc/passwd` by linking to it.
    pub(crate) fn export(&self, c: &PythonExecSection, root: &Path, run_dir: &Path) -> (Vec<Value>, Vec<Value>) {
        let plan = self;
        let allowed: Vec<String> = c.artifacts_allowed_extensions.iter().map(|e| e.to_lowercase()).collect();
        let mut saved = Vec::new();
        let mut skipped = Vec::new();
        let mut total = 0u64;
        let walker = ignore::WalkBuilder::new(run_dir)
            .standard_filters(false)
            .follow_links(false)
            .sort_by_file_path(|a, b| a.cmp(b))
            .build();
        for entry in walker.flatten() {
            let Ok(rel) = entry.path().strip_prefix(run_dir) else {
                continue;
            };
            if !entry.file_type().is_some_and(|t| t.is_file()) || !plan.globs.is_match(rel) {
                continue;
            }
            let name = rel.to_string_lossy().into_owned();
            let skip = |reason: &str| json!({ "name": name, "reason": reason });
            let ext = entry.path().extension().map(|e| format!(".{}", e.to_string_lossy().to_lowercase()));
            if !ext.as_ref().is_some_and(|e| allowed.contains(e)) {
                skipped.push(skip("extension_not_allowed"));
                continue;
            }
            let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
            if saved.len() >= plan.max_files {
                skipped.push(skip("max_files_reached"));
                continue;
            }
            if size > c.artifacts_max_file_bytes.bytes() {
                skipped.push(skip("file_too_large"));
                continue;
            }
            if total + size > c.artifacts_max_total_bytes.bytes() {
                skipped.push(skip("total_size_exceeded"));
                continue;
            }
            match copy_unique(entry.path(), &plan.destination.absolute) {
                Ok(target) => {
                    total += size;
                    let shown = plan
                        .destination
                        .relative
                        .as_ref()
                        .and_then(|_| target.strip_prefix(root).ok())
                        .map_or_else(|| target.display().to_string(), |p| p.display().to_string());
                    saved.push(json!({
                        "path": shown,
                        "path_absolute": target.display().to_string(),
                        "name": target.file_name().map(|n| n.to_string_lossy().into_owned()),
                        "size_bytes": size,
                        "mime": mime_for(&target),
                    }));
                }
                Err(err) => skipped.push(skip(&format!("copy_failed: {err}"))),
            }
        }
        (saved, skipped)
    }
}

/// Copies `source` into `folder`, adding `-1`, `-2`, … before the extension if the name is taken.
fn copy_unique(source: &Path, folder: &Path) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(folder)?;
    let stem = source.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "artifact".into());
    let ext = source.extension().map(|e| format!(".{}", e.to_string_lossy())).unwrap_or_default();
    for n in 0..1000 {
        let name = if n == 0 { format!("{stem}{ext}") } else { format!("{stem}-{n}{ext}") };
        let target = folder.join(name);
        match std::fs::OpenOptions::new().write(true).create_new(true).open(&target) {
            Ok(mut file) => {
                let mut input = std::fs::File::open(source)?;
                std::io::copy(&mut input, &mut file)?;
                return Ok(target);
            }
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(err) => return Err(err),
        }
    }
    Err(std::io::Error::other("no free artifact name"))
}
