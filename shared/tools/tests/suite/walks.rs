//! Walks over folders the model shapes. A chain of folders far deeper than a thread's stack holds must not
//! crash the assistant (red-team report: `repro_artifact_stackoverflow.sh`, where `python_execute` with
//! `save_artifacts` after 19,000 nested folders overflowed the stack of the recursive walk and aborted the
//! process), and what lies past the walks' caps is reported rather than silently dropped.

use super::Env;
use cap_std::ambient_authority;
use cap_std::fs::Dir;
use serde_json::{Value, json};
use std::path::Path;

/// Deeper than the old recursive walk survived on a 2 MiB thread stack.
const DEEP: usize = 20_000;

/// The old walk held one descriptor per level, so a low open-files limit stopped it before its stack ran out
/// and hid the crash; the assistant may run with a high one.
fn raise_open_files(at_least: u64) {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE)
        && soft < at_least
    {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, at_least.min(hard), hard);
    }
}

/// `<root>/<name>/d/d/…` `depth` folders deep, with `top.txt` in the first and `bottom.txt` in the last. Made
/// through handles: the full path is far longer than `PATH_MAX`.
fn chain(root: &Path, name: &str, depth: usize) {
    let base = Dir::open_ambient_dir(root, ambient_authority()).unwrap();
    base.create_dir(name).unwrap();
    let mut dir = base.open_dir(name).unwrap();
    dir.write("top.txt", "found here\n").unwrap();
    for _ in 1..depth {
        dir.create_dir("d").unwrap();
        dir = dir.open_dir("d").unwrap();
    }
    dir.write("bottom.txt", "found here\n").unwrap();
}

/// Removes a tree of any depth holding two handles at a time: std's `remove_dir_all` (which `TempDir` uses)
/// recurses once per level too. Each folder's subfolders are moved up next to it before it goes.
fn remove_deep(root: &Path, name: &str) {
    let base = Dir::open_ambient_dir(root, ambient_authority()).unwrap();
    let mut pending = vec![name.to_string()];
    let mut fresh = 0u64;
    while let Some(current) = pending.pop() {
        let dir = base.open_dir(&current).unwrap();
        for entry in dir.entries().unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                fresh += 1;
                let moved = format!(".up-{fresh}");
                dir.rename(entry.file_name(), &base, &moved).unwrap();
                pending.push(moved);
            } else {
                dir.remove_file(entry.file_name()).unwrap();
            }
        }
        base.remove_dir(&current).unwrap();
    }
}

fn paths(out: &Value, list: &str, field: &str) -> Vec<String> {
    out[list].as_array().unwrap().iter().map(|e| e[field].as_str().unwrap().to_string()).collect()
}

#[tokio::test]
async fn a_chain_of_folders_deeper_than_the_stack_is_walked_down_to_the_cap_and_says_so() {
    raise_open_files(DEEP as u64 + 1_000);
    let env = Env::new("");
    chain(&env.root(), "deep", DEEP);

    let glob = env.ok("glob_files", json!({ "pattern": "*.txt", "folder": "deep" })).await;
    assert_eq!(paths(&glob, "entries", "path"), ["deep/top.txt"], "{glob}");
    let notice = glob["notice"].as_str().unwrap_or_default();
    assert!(notice.contains("deeper than 64 levels"), "{glob}");

    let grep = env.ok("grep", json!({ "pattern": "found", "path": "deep" })).await;
    assert_eq!(paths(&grep, "matches", "path"), ["deep/top.txt"], "{grep}");
    assert!(grep["notice"].as_str().unwrap_or_default().contains("deeper than 64 levels"), "{grep}");

    // Refused whole, not deleted down to the cap.
    let (code, message) = env.err("delete_file", json!({ "path": "deep", "recursive": true })).await;
    assert_eq!(code, "folder_too_deep", "{message}");
    assert!(env.root().join("deep/top.txt").exists());

    remove_deep(&env.root(), "deep");
}

#[tokio::test]
async fn a_tree_within_the_caps_is_walked_whole_and_deleted_without_recursion() {
    let env = Env::new("");
    chain(&env.root(), "tree", 64);
    env.write("tree/side/a.txt", "found here\n");
    let glob = env.ok("glob_files", json!({ "pattern": "*.txt", "folder": "tree" })).await;
    let mut found = paths(&glob, "entries", "path");
    found.sort();
    let bottom = format!("tree/{}bottom.txt", "d/".repeat(63));
    assert_eq!(found, [bottom, "tree/side/a.txt".to_string(), "tree/top.txt".to_string()], "{glob}");
    assert!(glob.get("notice").is_none(), "{glob}");

    let (code, message) = env.err("delete_file", json!({ "path": "tree" })).await;
    assert_eq!(code, "folder_not_empty");
    // 63 folders `d`, `side`, and three files.
    assert!(message.contains("(67 entries)"), "{message}");
    let deleted = env.ok("delete_file", json!({ "path": "tree", "recursive": true })).await;
    assert_eq!(deleted["deleted_count"], 68, "{deleted}");
    assert!(!env.root().join("tree").exists());
}

#[tokio::test]
async fn a_walk_stops_listing_at_the_entry_cap_and_says_so() {
    let env = Env::new("");
    let base = Dir::open_ambient_dir(env.root(), ambient_authority()).unwrap();
    base.create_dir("many").unwrap();
    let many = base.open_dir("many").unwrap();
    for n in 0..100_010 {
        many.write(format!("f{n:06}.dat"), "").unwrap();
    }
    let glob = env.ok("glob_files", json!({ "pattern": "*.txt", "folder": "many" })).await;
    assert!(glob["notice"].as_str().unwrap_or_default().contains("stopped after 100000 entries"), "{glob}");
    let (_, message) = env.err("delete_file", json!({ "path": "many" })).await;
    assert!(message.contains("(at least 100000 entries)"), "{message}");
}
