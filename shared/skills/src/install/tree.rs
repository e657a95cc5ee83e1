//! A source's files held in memory: relative `/`-separated path → bytes. Archives and folders are read into a
//! [`Tree`] and checked whole before anything is written, so a refused source leaves no trace on disk.

use super::InstallError;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// The most files a source may hold once unpacked (as `npx skills`).
pub const MAX_FILES: usize = 1000;
/// The most bytes a source may hold once unpacked (as `npx skills`).
pub const MAX_BYTES: u64 = 25 * 1024 * 1024;
/// Skill folders are looked for this many levels below the searched folder, at most.
const MAX_DEPTH: usize = 5;
/// Folders never searched for skills.
const SKIP_DIRS: &[&str] = &[".git", "node_modules", "dist", "build", "__pycache__"];
/// Folders never hashed nor copied: tooling, not the skill.
const NOT_COPIED: &[&str] = &[".git", "node_modules"];

/// Files by relative path.
#[derive(Debug, Default, Clone)]
pub struct Tree {
    files: BTreeMap<String, Vec<u8>>,
    bytes: u64,
}

impl Tree {
    /// Adds a file, refusing a repeated name and anything past the limits. `path` is already clean (see
    /// [`clean_name`]).
    pub fn add(&mut self, path: String, content: Vec<u8>) -> Result<(), InstallError> {
        if self.files.len() >= MAX_FILES {
            return Err(InstallError::Refused(format!("the source holds more than {MAX_FILES} files")));
        }
        self.bytes += content.len() as u64;
        if self.bytes > MAX_BYTES {
            return Err(too_big());
        }
        if self.files.contains_key(&path) {
            return Err(InstallError::Refused(format!("`{path}` appears twice in the source")));
        }
        self.files.insert(path, content);
        Ok(())
    }

    /// The bytes still allowed, for reading the next file no further than that.
    pub fn room(&self) -> u64 {
        MAX_BYTES.saturating_sub(self.bytes)
    }

    /// Refuses a name that is both a file and a folder (`a` and `a/b`): it could not be written.
    pub fn check_shape(&self) -> Result<(), InstallError> {
        for path in self.files.keys() {
            let mut at = 0;
            while let Some(slash) = path[at..].find('/') {
                let folder = &path[..at + slash];
                if self.files.contains_key(folder) {
                    return Err(InstallError::Refused(format!("`{folder}` is both a file and a folder")));
                }
                at += slash + 1;
            }
        }
        Ok(())
    }

    /// The tree inside its one top folder when it has exactly one (GitHub's `repo-<sha>/`), else itself.
    pub fn without_single_top(self) -> Self {
        let mut tops = self.files.keys().map(|path| path.split_once('/').map(|(top, _)| top));
        let Some(Some(first)) = tops.next() else { return self };
        if !tops.all(|top| top == Some(first)) {
            return self;
        }
        let prefix = format!("{first}/");
        let files = self.files.into_iter().map(|(path, bytes)| (path[prefix.len()..].to_string(), bytes)).collect();
        Self { files, bytes: self.bytes }
    }

    /// Whether `dir` ("" for the root) holds any file.
    pub fn has_dir(&self, dir: &str) -> bool {
        dir.is_empty() || self.files.keys().any(|path| path.starts_with(&format!("{dir}/")))
    }

    pub fn get(&self, path: &str) -> Option<&[u8]> {
        self.files.get(path).map(Vec::as_slice)
    }

    /// The folders below `root` (itself included) holding a `SKILL.md`, shallowest first; a skill's own
    /// subfolders are not searched, nor [`SKIP_DIRS`], nor deeper than [`MAX_DEPTH`] levels.
    pub fn skill_dirs(&self, root: &str) -> Vec<String> {
        let mut found: Vec<String> = self
            .files
            .keys()
            .filter_map(|path| path.strip_suffix("SKILL.md"))
            .filter_map(|dir| match dir {
                "" => Some(String::new()),
                dir => dir.strip_suffix('/').map(str::to_string),
            })
            .filter(|dir| within(dir, root))
            .filter(|dir| {
                let parts = relative_parts(dir, root);
                parts.len() <= MAX_DEPTH && !parts.iter().any(|part| SKIP_DIRS.contains(part))
            })
            .collect();
        found.sort_by_key(|dir| (dir.matches('/').count() + usize::from(!dir.is_empty()), dir.clone()));
        let mut kept: Vec<String> = Vec::new();
        for dir in found {
            if !kept.iter().any(|skill| skill != &dir && within(&dir, skill)) {
                kept.push(dir);
            }
        }
        kept
    }

