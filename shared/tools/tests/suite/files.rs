use super::Env;
use serde_json::json;

#[tokio::test]
async fn write_read_list_info_round_trip() {
    let env = Env::new("");
    let written = env.ok("write_file", json!({ "path": "notes/today.md", "content": "# Plan\n- ship\n" })).await;
    assert_eq!(written["bytes_written"], 14);
    assert_eq!(written["path_relative"], "notes/today.md");
    assert_eq!(written["path_scope"], "inside_root");
    assert_eq!(std::fs::read_to_string(env.root().join("notes/today.md")).unwrap(), "# Plan\n- ship\n");

    let read = env.ok("read_file", json!({ "path": "notes/today.md" })).await;
    assert_eq!(read["content"], "# Plan\n- ship\n");
    assert_eq!(read["truncated"], false);

    env.write("notes/B.txt", "b");
    env.write("notes/a.txt", "a");
    let listed = env.ok("list_files", json!({ "folder": "notes" })).await;
    let names: Vec<&str> = listed["entries"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["a.txt", "B.txt", "today.md"], "sorted by name, case-insensitively");
    assert_eq!(listed["count"], 3);
    let root_list = env.ok("list_files", json!({})).await;
    assert_eq!(root_list["entries"][0]["is_dir"], true);

    let info = env.ok("file_info", json!({ "path": "notes/today.md" })).await;
    assert_eq!(info["mime"], "text/markdown");
    assert_eq!(info["size_bytes"], 14);
    assert_eq!(info["extension"], ".md");
    assert_eq!(info["is_image"], false);
    assert!(info["modified_at"].as_str().unwrap().ends_with('Z'));
}

#[tokio::test]
async fn write_refuses_overwrite_empty_and_oversized_content() {
    let env = Env::new("");
    env.ok("write_file", json!({ "path": "a.txt", "content": "one" })).await;
    let (code, _) = env.err("write_file", json!({ "path": "a.txt", "content": "two" })).await;
    assert_eq!(code, "file_exists");
    env.ok("write_file", json!({ "path": "a.txt", "content": "two", "overwrite": true })).await;
    assert_eq!(std::fs::read_to_string(env.root().join("a.txt")).unwrap(), "two");
    let (code, _) = env.err("write_file", json!({ "path": "b.txt", "content": "" })).await;
    assert_eq!(code, "invalid_arguments");
    let (code, _) = env.err("write_file", json!({ "path": "big.txt", "content": "x".repeat(64_001) })).await;
    assert_eq!(code, "content_too_large");
    assert!(!env.root().join("big.txt").exists());
}

#[tokio::test]
async fn missing_files_tell_the_model_not_to_retry() {
    let env = Env::new("");
    let (code, message) = env.err("read_file", json!({ "path": "nope.txt" })).await;
    assert_eq!(code, "file_not_found");
    assert!(message.contains("Do not retry"), "{message}");
    let (code, _) = env.err("list_files", json!({ "folder": "nope" })).await;
    assert_eq!(code, "folder_not_found");
}

#[tokio::test]
async fn read_file_refuses_binary_and_caps_size() {
    let env = Env::new("");
    std::fs::write(env.root().join("blob.bin"), [0xff, 0xfe, 0x00, 0x80]).unwrap();
    let (code, _) = env.err("read_file", json!({ "path": "blob.bin" })).await;
    assert_eq!(code, "not_utf8");
    // A multi-byte character straddles the 128 KiB cut: the text is still valid and marked truncated.
    let text = format!("{}é{}", "a".repeat(131_071), "b".repeat(100));
    env.write("long.txt", &text);
    let read = env.ok("read_file", json!({ "path": "long.txt" })).await;
    assert_eq!(read["truncated"], true);
    assert_eq!(read["content"].as_str().unwrap().len(), 131_071);
}

#[tokio::test]
async fn code_read_pages_through_lines() {
    let env = Env::new("");
    let text: String = (1..=450).map(|n| format!("line {n}\n")).collect();
    env.write("big.py", &text);
    let first = env.ok("code_read", json!({ "path": "big.py" })).await;
    assert_eq!((first["start_line"].as_u64(), first["end_line"].as_u64()), (Some(1), Some(200)));
    assert_eq!(first["total_lines"], 450);
    assert_eq!(first["has_more"], true);
    assert!(first["content"].as_str().unwrap().starts_with("line 1\nline 2\n"));
    let last = env.ok("code_read", json!({ "path": "big.py", "offset": 400, "limit": 1000 })).await;
    assert_eq!(last["limit"], 400, "limit is capped at 400");
    assert_eq!((last["start_line"].as_u64(), last["end_line"].as_u64()), (Some(401), Some(450)));
    assert_eq!(last["has_more"], false);
    let past = env.ok("code_read", json!({ "path": "big.py", "offset": 10_000 })).await;
    assert_eq!(past["content"], "");
}

