use super::Env;
use serde_json::{Value, json};

fn lines(result: &Value) -> Vec<(String, u64)> {
    result["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["path"].as_str().unwrap().to_string(), m["line"].as_u64().unwrap()))
        .collect()
}

fn seeded() -> Env {
    let env = Env::new("[tools.grep]\nenabled = true\nmax_matches = 5\nmax_file_size_bytes = 1000\n");
    env.write("src/main.rs", "fn main() {\n    let total = add(1, 2);\n    println!(\"{total}\");\n}\n");
    env.write("src/lib.rs", "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n// TODO: Add tests\n");
    env.write("notes.txt", "price: $5.00 (approx.)\nPrice: 6\n");
    env.write(".hidden/secret.txt", "add me\n");
    env.write("huge.txt", &"add\n".repeat(1000));
    std::fs::write(env.root().join("image.bin"), b"add\0\x01\x02add").unwrap();
    env
}

#[tokio::test]
async fn regex_search_reports_files_lines_and_skips() {
    let env = seeded();
    let out = env.ok("grep", json!({ "pattern": r"\badd\(" })).await;
    assert_eq!(lines(&out), [("src/lib.rs".to_string(), 1), ("src/main.rs".to_string(), 2)]);
    assert_eq!(out["matches"][1]["match"], "    let total = add(1, 2);");
    assert_eq!(out["files_skipped"], 2, "the large file and the binary file are skipped: {out}");
    assert_eq!(out["truncated"], false);
}

#[tokio::test]
async fn fixed_strings_case_and_hidden() {
    let env = seeded();
    let fixed = env.ok("grep", json!({ "pattern": "$5.00 (approx.)", "fixed_string": true })).await;
    assert_eq!(lines(&fixed), [("notes.txt".to_string(), 1)]);
    let (code, _) = env.err("grep", json!({ "pattern": "(unclosed" })).await;
    assert_eq!(code, "invalid_pattern");
    let sensitive = env.ok("grep", json!({ "pattern": "price", "path": "notes.txt" })).await;
    assert_eq!(sensitive["count"], 1);
    let insensitive = env.ok("grep", json!({ "pattern": "price", "path": "notes.txt", "ignore_case": true })).await;
    assert_eq!(insensitive["count"], 2);
    let hidden = env.ok("grep", json!({ "pattern": "add me" })).await;
    assert_eq!(hidden["count"], 0, "hidden folders are skipped by default");
    let shown = env.ok("grep", json!({ "pattern": "add me", "include_hidden": true })).await;
    assert_eq!(lines(&shown), [(".hidden/secret.txt".to_string(), 1)]);
    let shallow =
        env.ok("grep", json!({ "pattern": "add", "path": ".", "recursive": false, "ignore_case": true })).await;
    assert!(lines(&shallow).iter().all(|(p, _)| !p.contains('/')), "{shallow}");
}

#[tokio::test]
async fn context_lines_surround_each_match() {
    let env = seeded();
    let out = env.ok("grep", json!({ "pattern": "a \\+ b", "context_before": 1, "context_after": 2 })).await;
    let m = &out["matches"][0];
    assert_eq!(m["line"], 2);
    assert_eq!(m["context_before"], json!(["pub fn add(a: i32, b: i32) -> i32 {"]));
    assert_eq!(m["context_after"], json!(["}", "// TODO: Add tests"]));
}

#[tokio::test]
async fn close_matches_share_their_context_lines() {
    let env = seeded();
    env.write("close.txt", "a\nhit1\nb\nhit2\nc\nd\n");
    let out =
        env.ok("grep", json!({ "pattern": "hit", "path": "close.txt", "context_before": 1, "context_after": 1 })).await;
    assert_eq!(out["matches"][0]["context_before"], json!(["a"]));
    assert_eq!(out["matches"][0]["context_after"], json!(["b"]));
    assert_eq!(out["matches"][1]["context_before"], json!(["b"]), "the line between two matches belongs to both");
    assert_eq!(out["matches"][1]["context_after"], json!(["c"]));
    let adjacent = env.ok("grep", json!({ "pattern": "hit|b", "path": "close.txt", "context_after": 2 })).await;
    assert_eq!(adjacent["matches"][0]["context_after"], json!(["b", "hit2"]), "following matches are context too");
}

#[tokio::test]
async fn the_caller_cannot_raise_the_match_cap() {
    let env = Env::new("[tools.grep]\nenabled = true\nmax_matches = 5\n");
    env.write("many.txt", &"hit\n".repeat(50));
    let out = env.ok("grep", json!({ "pattern": "hit", "max_matches": 1000 })).await;
    assert_eq!(out["count"], 5);
    assert_eq!(out["truncated"], true);
    let fewer = env.ok("grep", json!({ "pattern": "hit", "max_matches": 2 })).await;
    assert_eq!(fewer["count"], 2);
}

#[tokio::test]
async fn grep_stays_inside_the_root() {
    let env = seeded();
    std::os::unix::fs::symlink(env.outside(), env.root().join("out_link")).unwrap();
    let (code, _) = env.err("grep", json!({ "pattern": "secret", "path": "../outside" })).await;
    assert_eq!(code, "path_outside_root");
    let out = env.ok("grep", json!({ "pattern": "top secret", "include_hidden": true })).await;
    assert_eq!(out["count"], 0, "links out of the root are not followed");
}