    /// The files of the skill in `dir`, relative to it, sorted, tooling folders left out.
    pub fn skill_files<'a>(&'a self, dir: &str) -> Vec<(&'a str, &'a [u8])> {
        let prefix = if dir.is_empty() { String::new() } else { format!("{dir}/") };
        self.files
            .iter()
            .filter_map(|(path, bytes)| path.strip_prefix(prefix.as_str()).map(|rel| (rel, bytes.as_slice())))
            .filter(|(rel, _)| !rel.split('/').any(|part| NOT_COPIED.contains(&part)))
            .collect()
    }

    /// SHA-256 over the skill's sorted relative paths and contents, hex: the `hash` a preview shows and an
    /// install must be given back (the npm `skills` tool's `computedHash`).
    pub fn hash(&self, dir: &str) -> String {
        hash_files(self.skill_files(dir))
    }
}

/// [`Tree::hash`] over files already listed in path order.
pub fn hash_files<'a>(files: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> String {
    let mut digest = Sha256::new();
    for (path, bytes) in files {
        digest.update(path.as_bytes());
        digest.update(bytes);
    }
    digest.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn within(dir: &str, root: &str) -> bool {
    root.is_empty() || dir == root || dir.starts_with(&format!("{root}/"))
}

fn relative_parts<'a>(dir: &'a str, root: &str) -> Vec<&'a str> {
    let rest = if root.is_empty() { dir } else { dir[root.len()..].trim_start_matches('/') };
    rest.split('/').filter(|part| !part.is_empty()).collect()
}

pub(crate) fn too_big() -> InstallError {
    InstallError::Refused(format!("the source expands beyond {MAX_BYTES} bytes (25 MiB)"))
}

/// An entry name made relative and `/`-separated: `None` for the archive root itself (`./`), an error for a
/// name that would land outside the extraction folder (`..`, an absolute path, a drive letter) or is not text.
pub fn clean_name(raw: &str) -> Result<Option<String>, InstallError> {
    let escape = || InstallError::Refused(format!("the entry `{raw}` would land outside the skill folder"));
    if raw.contains('\0') {
        return Err(escape());
    }
    if raw.starts_with('/') || raw.starts_with('\\') {
        return Err(escape());
    }
    let mut parts = Vec::new();
    for part in raw.split(['/', '\\']) {
        match part {
            "" | "." => {}
            ".." => return Err(escape()),
            part if parts.is_empty() && part.len() == 2 && part.ends_with(':') => return Err(escape()),
            part => parts.push(part),
        }
    }
    Ok((!parts.is_empty()).then(|| parts.join("/")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(paths: &[&str]) -> Tree {
        let mut tree = Tree::default();
        for path in paths {
            tree.add(path.to_string(), path.as_bytes().to_vec()).unwrap();
        }
        tree
    }

    #[test]
    fn names_that_escape_are_refused() {
        assert_eq!(clean_name("a/./b//c").unwrap().as_deref(), Some("a/b/c"));
        assert_eq!(clean_name("./").unwrap(), None);
        assert_eq!(clean_name("a\\b").unwrap().as_deref(), Some("a/b"));
        for bad in ["../x", "a/../../x", "/etc/passwd", "\\x", "C:/x", "c:\\x", "a\0b", "a/..\\..\\x"] {
            assert_eq!(clean_name(bad).unwrap_err().code(), "archive_refused", "{bad}");
        }
    }

    #[test]
    fn skills_are_found_shallowest_first_without_nesting() {
        let t = tree(&[
            "README.md",
            "skills/a/SKILL.md",
            "skills/a/inner/SKILL.md",
            "skills/b/SKILL.md",
            "node_modules/c/SKILL.md",
            "1/2/3/4/5/SKILL.md",
            "1/2/3/4/5/6/SKILL.md",
        ]);
        assert_eq!(t.skill_dirs(""), ["skills/a", "skills/b", "1/2/3/4/5"]);
        assert_eq!(t.skill_dirs("skills/b"), ["skills/b"]);
        assert_eq!(tree(&["SKILL.md", "x/SKILL.md"]).skill_dirs(""), [""]);
    }

    #[test]
    fn one_top_folder_is_stepped_into() {
        let t = tree(&["repo-abc/s/SKILL.md", "repo-abc/README"]).without_single_top();
        assert!(t.get("s/SKILL.md").is_some());
        let t = tree(&["a/SKILL.md", "b/SKILL.md"]).without_single_top();
        assert!(t.get("a/SKILL.md").is_some());
        let t = tree(&["SKILL.md"]).without_single_top();
        assert!(t.get("SKILL.md").is_some());
    }

    #[test]
    fn hash_covers_paths_and_bytes_but_not_tooling() {
        let a = tree(&["s/SKILL.md", "s/x.txt"]);
        let b = tree(&["s/SKILL.md", "s/x.txt", "s/.git/HEAD", "s/node_modules/m.js"]);
        assert_eq!(a.hash("s"), b.hash("s"));
        assert_ne!(a.hash("s"), tree(&["s/SKILL.md", "s/y.txt"]).hash("s"));
        assert_eq!(a.hash("s").len(), 64);
    }

    #[test]
    fn a_name_that_is_file_and_folder_is_refused() {
        assert!(tree(&["a", "a/b"]).check_shape().is_err());
        assert!(tree(&["a/b", "a/c"]).check_shape().is_ok());
    }
}