#[tokio::test]
async fn glob_matches_at_any_depth() {
    let env = Env::new("");
    env.write("a.csv", "1");
    env.write("deep/er/b.csv", "2");
    env.write("deep/c.txt", "3");
    let found = env.ok("glob_files", json!({ "pattern": "*.csv" })).await;
    let paths: Vec<&str> = found["entries"].as_array().unwrap().iter().map(|e| e["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["a.csv", "deep/er/b.csv"]);
    let scoped = env.ok("glob_files", json!({ "pattern": "**/*.txt", "folder": "deep" })).await;
    assert_eq!(scoped["count"], 1);
    let limited = env.ok("glob_files", json!({ "pattern": "*", "limit": 2 })).await;
    assert_eq!((limited["count"].as_u64(), limited["truncated"].as_bool()), (Some(2), Some(true)));
    let (code, _) = env.err("glob_files", json!({ "pattern": "../*" })).await;
    assert_eq!(code, "invalid_arguments");
}

#[tokio::test]
async fn move_and_delete() {
    let env = Env::new("");
    env.write("a.txt", "A");
    env.write("b.txt", "B");
    let (code, _) = env.err("move_file", json!({ "source_path": "a.txt", "destination_path": "b.txt" })).await;
    assert_eq!(code, "file_exists");
    let moved = env.ok("move_file", json!({ "source_path": "a.txt", "destination_path": "sub/c.txt" })).await;
    assert_eq!(moved["destination_path_relative"], "sub/c.txt");
    assert_eq!(std::fs::read_to_string(env.root().join("sub/c.txt")).unwrap(), "A");
    assert!(!env.root().join("a.txt").exists());
    env.ok("move_file", json!({ "source_path": "sub/c.txt", "destination_path": "b.txt", "overwrite": true })).await;
    assert_eq!(std::fs::read_to_string(env.root().join("b.txt")).unwrap(), "A");

    env.write("dir/x/y.txt", "y");
    let (code, _) = env.err("delete_file", json!({ "path": "dir" })).await;
    assert_eq!(code, "folder_not_empty");
    let (code, _) = env.err("delete_file", json!({ "path": "dir", "target": "file", "recursive": true })).await;
    assert_eq!(code, "target_mismatch");
    let deleted = env.ok("delete_file", json!({ "path": "dir", "recursive": true })).await;
    assert_eq!((deleted["deleted"].as_bool(), deleted["deleted_count"].as_u64()), (Some(true), Some(3)));
    assert!(!env.root().join("dir").exists());
    let missing = env.ok("delete_file", json!({ "path": "dir" })).await;
    assert_eq!(missing["deleted"], false);
    let (code, _) = env.err("delete_file", json!({ "path": "." , "recursive": true })).await;
    assert_eq!(code, "invalid_path");
    assert!(env.root().is_dir());
}

#[tokio::test]
async fn send_file_on_a_channel_without_files_is_refused_not_reported_sent() {
    let env = Env::new("");
    env.write("report.pdf", "%PDF-1.4");
    let console = minibot_agent::ToolContext { channel: "console".into(), chat_id: Some(1), ..Default::default() };
    let result = env.call_in("send_file", json!({ "path": "report.pdf" }), &console).await;
    let Err(minibot_agent::ToolError::RespondToModel { code, message }) = result else {
        panic!("send_file on the console must fail, got {result:?}");
    };
    assert_eq!(code, "channel_cannot_deliver_files");
    assert!(message.contains("console"), "{message}");
}

#[tokio::test]
async fn send_file_and_self_insert_return_directives() {
    let env = Env::new("");
    env.write("report.pdf", "%PDF-1.4");
    std::fs::write(env.root().join("chart.png"), b"\x89PNG\r\n\x1a\nrest").unwrap();
    let sent = env.ok("send_file", json!({ "path": "report.pdf", "caption": "Q3" })).await;
    let absolute = env.root().join("report.pdf").display().to_string();
    assert_eq!(
        sent["directive"],
        json!({ "type": "send_file", "path": absolute, "relative": "report.pdf", "caption": "Q3" })
    );
    assert_eq!(sent["size_bytes"], 8);

    let inserted = env.ok("self_insert_artifact", json!({ "path": "chart.png", "as": "image", "text": "look" })).await;
    let message = &inserted["directive"]["message"];
    assert_eq!(inserted["directive"]["type"], "append_message");
    assert_eq!(message["role"], "user");
    assert_eq!(message["content"][0], json!({ "type": "text", "text": "look" }));
    assert_eq!(message["content"][1]["type"], "image");
    assert_eq!(message["content"][1]["source"]["type"], "managed_file");
    let (code, _) = env.err("self_insert_artifact", json!({ "path": "report.pdf", "as": "image" })).await;
    assert_eq!(code, "not_an_image");
    let (code, _) =
        env.err("self_insert_artifact", json!({ "path": "chart.png", "as": "file", "role": "system" })).await;
    assert_eq!(code, "role_not_allowed");
}

#[tokio::test]
async fn worker_set_has_the_generic_tools_and_no_channel_tools() {
    let env = Env::new("[tools.apply_patch]\nenabled = true\n[tools.http_client]\nenabled = true\n");
    let worker = minibot_tools::worker_generic_tools(&env.services);
    let names = worker.names();
    for expected in [
        "http_request",
        "list_files",
        "glob_files",
        "file_info",
        "write_file",
        "read_file",
        "move_file",
        "delete_file",
        "code_read",
        "grep",
        "bash",
        "python_execute",
        "python_environment_info",
        "apply_patch",
        "get_settings",
        "current_datetime",
        "calculate_expression",
    ] {
        assert!(names.iter().any(|n| n == expected), "worker lacks {expected}: {names:?}");
    }
    for absent in ["send_file", "self_insert_artifact", "pre_response", "chat_history_trim"] {
        assert!(!names.iter().any(|n| n == absent), "worker must not get {absent}");
    }
}
