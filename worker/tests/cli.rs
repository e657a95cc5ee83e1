#![allow(clippy::expect_used, clippy::unwrap_used)]
//! The `minibot-worker` binary as an operator starts it. Being this package's own integration test, it also
//! makes `cargo test --workspace` build the binary that the end-to-end tests start.

use std::process::{Command, Output};

fn worker_with_config(config: &str) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    std::fs::write(&path, config).unwrap();
    Command::new(env!("CARGO_BIN_EXE_minibot-worker")).arg("--config").arg(&path).output().unwrap()
}

#[test]
fn a_bad_backend_is_refused_with_its_key() {
    let output = worker_with_config("[llm]\napi_key = \"k\"\n[tasks]\nbackend = \"kafka\"\n");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("tasks.backend"), "{stderr}");
}

#[test]
fn an_unknown_key_is_refused_by_name() {
    let output = worker_with_config("[llm]\napi_key = \"k\"\n[tasks]\nlocal_wrkers = 3\n");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("local_wrkers"), "{stderr}");
}

#[test]
fn an_unreachable_broker_is_named_without_its_password() {
    let output = worker_with_config(
        "[llm]\napi_key = \"k\"\n[tasks]\nbackend = \"rabbitmq\"\n\
         [rabbitmq]\nbroker_url = \"amqp://guest:s3cret@127.0.0.1:9/%2f\"\nmessage_key = \"test-message-key-0123456789abcdef0123456789\"\n",
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("rabbitmq.broker_url"), "{stderr}");
    assert!(!stderr.contains("s3cret"), "the password stays out of the message: {stderr}");
}
