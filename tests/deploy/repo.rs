//! The repository as the deploy files see it: its files, the workspace's packages and binaries (from
//! `cargo metadata`), the environment variables the code reads, and what git ignores.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Repo {
    pub root: PathBuf,
    /// Names of the workspace's binary targets (`[[bin]]` and package binaries).
    pub binaries: BTreeSet<String>,
    pub packages: BTreeSet<String>,
    /// The workspace's `rust-version` (every member inherits it).
    pub rust_version: String,
    /// The product's Rust sources (not its tests or benchmarks), to find the variables it reads.
    sources: Vec<(PathBuf, String)>,
}

impl Repo {
    pub fn open() -> Self {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("the tests package sits in the workspace")
            .to_path_buf();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let output = Command::new(cargo)
            .args(["metadata", "--no-deps", "--format-version", "1", "--offline"])
            .current_dir(&root)
            .output()
            .expect("cargo metadata runs");
        assert!(output.status.success(), "cargo metadata failed: {}", String::from_utf8_lossy(&output.stderr));
        let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON");
        let mut binaries = BTreeSet::new();
        let mut packages = BTreeSet::new();
        let mut rust_versions = BTreeSet::new();
        for package in metadata["packages"].as_array().expect("packages") {
            packages.insert(package["name"].as_str().expect("package name").to_string());
            if let Some(version) = package["rust_version"].as_str() {
                rust_versions.insert(version.to_string());
            }
            for target in package["targets"].as_array().expect("targets") {
                if target["kind"].as_array().is_some_and(|kinds| kinds.iter().any(|k| k == "bin")) {
                    binaries.insert(target["name"].as_str().expect("target name").to_string());
                }
            }
        }
        assert_eq!(rust_versions.len(), 1, "one rust-version across the workspace: {rust_versions:?}");
        let rust_version = rust_versions.pop_first().expect("one rust-version");
        let mut sources = Vec::new();
        for folder in ["orchestrator", "worker", "shared"] {
            collect_sources(&root.join(folder), &mut sources);
        }
        assert!(!sources.is_empty(), "no Rust sources found under {}", root.display());
        Self { root, binaries, packages, rust_version, sources }
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.root.join(relative)
    }

    pub fn read(&self, relative: &str) -> String {
        std::fs::read_to_string(self.path(relative)).unwrap_or_else(|e| panic!("cannot read {relative}: {e}"))
    }

    /// The product's source files that name `variable` as a string literal (where `std::env::var`, clap's
    /// `env = "…"` or a constant spells it).
    pub fn sources_reading(&self, variable: &str) -> Vec<&Path> {
        let quoted = format!("\"{variable}\"");
        self.sources.iter().filter(|(_, text)| text.contains(&quoted)).map(|(path, _)| path.as_path()).collect()
    }

    /// Whether git ignores `relative` (so a real secrets file made from an `.example` is never committed).
    pub fn git_ignores(&self, relative: &str) -> bool {
        let status = Command::new("git")
            .args(["check-ignore", "--quiet", "--no-index", relative])
            .current_dir(&self.root)
            .status()
            .expect("git runs");
        status.success()
    }
}

/// Rust files of the product: test modules, test folders, benchmarks and the test-support crate are left out, so
/// a variable only a test reads does not count as read.
fn collect_sources(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if !matches!(name.as_str(), "tests" | "benches" | "test-support" | "target") {
                collect_sources(&path, out);
            }
        } else if name.ends_with(".rs")
            && !name.ends_with("_tests.rs")
            && let Ok(text) = std::fs::read_to_string(&path)
        {
            out.push((path, text));
        }
    }
}
