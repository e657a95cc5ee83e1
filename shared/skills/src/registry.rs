//! The discovered skills, re-read when a `SKILL.md` changes.
//!
//! Every read ([`SkillRegistry::skills`], [`SkillRegistry::get`]) first fingerprints the discovery folders:
//! (path, mtime in ns, size) of each `<root>/<dir>/SKILL.md`. Only a changed fingerprint re-parses, so a skill
//! written, edited or deleted mid-conversation shows on the next call, and an idle call costs one `stat` per
//! skill. Invalid skills are logged and skipped; on a name collision the earlier folder wins.

use crate::bundled::{BUNDLED, BUNDLED_PREFIX};
use crate::frontmatter::parse_skill_md;
use crate::line::{CATALOG_DESCRIPTION_CHARS, CATALOG_NAME_CHARS, one_line};
use crate::rank::{self, Ranked};
use crate::settings::{Root, SkillSettings, SkillSource};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::UNIX_EPOCH;

/// The most resource files `activate_skill` lists for one skill; a skill folder is not a file tree to browse.
pub const MAX_RESOURCES: usize = 500;
/// The folder an install writes before renaming it into place; never a skill.
pub(crate) const STAGING_PREFIX: &str = ".install-";

/// One usable skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    pub compatibility: Option<String>,
    /// The instructions, trimmed.
    pub body: String,
    pub source: SkillSource,
    /// Its folder; `None` for a bundled skill.
    pub dir: Option<PathBuf>,
}

impl Skill {
    /// The folder as shown to the model: the path, or `bundled:<name>`.
    pub fn dir_label(&self) -> String {
        match &self.dir {
            Some(dir) => dir.to_string_lossy().into_owned(),
            None => format!("{BUNDLED_PREFIX}{}", self.name),
        }
    }

    /// The other files of its folder (relative, `/`-separated, sorted), read now; none for a bundled skill.
    pub fn resources(&self) -> Vec<String> {
        let Some(dir) = &self.dir else { return Vec::new() };
        let mut found = Vec::new();
        collect_files(dir, dir, &mut found);
        found.sort();
        found.truncate(MAX_RESOURCES);
        found
    }
}

fn collect_files(base: &Path, dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        if out.len() > MAX_RESOURCES {
            return;
        }
        let path = entry.path();
        let Ok(kind) = entry.file_type() else { continue };
        // Links are not followed into folders: a link to `/` would list the machine.
        if kind.is_dir() {
            collect_files(base, &path, out);
        } else if path.is_file()
            && path != base.join("SKILL.md")
            && let Ok(relative) = path.strip_prefix(base)
        {
            out.push(relative.to_string_lossy().replace('\\', "/"));
        }
    }
}

type Fingerprint = Vec<(PathBuf, u128, u64)>;

struct Loaded {
    fingerprint: Option<Fingerprint>,
    skills: Arc<[Arc<Skill>]>,
}

/// The skills of one [`SkillSettings`]. Cheap to share behind an `Arc`; reads are serialised by a lock held
/// while a changed folder is re-read.
pub struct SkillRegistry {
    settings: SkillSettings,
    loaded: Mutex<Loaded>,
}

impl SkillRegistry {
    pub fn new(settings: SkillSettings) -> Self {
        Self { settings, loaded: Mutex::new(Loaded { fingerprint: None, skills: Arc::from(Vec::new()) }) }
    }

    /// The registry `[tools.skills]` describes (see [`SkillSettings::from_config`]).
    pub fn from_config(config: &minibot_config::Config) -> Self {
        Self::new(SkillSettings::from_config(config))
    }

    pub fn settings(&self) -> &SkillSettings {
        &self.settings
    }

    /// Where new skills go.
    pub fn write_dir(&self) -> &Path {
        &self.settings.write_dir
    }

    /// The folders searched, in priority order, then `bundled:` when the bundled tier is on.
    pub fn discovery_paths(&self) -> Vec<String> {
        let mut paths: Vec<String> =
            self.settings.roots.iter().map(|root| root.path.to_string_lossy().into_owned()).collect();
        if self.settings.native {
            paths.push(BUNDLED_PREFIX.to_string());
        }
        paths
    }

    /// Every usable skill, first-found order, re-read when a `SKILL.md` changed. Empty while skills are off.
    pub fn skills(&self) -> Arc<[Arc<Skill>]> {
        if !self.settings.enabled {
            return Arc::from(Vec::new());
        }
        let fingerprint = fingerprint(&self.settings.roots);
        let mut loaded = self.loaded.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if loaded.fingerprint.as_ref() != Some(&fingerprint) {
            loaded.skills = load(&self.settings).into_iter().map(Arc::new).collect();
            loaded.fingerprint = Some(fingerprint);
        }
        Arc::clone(&loaded.skills)
    }

