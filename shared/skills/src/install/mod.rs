//! `install_skill`'s engine: preview a published skill, then install exactly what was previewed.
//!
//! A call fetches the source ([`source`], [`fetch`]), reads it into memory and checks it whole ([`archive`],
//! [`tree`]), finds the skill folders in it and parses each with the runtime's own parser. A preview
//! (`install: false`) reports them with a content hash and writes nothing. An install needs that hash back as
//! `expected_hash`, so a source that changed since the preview is refused, and refuses to replace a skill of
//! the same name unless `force`; only then is anything written ([`place`]): `<dest>/<name>/` and
//! `<dest>/skills-lock.json`. A refused source never writes a byte.

pub mod archive;
pub mod fetch;
pub mod place;
pub mod source;
pub mod tree;
mod types;

pub use types::{Candidate, Existing, InstallError, InstallRequest, Installed, Outcome, Preview, Rejected};

use crate::frontmatter::{SkillDoc, parse_skill_md};
use crate::registry::SkillRegistry;
use serde_json::{Value, json};
use source::{Origin, Source};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tree::Tree;

/// How much of a skill's instructions a preview shows.
const PREVIEW_CHARS: usize = 1500;
/// How many of a skill's files a preview lists.
const PREVIEW_FILES: usize = 50;

/// Installs into the folders of one registry.
pub struct Installer {
    registry: Arc<SkillRegistry>,
    client: reqwest::Client,
}

impl Installer {
    pub fn new(registry: Arc<SkillRegistry>) -> Result<Self, InstallError> {
        Ok(Self { registry, client: fetch::client()? })
    }

    /// Previews or installs `request.source`; a relative local path resolves against `base`.
    pub async fn run(&self, request: InstallRequest, base: &Path) -> Result<Outcome, InstallError> {
        let source = source::parse_source(&request.source, base)?;
        let dest = self.dest(request.dest.as_deref())?;
        let tree = match &source.origin {
            Origin::Remote(url) => {
                let bytes = fetch::download(&self.client, url).await?;
                blocking(move || archive::unpack(&bytes)).await?
            }
            Origin::Local(path) => read_local(path.clone()).await?,
        };
        let registry = Arc::clone(&self.registry);
        blocking(move || decide(&registry, &source, tree, &request, &dest)).await
    }

    /// `dest` resolved: the write folder, or one of the discovery folders on disk.
    fn dest(&self, dest: Option<&str>) -> Result<PathBuf, InstallError> {
        let settings = self.registry.settings();
        let Some(written) = dest.map(str::trim).filter(|d| !d.is_empty()) else {
            return Ok(settings.write_dir.clone());
        };
        let expanded = match written.strip_prefix("~/") {
            Some(rest) => std::env::var_os("HOME").map(|home| PathBuf::from(home).join(rest)),
            None => None,
        }
        .unwrap_or_else(|| PathBuf::from(written));
        let key = |path: &Path| path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        let wanted = key(&expanded);
        settings.roots.iter().find(|root| key(&root.path) == wanted).map(|root| root.path.clone()).ok_or_else(|| {
            let allowed: Vec<String> = settings.roots.iter().map(|r| r.path.to_string_lossy().into_owned()).collect();
            InstallError::InvalidDest(format!("dest must be one of: {}", allowed.join(", ")))
        })
    }
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, InstallError> + Send + 'static,
) -> Result<T, InstallError> {
    tokio::task::spawn_blocking(work).await.map_err(|e| InstallError::Io(format!("the install task failed: {e}")))?
}

