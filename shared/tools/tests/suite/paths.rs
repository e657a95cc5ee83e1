//! Hostile paths: every one is refused with a clear error, and nothing lands outside the managed root.

use super::{Env, tree};
use serde_json::json;
use std::os::unix::fs::symlink;

const REFUSAL_CODES: &[&str] = &["invalid_path", "path_outside_root", "path_unavailable"];

fn hostile_env() -> Env {
    let env = Env::new("");
    let root = env.root();
    std::fs::create_dir_all(root.join("a/b")).unwrap();
    symlink(env.outside(), root.join("link_out")).unwrap();
    symlink(env.outside().join("secret.txt"), root.join("link_file_out")).unwrap();
    symlink(env.dir.path().join("nowhere/x"), root.join("dangling")).unwrap();
    symlink(root.join("loop_b"), root.join("loop_a")).unwrap();
    symlink(root.join("loop_a"), root.join("loop_b")).unwrap();
    symlink("../../outside", root.join("a/b/rel_out")).unwrap();
    env
}

fn hostile_paths() -> Vec<String> {
    vec![
        "../escape.txt".into(),
        "../../etc/passwd".into(),
        "/etc/passwd".into(),
        "/tmp/escape.txt".into(),
        "//etc/passwd".into(),
        "a/../../escape.txt".into(),
        "./../escape.txt".into(),
        "a/b/../../../escape.txt".into(),
        "a/b/../../../outside/secret.txt".into(),
        "link_out/escape.txt".into(),
        "link_out/secret.txt".into(),
        "link_file_out".into(),
        "a/b/rel_out/escape.txt".into(),
        "dangling".into(),
        "loop_a/escape.txt".into(),
        "nul\0byte.txt".into(),
        "x".repeat(5000),
        format!("a/{}", "y".repeat(300)),
        "\u{FF0E}\u{FF0E}/escape.txt".into(),
        "..\u{2215}escape.txt".into(),
        "..\u{FF0F}escape.txt".into(),
        "..\u{2044}escape.txt".into(),
        "\u{2024}\u{2024}/escape.txt".into(),
        "..\\escape.txt".into(),
        "report\u{202E}txt.exe".into(),
        "zero\u{200B}width.txt".into(),
        "line\nbreak.txt".into(),
        "".into(),
    ]
}

#[tokio::test]
async fn hostile_paths_are_refused_by_every_file_tool() {
    let env = hostile_env();
    let outside_before = tree(&env.outside());
    let paths = hostile_paths();
    assert!(paths.len() >= 20);
    for path in &paths {
        for (tool, args) in [
            ("write_file", json!({ "path": path, "content": "pwned" })),
            ("read_file", json!({ "path": path })),
            ("file_info", json!({ "path": path })),
            ("code_read", json!({ "path": path })),
            ("delete_file", json!({ "path": path, "recursive": true })),
            ("move_file", json!({ "source_path": "a", "destination_path": path })),
            ("send_file", json!({ "path": path })),
        ] {
            let (code, message) = env.err(tool, args).await;
            assert!(
                REFUSAL_CODES.contains(&code.as_str()) || (path.is_empty() && code == "invalid_path"),
                "{tool}({path:?}) gave {code}: {message}"
            );
            assert!(!message.is_empty());
        }
    }
    assert_eq!(tree(&env.outside()), outside_before, "something changed outside the root");
    let parent = tree(env.dir.path());
    assert!(
        parent.keys().all(|k| k.starts_with("files/") || k.starts_with("outside/")),
        "files appeared next to the root: {:?}",
        parent.keys().collect::<Vec<_>>()
    );
    assert!(parent.values().all(|v| v != b"pwned"), "a hostile write landed somewhere");
    assert!(env.root().join("a/b").is_dir(), "a refused move must not move the source");
}

#[tokio::test]
async fn messages_say_what_is_wrong() {
    let env = hostile_env();
    let (code, message) = env.err("read_file", json!({ "path": "../x" })).await;
    assert_eq!((code.as_str(), message.as_str()), ("path_outside_root", "path escapes managed root"));
    let (code, message) = env.err("read_file", json!({ "path": "/etc/passwd" })).await;
    assert_eq!((code.as_str(), message.as_str()), ("path_outside_root", "path must be relative to managed root"));
    let (_, message) = env.err("read_file", json!({ "path": "..\u{2215}x" })).await;
    assert!(message.contains("U+2215"), "{message}");
    let (_, message) = env.err("read_file", json!({ "path": "link_file_out" })).await;
    assert_eq!(message, "path escapes managed root");
}

#[tokio::test]
async fn links_inside_the_root_work_and_deleting_a_link_keeps_its_target() {
    let env = Env::new("");
    env.write("real/data.txt", "hello\n");
    symlink(env.root().join("real"), env.root().join("alias")).unwrap();
    let read = env.ok("read_file", json!({ "path": "alias/data.txt" })).await;
    assert_eq!(read["content"], "hello\n");
    env.ok("delete_file", json!({ "path": "alias" })).await;
    assert!(env.root().join("real/data.txt").is_file(), "deleting a link must not delete what it points to");
}

#[tokio::test]
async fn allow_outside_root_accepts_absolute_paths() {
    let env = Env::new("");
    let config = "[tools.file_storage]\nenabled = true\nroot_dir = \"files\"\nallow_outside_root = true\n";
    let cfg = minibot_config::Config::from_toml(config, "t.toml", env.dir.path(), &|_| None).unwrap();
    let services = minibot_tools::ToolServices::new(std::sync::Arc::new(cfg), None).unwrap();
    let tools = minibot_tools::main_agent_tools(&services);
    let target = env.outside().join("secret.txt");
    let out = tools
        .get("read_file")
        .unwrap()
        .call_json(json!({ "path": target.display().to_string() }), &Default::default())
        .await
        .unwrap();
    assert_eq!(out["content"], "top secret\n");
    assert_eq!(out["path_scope"], "outside_root");
}
