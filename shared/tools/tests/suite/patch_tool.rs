use super::{Env, tree};
use serde_json::json;

fn env() -> Env {
    let env = Env::new("[tools.apply_patch]\nenabled = true\nworkspace_root = \"ws\"\n");
    std::fs::create_dir_all(env.dir.path().join("ws")).unwrap();
    env
}

#[tokio::test]
async fn apply_patch_edits_inside_the_workspace() {
    let env = env();
    let ws = env.dir.path().join("ws");
    std::fs::write(ws.join("app.py"), "def main():\n    print('hi')\n").unwrap();
    let patch = "*** Begin Patch\n*** Update File: app.py\n@@ def main():\n-    print('hi')\n+    print('hello')\n*** Add File: docs/readme.md\n+# Readme\n*** End Patch";
    let out = env.ok("apply_patch", json!({ "patch_text": patch })).await;
    assert_eq!(out["summary"], "Success. Updated the following files:\nA docs/readme.md\nM app.py");
    assert_eq!(std::fs::read_to_string(ws.join("app.py")).unwrap(), "def main():\n    print('hello')\n");
    assert_eq!(std::fs::read_to_string(ws.join("docs/readme.md")).unwrap(), "# Readme\n");
}

#[tokio::test]
async fn apply_patch_refuses_escapes_and_writes_nothing() {
    let env = env();
    let before = tree(env.dir.path());
    for path in ["../escape.txt", "/tmp/minibot-escape.txt", "a/../../escape.txt"] {
        let patch =
            format!("*** Begin Patch\n*** Add File: ok.txt\n+fine\n*** Add File: {path}\n+pwned\n*** End Patch");
        let (code, message) = env.err("apply_patch", json!({ "patch_text": patch })).await;
        assert_eq!(code, "apply_patch_failed");
        assert!(message.contains("path escapes workspace root"), "{message}");
    }
    assert_eq!(tree(env.dir.path()), before, "a refused patch must write nothing, not even its valid part");
}

#[tokio::test]
async fn apply_patch_errors_carry_hints() {
    let env = env();
    std::fs::write(env.dir.path().join("ws/a.txt"), "one\n").unwrap();
    let (_, message) = env.err("apply_patch", json!({ "patch_text": "*** Update File: a.txt" })).await;
    assert!(message.starts_with("apply_patch verification failed: Invalid patch format"), "{message}");
    assert!(message.contains("*** Begin Patch"));
    let stale = "*** Begin Patch\n*** Update File: a.txt\n-two\n+three\n*** End Patch";
    let (_, message) = env.err("apply_patch", json!({ "patch_text": stale })).await;
    assert!(
        message.contains("Failed to find expected lines") && message.contains("Read the current file"),
        "{message}"
    );
    let (code, _) = env.err("apply_patch", json!({ "patch_text": "x".repeat(300_000) })).await;
    assert_eq!(code, "patch_too_large");
}