    /// The skill of exactly this name.
    pub fn get(&self, name: &str) -> Option<Arc<Skill>> {
        self.skills().iter().find(|skill| skill.name == name).cloned()
    }

    /// Up to [`rank::MAX_MATCHES`] skills ranked against `query` (all of them by name without one).
    pub fn search(&self, query: Option<&str>) -> Ranked {
        rank::rank(&self.skills(), query)
    }

    /// The system prompt's skill catalog: one `- name: description` line per skill, by name, under a line
    /// telling the model to activate them. Each entry is held to one line ([`one_line`]): names to
    /// [`CATALOG_NAME_CHARS`], descriptions to [`CATALOG_DESCRIPTION_CHARS`]. `None` when skills are off, `preload_catalog` is off, or there is
    /// no skill.
    pub fn catalog_prompt(&self) -> Option<String> {
        if !self.settings.enabled || !self.settings.preload_catalog {
            return None;
        }
        let skills = self.skills();
        if skills.is_empty() {
            return None;
        }
        let mut sorted: Vec<&Arc<Skill>> = skills.iter().collect();
        sorted.sort_by(|a, b| a.name.cmp(&b.name));
        let mut lines =
            vec!["Available skills (call activate_skill with the exact skill name to load full instructions):".into()];
        for skill in sorted {
            lines.push(format!("- {}: {}", one_line(&skill.name, CATALOG_NAME_CHARS), describe(&skill.description)));
        }
        Some(lines.join("\n"))
    }
}

/// A description as listed: on one line, at most [`CATALOG_DESCRIPTION_CHARS`] characters (see [`one_line`]),
/// or a placeholder when there is none.
pub fn describe(description: &str) -> String {
    match one_line(description, CATALOG_DESCRIPTION_CHARS) {
        line if line.is_empty() => "No description provided.".into(),
        line => line,
    }
}

/// The `SKILL.md` candidates of every root: `<root>/<dir>/SKILL.md`, folders sorted by name.
fn candidates(root: &Path) -> Vec<(PathBuf, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(root) else { return Vec::new() };
    let mut dirs: Vec<PathBuf> = entries
        .flatten()
        .filter(|entry| !entry.file_name().to_string_lossy().starts_with(STAGING_PREFIX))
        .map(|entry| entry.path())
        .filter(|path| path.is_dir())
        .collect();
    dirs.sort();
    dirs.into_iter().map(|dir| (dir.join("SKILL.md"), dir)).filter(|(file, _)| file.is_file()).collect()
}

fn fingerprint(roots: &[Root]) -> Fingerprint {
    let mut entries = Vec::new();
    for root in roots {
        for (file, _) in candidates(&root.path) {
            let Ok(meta) = std::fs::metadata(&file) else { continue };
            let mtime = meta.modified().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map(|d| d.as_nanos());
            entries.push((file, mtime.unwrap_or(0), meta.len()));
        }
    }
    entries
}

fn load(settings: &SkillSettings) -> Vec<Skill> {
    let mut skills: Vec<Skill> = Vec::new();
    let keep = |skill: Skill, skills: &mut Vec<Skill>| {
        if let Some(kept) = skills.iter().find(|kept| kept.name == skill.name) {
            tracing::warn!(
                skill = %skill.name,
                skipped = %skill.dir_label(),
                kept = %kept.dir_label(),
                "skill name collision: the earlier folder takes precedence"
            );
        } else {
            skills.push(skill);
        }
    };
    for root in &settings.roots {
        for (file, dir) in candidates(&root.path) {
            let parsed = std::fs::read_to_string(&file).map_err(|e| format!("could not read skill file: {e}"));
            match parsed.and_then(|text| parse_skill_md(&text)) {
                Ok(doc) => keep(
                    Skill {
                        name: doc.name,
                        description: doc.description,
                        compatibility: doc.compatibility,
                        body: doc.body,
                        source: root.source,
                        dir: Some(dir),
                    },
                    &mut skills,
                ),
                Err(error) => tracing::warn!(path = %file.display(), %error, "invalid skill, skipping"),
            }
        }
    }
    if settings.native {
        for bundled in BUNDLED {
            if settings.hidden_native.iter().any(|hidden| hidden == bundled.name) {
                continue;
            }
            match parse_skill_md(bundled.text) {
                Ok(doc) => keep(
                    Skill {
                        name: doc.name,
                        description: doc.description,
                        compatibility: doc.compatibility,
                        body: doc.body,
                        source: SkillSource::Native,
                        dir: None,
                    },
                    &mut skills,
                ),
                Err(error) => tracing::warn!(skill = bundled.name, %error, "invalid bundled skill, skipping"),
            }
        }
    }
    skills
}
