//! Writing an accepted skill: its files go to a staging folder inside the destination, which is renamed into
//! place in one step, and `skills-lock.json` is rewritten through a temp file and a rename. A reader never
//! sees half a skill or half a lock file.

use super::InstallError;
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The lock file beside the installed skills.
pub const LOCK_FILE: &str = "skills-lock.json";
const STAGING_PREFIX: &str = crate::registry::STAGING_PREFIX;

/// One install at a time in this process: two would race on the same folder and on the lock file.
static INSTALLING: Mutex<()> = Mutex::new(());

/// Writes `files` (relative path → bytes) as `<dest>/<dir_name>/`, replacing what is there, and records
/// `entry` under `name` in the lock file. Returns the skill folder and the lock file.
pub fn place(
    dest: &Path,
    dir_name: &str,
    files: &[(&str, &[u8])],
    name: &str,
    entry: Value,
) -> Result<(PathBuf, PathBuf), InstallError> {
    let _one = INSTALLING.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let io = |what: &str, e: std::io::Error| InstallError::Io(format!("{what}: {e}"));
    std::fs::create_dir_all(dest).map_err(|e| io(&format!("cannot create {}", dest.display()), e))?;
    let staging = tempfile::Builder::new()
        .prefix(STAGING_PREFIX)
        .tempdir_in(dest)
        .map_err(|e| io(&format!("cannot create a staging folder in {}", dest.display()), e))?;
    for (relative, bytes) in files {
        let path = staging.path().join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io(&format!("cannot create {}", parent.display()), e))?;
        }
        std::fs::write(&path, bytes).map_err(|e| io(&format!("cannot write {}", path.display()), e))?;
    }
    let target = dest.join(dir_name);
    // The old copy is moved into a folder of its own that is deleted when this ends, after the new one is in
    // place; with the rename being the only step that can be seen, a failure leaves the old copy whole.
    let retired = tempfile::Builder::new()
        .prefix(STAGING_PREFIX)
        .tempdir_in(dest)
        .map_err(|e| io(&format!("cannot create a staging folder in {}", dest.display()), e))?;
    let had_old = match std::fs::symlink_metadata(&target) {
        // Checked again under the lock: only a skill folder is ever moved aside, anything else stays.
        Ok(_) if !is_skill_folder(&target) => return Err(not_a_skill(&target)),
        Ok(_) => {
            std::fs::rename(&target, retired.path().join("old"))
                .map_err(|e| io(&format!("cannot move the old {} aside", target.display()), e))?;
            true
        }
        Err(_) => false,
    };
    if let Err(error) = std::fs::rename(staging.path(), &target) {
        if had_old {
            let _ = std::fs::rename(retired.path().join("old"), &target);
        }
        return Err(io(&format!("cannot move the skill into {}", target.display()), error));
    }
    let lock = write_lock(dest, name, entry)?;
    Ok((target, lock))
}

/// Whether `path` is a skill folder `force` may replace: a real folder (not a link) holding a `SKILL.md` file.
pub fn is_skill_folder(path: &Path) -> bool {
    let is_dir = std::fs::symlink_metadata(path).is_ok_and(|meta| meta.is_dir());
    is_dir && std::fs::symlink_metadata(path.join("SKILL.md")).is_ok_and(|meta| meta.is_file())
}

pub(crate) fn not_a_skill(path: &Path) -> InstallError {
    InstallError::Exists(format!(
        "{} exists and is not a skill folder (no SKILL.md in it); it is left as it is, even with force: move it \
         away yourself to install there",
        path.display()
    ))
}

/// Adds `entry` under `name` to `<dest>/skills-lock.json` (`{"version":1,"skills":{…}}`, names sorted). An
/// unreadable lock file is started afresh rather than blocking the install.
fn write_lock(dest: &Path, name: &str, entry: Value) -> Result<PathBuf, InstallError> {
    let path = dest.join(LOCK_FILE);
    let existing: Option<Value> = std::fs::read(&path).ok().and_then(|bytes| serde_json::from_slice(&bytes).ok());
    let mut skills: Map<String, Value> =
        existing.and_then(|lock| lock.get("skills").and_then(Value::as_object).cloned()).unwrap_or_default();
    skills.insert(name.to_string(), entry);
    let mut sorted: Vec<(String, Value)> = skills.into_iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let lock = json!({ "version": 1, "skills": Map::from_iter(sorted) });
    let mut text = serde_json::to_string_pretty(&lock).map_err(|e| InstallError::Io(e.to_string()))?;
    text.push('\n');
    let io = |e: std::io::Error| InstallError::Io(format!("cannot write {}: {e}", path.display()));
    let mut temp = tempfile::Builder::new().prefix(".skills-lock-").tempfile_in(dest).map_err(io)?;
    std::io::Write::write_all(&mut temp, text.as_bytes()).map_err(io)?;
    temp.as_file().sync_all().map_err(io)?;
    temp.persist(&path).map_err(|e| io(e.error))?;
    Ok(path)
}
