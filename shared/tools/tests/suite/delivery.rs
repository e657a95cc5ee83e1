//! The tools whose effect happens outside them: `self_insert_artifact` (size and type checks before it promises
//! an insert) and `pre_response` attachments (checked files, refused where they cannot be delivered).

use super::Env;
use minibot_agent::directives::{MAX_IMAGE_BYTES, MAX_TEXT_BYTES};
use minibot_agent::{ChannelCapabilities, ToolContext, ToolError};
use serde_json::json;

#[tokio::test]
async fn an_image_too_large_for_a_request_is_refused() {
    let env = Env::new("");
    let mut big = b"\x89PNG\r\n\x1a\n".to_vec();
    big.resize(MAX_IMAGE_BYTES as usize + 1, 0);
    std::fs::write(env.root().join("huge.png"), &big).unwrap();
    let (code, message) = env.err("self_insert_artifact", json!({ "path": "huge.png", "as": "image" })).await;
    assert_eq!(code, "file_too_large");
    assert!(message.contains("huge.png") && message.contains(&MAX_IMAGE_BYTES.to_string()), "{message}");

    std::fs::write(env.root().join("ok.png"), &big[..1000]).unwrap();
    let inserted = env.ok("self_insert_artifact", json!({ "path": "ok.png", "as": "image" })).await;
    assert_eq!((inserted["inserted"].as_bool(), inserted["size"].as_u64()), (Some(true), Some(1000)));
    assert!(inserted["message"].as_str().unwrap().contains("added to your context"), "{inserted}");
}

#[tokio::test]
async fn a_file_named_like_an_image_must_hold_one() {
    let env = Env::new("");
    env.write("fake.png", "not an image at all");
    let (code, message) = env.err("self_insert_artifact", json!({ "path": "fake.png", "as": "image" })).await;
    assert_eq!(code, "not_an_image");
    assert!(message.contains("fake.png"), "{message}");
    // The model's `mime` does not make it one either.
    let (code, _) =
        env.err("self_insert_artifact", json!({ "path": "fake.png", "as": "image", "mime": "image/png" })).await;
    assert_eq!(code, "not_an_image");
}

#[tokio::test]
async fn image_types_models_do_not_take_are_refused() {
    let env = Env::new("");
    env.write("logo.svg", "<svg/>");
    let (code, message) = env.err("self_insert_artifact", json!({ "path": "logo.svg", "as": "image" })).await;
    assert_eq!(code, "unsupported_image_type");
    assert!(message.contains("image/svg+xml"), "{message}");
}

#[tokio::test]
async fn a_text_file_is_checked_and_a_long_one_says_it_is_cut() {
    let env = Env::new("");
    std::fs::write(env.root().join("blob.bin"), [0xff, 0xfe, 0x00, 0x81]).unwrap();
    let (code, _) = env.err("self_insert_artifact", json!({ "path": "blob.bin", "as": "file" })).await;
    assert_eq!(code, "not_text");

    env.write("notes.txt", "short");
    let inserted = env.ok("self_insert_artifact", json!({ "path": "notes.txt", "as": "file" })).await;
    assert_eq!(inserted["truncated"], false);
    assert_eq!(inserted["directive"]["message"]["content"][1]["type"], "file");

    // A multi-byte character straddling the cut does not make the file "not text".
    let long = format!("{}é{}", "a".repeat(MAX_TEXT_BYTES - 1), "b".repeat(10));
    env.write("long.txt", &long);
    let inserted = env.ok("self_insert_artifact", json!({ "path": "long.txt", "as": "file" })).await;
    assert_eq!(inserted["truncated"], true);
    assert!(inserted["message"].as_str().unwrap().contains("the rest was cut"), "{inserted}");

    let (code, _) = env.err("self_insert_artifact", json!({ "path": ".", "as": "file" })).await;
    assert_eq!(code, "not_a_file");
}

#[tokio::test]
async fn pre_response_attachments_are_checked_and_carried_as_a_directive() {
    let env = Env::new("");
    env.write("out/report.csv", "a,b\n");
    let result =
        env.ok("pre_response", json!({ "kind": "text", "attachments": [{ "path": "out/report.csv", "type": "document", "caption": "Q3" }] })).await;
    let absolute = env.root().join("out/report.csv").display().to_string();
    assert_eq!(
        result["directive"],
        json!({ "type": "attach_to_answer", "files": [{ "path": absolute, "relative": "out/report.csv", "caption": "Q3" }] })
    );
    assert_eq!(result["attachments"][0]["path"], "out/report.csv");
    assert_eq!(result["kind"], "text");

    let (code, message) = env
        .err("pre_response", json!({ "kind": "text", "attachments": [{ "path": "missing.csv", "type": "document" }] }))
        .await;
    assert_eq!(code, "file_not_found");
    assert!(message.starts_with("attachments[0]: "), "{message}");

    // No attachments: the directive still comes, empty, so the last call decides.
    let plain = env.ok("pre_response", json!({ "kind": "html" })).await;
    assert_eq!(plain["directive"], json!({ "type": "attach_to_answer", "files": [] }));
}

#[tokio::test]
async fn pre_response_attachments_are_refused_where_they_cannot_be_delivered() {
    let env = Env::new("");
    env.write("report.csv", "a,b\n");
    let args = json!({ "kind": "text", "attachments": [{ "path": "report.csv", "type": "document" }] });
    let no_files =
        ToolContext { channel: "web".into(), capabilities: ChannelCapabilities::default(), ..Default::default() };
    match env.call_in("pre_response", args.clone(), &no_files).await {
        Err(ToolError::RespondToModel { code, message }) => {
            assert_eq!(code, "channel_cannot_deliver_files");
            assert!(message.contains("web"), "{message}");
        }
        other => panic!("must be refused, got {other:?}"),
    }

    let without_storage = Env::new("[tools.file_storage]\nenabled = false\n[tools.grep]\nenabled = false\n");
    let (code, _) = without_storage.err("pre_response", args).await;
    assert_eq!(code, "file_storage_disabled");
}
