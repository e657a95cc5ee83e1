//! `read_docs` through the agent loop: the user manual in `docs/` is compiled into the binary, so the model can
//! list it, read a page and search it wherever minibot runs; `[tools.skills] native_disabled = ["minibot-docs"]`
//! takes the tool away.

use minibot_e2e::{Home, Reply, Script, ScriptedLlm, run, stderr, stdout};
use serde_json::{Value, json};

const CONFIGURATION: &str = include_str!("../../docs/configuration.md");

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap().to_string()).collect()
}

#[tokio::test]
async fn read_docs_lists_reads_and_searches_the_manual() {
    let llm = ScriptedLlm::start(vec![Script::new(
        "how do I configure history",
        vec![
            Reply::tool("read_docs", json!({})),
            Reply::tool("read_docs", json!({ "page": "configuration.md", "query": null })),
            Reply::tool("read_docs", json!({ "page": null, "query": "MAX_HISTORY_MESSAGES" })),
            Reply::tool("read_docs", json!({ "page": "no-such-page" })),
            Reply::text("See the configuration page."),
        ],
    )])
    .await;
    let home = Home::new(&llm.base_url(), "");
    let output = run(home.minibot(&["console", "--once", "how do I configure history"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "See the configuration page.\n");

    let requests = llm.requests();
    assert!(tool_names(&requests[0]).contains(&"read_docs".to_string()));
    let out: Vec<Value> = requests[4]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| serde_json::from_str(m["content"].as_str().unwrap()).unwrap())
        .collect();

    assert_eq!(out[0]["ok"], true);
    let pages = out[0]["pages"].as_array().unwrap();
    assert!(pages.contains(&json!({ "page": "configuration", "title": "Configuration" })), "{}", out[0]);
    assert!(pages.iter().any(|p| p["page"] == "tools"), "{}", out[0]);

    assert_eq!(out[1]["page"], "configuration");
    assert_eq!(out[1]["title"], "Configuration");
    let content = out[1]["content"].as_str().unwrap();
    assert_eq!(content, &CONFIGURATION[..content.len()], "the page as written");
    assert_eq!(out[1]["truncated"], CONFIGURATION.chars().count() > 30_000);

    let hits = out[2]["results"].as_array().unwrap();
    let hit = hits.iter().find(|h| h["page"] == "configuration").unwrap_or_else(|| panic!("{}", out[2]));
    let in_file = CONFIGURATION.lines().filter(|l| l.to_lowercase().contains("max_history_messages")).count();
    assert_eq!(hit["matches"], in_file);
    let snippets = hit["snippets"].as_array().unwrap();
    assert!(!snippets.is_empty() && snippets.len() <= 3);
    for snippet in snippets.iter().map(|s| s.as_str().unwrap()) {
        assert!(snippet.chars().count() <= 200, "{snippet}");
        let line = CONFIGURATION.lines().map(str::trim).find(|l| l.starts_with(snippet)).unwrap();
        assert!(line.to_lowercase().contains("max_history_messages"), "{line}");
    }

    assert_eq!(out[3]["ok"], false);
    assert_eq!(out[3]["error_code"], "page_not_found");
    assert!(out[3]["pages"].as_array().unwrap().contains(&json!("configuration")), "{}", out[3]);
}

#[tokio::test]
async fn read_docs_is_gone_when_the_docs_skill_is_disabled() {
    let llm = ScriptedLlm::start(vec![Script::new("hi", vec![Reply::text("hello")])]).await;
    let home = Home::new(&llm.base_url(), "[tools.skills]\nenabled = false\nnative_disabled = [\"minibot-docs\"]\n");
    let output = run(home.minibot(&["console", "--once", "hi"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let names = tool_names(&llm.requests()[0]);
    assert!(!names.contains(&"read_docs".to_string()), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("graph_")), "the graph is opt-in: {names:?}");
}
