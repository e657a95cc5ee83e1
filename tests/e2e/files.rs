//! Files that tools deliver: `send_file` and `pre_response` attachments reach the console (which prints the
//! file's name, size and absolute path), a task's attachments come with its result, and `self_insert_artifact`
//! puts an image into the next request the model receives.

use minibot_e2e::{Home, Reply, Script, ScriptedLlm, run, stderr, stdout};
use serde_json::{Value, json};

const FILES: &str = "[tools.file_storage]\nenabled = true\nroot_dir = \"files\"\n";

/// A 1×1 PNG and its base64 text.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4, 0x89, 0x00, 0x00, 0x00, 0x0d, 0x49,
    0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0, 0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d,
    0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];
const PNG_BASE64: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg==";

/// Writes a file under the home's managed root and returns its absolute path as the assistant resolves it.
fn managed(home: &Home, rel: &str, bytes: &[u8]) -> String {
    let path = home.path().join("files").join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, bytes).unwrap();
    path.canonicalize().unwrap().display().to_string()
}

/// A specialist that may only declare attachments.
fn reporter(home: &Home) {
    std::fs::create_dir_all(home.path().join("agents")).unwrap();
    std::fs::write(
        home.path().join("agents/reporter.md"),
        "---\nname: reporter\ndescription: Writes reports\ntools_allow:\n  - pre_response\n---\nYou write reports.\n",
    )
    .unwrap();
}

pub(crate) fn tool_results(request: &Value) -> Vec<Value> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| serde_json::from_str(m["content"].as_str().unwrap()).unwrap())
        .collect()
}

#[tokio::test]
async fn send_file_prints_the_file_in_the_console() {
    let llm = ScriptedLlm::start(vec![Script::new(
        "send me the report",
        vec![
            Reply::tool("send_file", json!({ "path": "out/report.csv", "caption": "Q3 numbers" })),
            Reply::text("I sent you the report."),
        ],
    )])
    .await;
    let home = Home::new(&llm.base_url(), FILES);
    let absolute = managed(&home, "out/report.csv", &vec![b'x'; 1200]);
    let output = run(home.minibot(&["console", "--once", "send me the report"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), format!("[file] report.csv (1.2 KB) {absolute}\nQ3 numbers\nI sent you the report.\n"));
    let result = &tool_results(&llm.requests()[1])[0];
    assert_eq!(result["sent"], true, "{result}");
    assert!(result.get("directive").is_none(), "the model reads the result, not the directive: {result}");
}

#[tokio::test]
async fn pre_response_attachments_come_before_the_answer() {
    let llm = ScriptedLlm::start(vec![Script::new(
        "chart please",
        vec![
            Reply::tool(
                "pre_response",
                json!({ "kind": "text", "attachments": [{ "path": "chart.png", "type": "photo", "caption": null }] }),
            ),
            Reply::text("Here is the chart."),
        ],
    )])
    .await;
    let home = Home::new(&llm.base_url(), FILES);
    let absolute = managed(&home, "chart.png", PNG);
    let output = run(home.minibot(&["console", "--once", "chart please"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), format!("[file] chart.png (70 B) {absolute}\nHere is the chart.\n"));
}

#[tokio::test]
async fn a_task_result_brings_the_specialists_attachments() {
    let llm = ScriptedLlm::start(vec![
        Script::new(
            "make me a report",
            vec![
                Reply::tool("spawn_task", json!({ "prompt": "write the report", "agent_name": "reporter" })),
                Reply::text("The reporter is on it."),
            ],
        ),
        Script::new(
            "write the report",
            vec![
                Reply::tool(
                    "pre_response",
                    json!({ "kind": "text", "attachments": [{ "path": "report.csv", "type": "document", "caption": "fresh" }] }),
                ),
                Reply::text("Report attached."),
            ],
        ),
    ])
    .await;
    let home = Home::new(&llm.base_url(), &format!("{FILES}[tasks]\nlocal_workers = 1\n"));
    reporter(&home);
    let absolute = managed(&home, "report.csv", b"a,b\n1,2\n");
    let output = run(home.minibot(&["console", "--once", "make me a report"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(
        stdout(&output),
        format!("The reporter is on it.\n[file] report.csv (8 B) {absolute}\nfresh\nReport attached.\n")
    );
}

#[tokio::test]
async fn a_delegated_result_lists_the_attachments_for_the_main_agent_to_send() {
    let llm = ScriptedLlm::start(vec![
        Script::new(
            "get me the report",
            vec![
                Reply::tool("delegate", json!({ "prompt": "write the report", "agent_name": "reporter" })),
                Reply::text("Asked the reporter."),
            ],
        ),
        Script::new(
            "write the report",
            vec![
                Reply::tool(
                    "pre_response",
                    json!({ "kind": "text", "attachments": [{ "path": "report.csv", "type": "document", "caption": "fresh" }] }),
                ),
                Reply::text("Report attached."),
            ],
        ),
        Script::containing(
            "send them with send_file if the user should get them:\n- report.csv (fresh)",
            vec![Reply::tool("send_file", json!({ "path": "report.csv" })), Reply::text("Here is your report.")],
        ),
    ])
    .await;
    let home = Home::new(&llm.base_url(), &format!("{FILES}[tasks]\nlocal_workers = 1\n"));
    reporter(&home);
    let absolute = managed(&home, "report.csv", b"a,b\n1,2\n");
    let output = run(home.minibot(&["console", "--once", "get me the report"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(
        stdout(&output),
        format!("Asked the reporter.\n[file] report.csv (8 B) {absolute}\nHere is your report.\n")
    );
}

#[tokio::test]
async fn self_insert_artifact_puts_the_image_into_the_next_request() {
    let llm = ScriptedLlm::start(vec![Script::new(
        "what is in chart.png?",
        vec![
            Reply::tool("self_insert_artifact", json!({ "path": "chart.png", "as": "image" })),
            Reply::text("A single transparent pixel."),
        ],
    )])
    .await;
    let home = Home::new(&llm.base_url(), FILES);
    managed(&home, "chart.png", PNG);
    let output = run(home.minibot(&["console", "--once", "what is in chart.png?"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "A single transparent pixel.\n");

    let requests = llm.requests();
    assert_eq!(requests.len(), 2);
    let messages = requests[1]["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(&roles[roles.len() - 3..], ["assistant", "tool", "user"], "the image follows the tool result");
    let parts = messages.last().unwrap()["content"].as_array().unwrap();
    assert_eq!(parts[0]["type"], "text");
    assert!(parts[0]["text"].as_str().unwrap().contains("chart.png"), "{parts:?}");
    assert_eq!(
        parts[1],
        json!({ "type": "image_url", "image_url": { "url": format!("data:image/png;base64,{PNG_BASE64}") } })
    );
    let result = &tool_results(&requests[1])[0];
    assert_eq!((result["ok"].as_bool(), result["inserted"].as_bool()), (Some(true), Some(true)), "{result}");

    // The image is not kept in the history: the next turn sends text only.
    llm.add_script(Script::new("thanks", vec![Reply::text("You're welcome.")]));
    let output = run(home.minibot(&["console", "--once", "thanks"])).await;
    assert_eq!(stdout(&output), "You're welcome.\n");
    let last = llm.requests().pop().unwrap();
    assert!(!last.to_string().contains("image_url"), "{last}");
}