async fn read_local(path: PathBuf) -> Result<Tree, InstallError> {
    blocking(move || {
        let unreadable =
            |e: std::io::Error| InstallError::InvalidSource(format!("cannot read {}: {e}", path.display()));
        // The link itself is not what is read: the source given as a link to a folder or an archive is read
        // where it points, under the same rules.
        let mut meta = std::fs::symlink_metadata(&path).map_err(unreadable)?;
        if meta.file_type().is_symlink() {
            meta = std::fs::metadata(&path).map_err(unreadable)?;
        }
        if meta.is_dir() {
            return archive::read_folder(&path);
        }
        // A FIFO would block the read forever, a device would never end.
        if !meta.is_file() {
            return Err(InstallError::InvalidSource(format!(
                "{} is not a regular file or folder (FIFOs, sockets and devices are not read)",
                path.display()
            )));
        }
        let too_large = || {
            InstallError::Refused(format!(
                "{} is larger than {} bytes (10 MiB)",
                path.display(),
                fetch::MAX_DOWNLOAD_BYTES
            ))
        };
        if meta.len() > fetch::MAX_DOWNLOAD_BYTES as u64 {
            return Err(too_large());
        }
        // Only what a skill comes as: any other file of the machine is not read, so its lines cannot end up in a
        // preview.
        let file_name = path.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
        let is_archive = [".zip", ".tar.gz", ".tgz", ".tar"].iter().any(|ext| file_name.ends_with(ext));
        if !is_archive && file_name != "skill.md" {
            return Err(InstallError::InvalidSource(format!(
                "{} is neither a skill folder, a SKILL.md nor a .zip / .tar.gz archive",
                path.display()
            )));
        }
        let file = archive::open_regular(&path).map_err(unreadable)?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(file, fetch::MAX_DOWNLOAD_BYTES as u64 + 1), &mut bytes)
            .map_err(unreadable)?;
        if bytes.len() > fetch::MAX_DOWNLOAD_BYTES {
            return Err(too_large());
        }
        if is_archive && !archive::is_archive(&bytes) {
            return Err(InstallError::Refused(format!("{} is not a zip or tar archive", path.display())));
        }
        archive::unpack(&bytes)
    })
    .await
}

/// A skill folder of the source, parsed.
struct Found {
    dir: String,
    doc: SkillDoc,
}

