use super::*;
use serde_json::json;

/// What the relay hands on for `input` with a `limit`-byte cap, as lines.
async fn relayed(input: Vec<u8>, limit: usize) -> Vec<Value> {
    let (reader, writer) = tokio::io::simplex(1024);
    let copy = tokio::spawn(relay(std::io::Cursor::new(input), writer, limit, "s".into()));
    let mut out = String::new();
    let mut reader = reader;
    tokio::io::AsyncReadExt::read_to_string(&mut reader, &mut out).await.unwrap();
    copy.await.unwrap();
    out.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

fn line(value: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(value).unwrap();
    bytes.push(b'\n');
    bytes
}

#[tokio::test]
async fn small_lines_pass_whole() {
    let one = json!({"jsonrpc": "2.0", "id": 1, "result": {"x": "y"}});
    let two = json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {}});
    let mut input = line(&one);
    input.extend(line(&two));
    assert_eq!(relayed(input, 100).await, vec![one, two]);
}

#[tokio::test]
async fn oversized_answer_becomes_an_error_for_its_id_with_id_first() {
    let big = json!({"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "x".repeat(50_000)}]}});
    let after = json!({"jsonrpc": "2.0", "id": 8, "result": {}});
    let mut input = line(&big);
    input.extend(line(&after));
    let out = relayed(input, 10_000).await;
    assert_eq!(out.len(), 2, "{out:?}");
    assert_eq!(out[0]["id"], 7);
    let error: ErrorData = serde_json::from_value(out[0]["error"].clone()).unwrap();
    assert_eq!(too_large(&error), Some(10_000));
    assert!(error.message.contains("exceeded 10000 bytes"), "{}", error.message);
    assert_eq!(out[1], after, "the next message still arrives");
}

#[tokio::test]
async fn oversized_answer_with_id_last_and_a_string_id() {
    // The TypeScript SDK's order: result first, id last.
    let text = format!(
        r#"{{"result":{{"content":[{{"type":"text","text":"{}","id":99}}]}},"jsonrpc":"2.0","id":"req-3"}}"#,
        "z".repeat(30_000)
    );
    let out = relayed(format!("{text}\n").into_bytes(), 1_000).await;
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0]["id"], "req-3");
}

#[tokio::test]
async fn oversized_request_or_unknown_id_is_dropped_silently() {
    let request =
        json!({"jsonrpc": "2.0", "id": 4, "method": "sampling/createMessage", "params": {"x": "y".repeat(5_000)}});
    let mut input = line(&request);
    input.extend(format!("{{\"result\":\"{}\"}}\n", "q".repeat(5_000)).into_bytes());
    input.extend(b"no json at all, just a very long line ".repeat(200));
    input.push(b'\n');
    assert!(relayed(input, 1_000).await.is_empty());
}

#[test]
fn head_scan_reads_top_level_keys_only() {
    let head = scan_head(br#"{"jsonrpc":"2.0","id":12,"result":{"content":[{"id":3,"#);
    assert_eq!(head, Head { id: Some(json!(12)), method: false });
    let head = scan_head(br#" { "result" : {"id": 5, "method": "x"}, "method":"ping","id":"a"}"#);
    assert_eq!(head, Head { id: Some(json!("a")), method: true });
    assert_eq!(scan_head(br#"{"result":"cut off here"#), Head::default());
    assert_eq!(scan_head(br#"{"id":{"nested":1}}"#), Head::default(), "an object is no request id");
}

#[test]
fn tail_scan_reads_the_last_member_only() {
    assert_eq!(last_member_id(br#"...]},"jsonrpc":"2.0","id":42}"#), Some(json!(42)));
    assert_eq!(last_member_id(b"...\"x\" , \"id\" : \"abc\" }\n"), Some(json!("abc")));
    // A nested object ends the message: its `id` is not the message's.
    assert_eq!(last_member_id(br#"...,"inner":{"id":3}}"#), None);
    assert_eq!(last_member_id(br#"...,"id":"a\"b"}"#), None);
    assert_eq!(last_member_id(br#"...,"xid":5}"#), None);
}