fn decide(
    registry: &SkillRegistry,
    source: &Source,
    tree: Tree,
    request: &InstallRequest,
    dest: &Path,
) -> Result<Outcome, InstallError> {
    let root = source.subpath.trim_matches('/');
    if !tree.has_dir(root) {
        return Err(InstallError::PathNotFound(format!("`{root}` does not exist in {}", source.display)));
    }
    let (mut found, invalid) = discover(&tree, root);
    let wanted = request.skill.as_deref().or(source.skill.as_deref()).map(str::to_lowercase);
    if let Some(wanted) = &wanted {
        found.retain(|f| f.doc.name.to_lowercase() == *wanted || last_part(&f.dir).to_lowercase() == *wanted);
    }
    let (resolved_url, dest_label) = (source.resolved(), dest.to_string_lossy().into_owned());
    if !request.install {
        let skills = found.iter().map(|f| candidate(registry, &tree, f)).collect();
        return Ok(Outcome::Preview(Preview {
            ok: true,
            source: source.display.clone(),
            resolved_url,
            reference: source.reference.clone(),
            dest: dest_label,
            skills,
            invalid,
        }));
    }
    let chosen = match found.as_slice() {
        [] => {
            let named = wanted.map(|w| format!(" named `{w}`")).unwrap_or_default();
            return Err(InstallError::SkillNotFound(format!("no valid skill{named} in {}", source.display)));
        }
        [one] => one,
        several => {
            let names: Vec<&str> = several.iter().map(|f| f.doc.name.as_str()).collect();
            return Err(InstallError::SelectionRequired(format!(
                "{} holds several skills; pick one with `skill`: {}",
                source.display,
                names.join(", ")
            )));
        }
    };
    let hash = tree.hash(&chosen.dir);
    match request.expected_hash.as_deref().map(str::trim) {
        None | Some("") => return Err(InstallError::PreviewRequired),
        Some(expected) if !expected.eq_ignore_ascii_case(&hash) => {
            return Err(InstallError::HashMismatch(format!(
                "{} does not hold what a preview with hash {expected} showed: it changed since, or the hash is \
                 mistyped. Nothing was installed; preview it again and check what it holds now",
                source.display
            )));
        }
        Some(_) => {}
    }
    let name = &chosen.doc.name;
    let dir_name = folder_name(name)?;
    let target = dest.join(&dir_name);
    let holder = if std::fs::symlink_metadata(&target).is_ok() {
        // `force` replaces a skill, never whatever else happens to have the name.
        if !place::is_skill_folder(&target) {
            return Err(place::not_a_skill(&target));
        }
        Some(target.to_string_lossy().into_owned())
    } else {
        registry.get(name).map(|skill| skill.dir_label())
    };
    if let Some(holder) = holder
        && !request.force
    {
        return Err(InstallError::Exists(format!(
            "{holder} already provides `{name}`; pass force: true to install anyway"
        )));
    }
    let mut entry = json!({
        "source": source.display,
        "sourceType": source.kind,
        "resolvedUrl": resolved_url,
    });
    if let Some(reference) = &source.reference {
        entry["ref"] = json!(reference);
    }
    if source.kind == "github" {
        entry["skillPath"] = json!(join(&chosen.dir, "SKILL.md"));
    }
    entry["computedHash"] = json!(hash);
    entry["installedAt"] = json!(chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    let files = tree.skill_files(&chosen.dir);
    let (path, lock) = place::place(dest, &dir_name, &files, name, entry)?;
    Ok(Outcome::Installed(Installed {
        ok: true,
        source: source.display.clone(),
        resolved_url,
        reference: source.reference.clone(),
        dest: dest_label,
        installed: name.clone(),
        path: path.to_string_lossy().into_owned(),
        hash,
        compatibility: chosen.doc.compatibility.clone(),
        lock_file: lock.to_string_lossy().into_owned(),
    }))
}

/// Parses every skill folder under `root`; a folder whose `SKILL.md` does not parse, or whose name an earlier
/// folder already has, is rejected with the reason.
fn discover(tree: &Tree, root: &str) -> (Vec<Found>, Vec<Rejected>) {
    let mut found: Vec<Found> = Vec::new();
    let mut names = std::collections::HashSet::new();
    let mut invalid = Vec::new();
    for dir in tree.skill_dirs(root) {
        let text = tree.get(&join(&dir, "SKILL.md")).map(std::str::from_utf8);
        let parsed = match text {
            Some(Ok(text)) => parse_skill_md(text),
            Some(Err(_)) => Err("SKILL.md is not UTF-8 text".to_string()),
            None => Err("SKILL.md is missing".to_string()),
        };
        match parsed {
            Ok(doc) if !names.insert(doc.name.clone()) => invalid
                .push(Rejected { skill_path: shown(&dir), error: format!("duplicate skill name `{}`", doc.name) }),
            Ok(doc) => found.push(Found { dir, doc }),
            Err(error) => invalid.push(Rejected { skill_path: shown(&dir), error }),
        }
    }
    (found, invalid)
}

fn candidate(registry: &SkillRegistry, tree: &Tree, found: &Found) -> Candidate {
    let files: Vec<String> = tree.skill_files(&found.dir).into_iter().map(|(path, _)| path.to_string()).collect();
    let existing =
        registry.get(&found.doc.name).map(|skill| Existing { source: skill.source.as_str(), path: skill.dir_label() });
    Candidate {
        name: found.doc.name.clone(),
        description: found.doc.description.clone(),
        compatibility: found.doc.compatibility.clone(),
        skill_path: shown(&found.dir),
        hash: tree.hash(&found.dir),
        instructions_chars: found.doc.body.chars().count(),
        instructions_preview: found.doc.body.chars().take(PREVIEW_CHARS).collect(),
        existing,
        file_count: files.len(),
        files: files.into_iter().take(PREVIEW_FILES).collect(),
    }
}

/// The folder an installed skill gets: its name lower-cased, anything but `a-z0-9._-` made `-`. The lock
/// file's name is refused, and so is a hidden name (the installer's own temporary folders start with `.`).
fn folder_name(name: &str) -> Result<String, InstallError> {
    let mut out = String::new();
    for c in name.to_lowercase().chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-') {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let trimmed = out.trim_matches(|c| c == '-' || c == '.');
    if trimmed.is_empty() {
        return Err(InstallError::InvalidName(format!("cannot make a folder name from `{name}`")));
    }
    if trimmed == place::LOCK_FILE || trimmed.starts_with('.') {
        return Err(InstallError::InvalidName(format!(
            "the skill name `{name}` would be installed as `{trimmed}`, a name reserved for the installer"
        )));
    }
    Ok(trimmed.to_string())
}

fn join(dir: &str, file: &str) -> String {
    if dir.is_empty() { file.to_string() } else { format!("{dir}/{file}") }
}

fn shown(dir: &str) -> String {
    if dir.is_empty() { ".".into() } else { dir.to_string() }
}

fn last_part(dir: &str) -> &str {
    dir.rsplit('/').next().unwrap_or(dir)
}

/// The outcome as the tool returns it.
pub fn to_json(outcome: &Outcome) -> Value {
    serde_json::to_value(outcome).unwrap_or_else(|e| json!({ "ok": false, "error": e.to_string() }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::SkillSettings;

    /// A GitHub tarball's tree after its top folder is stepped into.
    fn repo() -> Tree {
        let mut tree = Tree::default();
        for (path, name) in [("skills/pdf/SKILL.md", "pdf"), ("skills/sheets/SKILL.md", "sheets")] {
            let text = format!("---\nname: {name}\ndescription: d\n---\nbody\n");
            tree.add(path.into(), text.into_bytes()).unwrap();
        }
        tree
    }

    fn preview(source: &str) -> Result<Outcome, InstallError> {
        let dir = std::env::temp_dir().join("minibot-skills-unused");
        let registry = SkillRegistry::new(SkillSettings::with_roots(dir.clone(), Vec::new()));
        let source = source::parse_source(source, Path::new("/")).unwrap();
        decide(&registry, &source, repo(), &InstallRequest::default(), &dir)
    }

    fn names(outcome: Outcome) -> Vec<String> {
        match outcome {
            Outcome::Preview(preview) => preview.skills.into_iter().map(|s| s.name).collect(),
            Outcome::Installed(_) => panic!("a preview installed"),
        }
    }

    #[test]
    fn a_path_or_a_skill_name_narrows_a_repo() {
        assert_eq!(names(preview("o/r").unwrap()), ["pdf", "sheets"]);
        assert_eq!(names(preview("o/r/skills/sheets").unwrap()), ["sheets"]);
        assert_eq!(names(preview("o/r@PDF").unwrap()), ["pdf"]);
        assert_eq!(names(preview("https://github.com/o/r/blob/main/skills/pdf/SKILL.md").unwrap()), ["pdf"]);
        assert_eq!(preview("o/r/skills/nope").unwrap_err().code(), "path_not_found");
    }

    #[test]
    fn folder_names_are_portable() {
        assert_eq!(folder_name("PDF Tools!").unwrap(), "pdf-tools");
        assert_eq!(folder_name("my_skill.v2").unwrap(), "my_skill.v2");
        assert_eq!(folder_name("..").unwrap_err().code(), "invalid_skill_name");
        assert_eq!(folder_name("日本").unwrap_err().code(), "invalid_skill_name");
        for reserved in ["skills-lock.json", "Skills-Lock.JSON", "-skills-lock.json-"] {
            let err = folder_name(reserved).unwrap_err();
            assert!(err.to_string().contains("reserved"), "{reserved}: {err}");
        }
    }
}
