//! The relation graph tools (`[extensions] modules = ["minibot.extensions.tools.graph"]`) through the agent loop,
//! on a real SQLite file: what the model writes with one turn, it reads back in the next; ids are normalised;
//! unlinking keeps history; merging re-keys edges; paths explain themselves; bad arguments come back as errors
//! the model can act on, and the turn goes on.

use minibot_e2e::{Home, Reply, Script, ScriptedLlm, run, stderr, stdout};
use serde_json::{Value, json};

const GRAPH: &str = "[extensions]\nmodules = [\"minibot.extensions.tools.graph\"]\n\
                     [extensions.config.\"minibot.extensions.tools.graph\"]\nsqlite_url = \"sqlite:///./graph.db\"\n";

/// One turn that makes `calls` in order, then answers "done".
fn turn(message: &str, calls: Vec<(&str, Value)>) -> Script {
    let mut replies: Vec<Reply> = calls.into_iter().map(|(name, args)| Reply::tool(name, args)).collect();
    replies.push(Reply::text("done"));
    Script::new(message, replies)
}

/// The results of every tool call of the turn that sent `message`, in call order, as the model read them.
fn results(llm: &ScriptedLlm, message: &str) -> Vec<Value> {
    let requests = llm.requests();
    let last = requests
        .iter()
        .rev()
        .find(|r| r["messages"].as_array().unwrap().iter().any(|m| m["role"] == "user" && m["content"] == message))
        .unwrap_or_else(|| panic!("no request for {message:?}"));
    let messages = last["messages"].as_array().unwrap();
    // The history of earlier turns comes first: only the calls after this message are this turn's.
    let start = messages.iter().rposition(|m| m["role"] == "user").unwrap();
    messages[start..]
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| serde_json::from_str(m["content"].as_str().unwrap()).unwrap())
        .collect()
}

async fn say(home: &Home, message: &str) {
    let output = run(home.minibot(&["console", "--once", message])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "done\n");
}

#[tokio::test]
async fn links_written_in_one_turn_are_read_back_in_the_next() {
    let llm = ScriptedLlm::start(vec![
        turn(
            "remember alex",
            vec![
                (
                    "graph_link",
                    json!({ "source": "person:alex", "rel": "works_on", "target": "project:website",
                            "attrs": "{\"since\": \"2024\"}", "graph": null }),
                ),
                ("graph_link", json!({ "source": "person:alex", "rel": "uses", "target": "tech:python" })),
                ("graph_link", json!({ "source": "person:alex", "rel": "works_on", "target": "project:website" })),
            ],
        ),
        turn("who is alex", vec![("graph_neighbors", json!({ "node": "person:alex", "direction": "both" }))]),
    ])
    .await;
    let home = Home::new(&llm.base_url(), GRAPH);
    say(&home, "remember alex").await;
    let written = results(&llm, "remember alex");
    assert_eq!(written[0]["created"], true, "{written:?}");
    assert_eq!(written[0]["edge"]["attrs"], json!({ "since": "2024" }));
    assert!(written[0]["edge"]["valid_from"].as_str().unwrap().ends_with("+00:00"), "{written:?}");
    assert_eq!(written[2]["created"], false, "the same triple again updates it: {written:?}");
    assert!(written[2]["edge"].get("attrs").is_none(), "attrs were replaced by none: {written:?}");
    assert!(home.path().join("graph.db").exists());

    say(&home, "who is alex").await;
    let around = &results(&llm, "who is alex")[0];
    assert_eq!(around["found"], true, "{around}");
    assert_eq!(around["nodes"], json!(["person:alex", "project:website", "tech:python"]));
    let rels: Vec<&str> = around["edges"].as_array().unwrap().iter().map(|e| e["rel"].as_str().unwrap()).collect();
    assert_eq!(rels, ["works_on", "uses"], "{around}");
    assert_eq!(around["truncated"], false);

    let tools: Vec<String> = llm.requests()[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .filter(|name| name.starts_with("graph_"))
        .collect();
    assert_eq!(tools.len(), 6, "{tools:?}");
}

#[tokio::test]
async fn a_graph_made_by_minibot_keeps_its_rows() {
    let llm = ScriptedLlm::start(vec![turn(
        "what does alex prefer",
        vec![("graph_neighbors", json!({ "node": "Person:Alex" }))],
    )])
    .await;
    let home = Home::new(&llm.base_url(), GRAPH);
    // The table and a row as MiniBot's SQLAlchemy store writes them.
    let url = format!("sqlite://{}?mode=rwc", home.path().join("graph.db").display());
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    for statement in [
        "CREATE TABLE graph_edges (graph VARCHAR(64) NOT NULL, owner_id VARCHAR(128) NOT NULL, \
         source VARCHAR(256) NOT NULL, rel VARCHAR(128) NOT NULL, target VARCHAR(256) NOT NULL, attrs TEXT, \
         valid_from DATETIME NOT NULL, valid_to DATETIME)",
        "CREATE UNIQUE INDEX ux_graph_edges_active ON graph_edges (graph, owner_id, source, rel, target) \
         WHERE valid_to IS NULL",
        "INSERT INTO graph_edges VALUES ('memory', 'primary', 'person:alex', 'prefers', 'tech:vue', NULL, \
         '2025-01-31 09:30:00.123456', NULL)",
    ] {
        sqlx::query(sqlx::AssertSqlSafe(statement)).execute(&pool).await.unwrap();
    }
    pool.close().await;

    say(&home, "what does alex prefer").await;
    let around = &results(&llm, "what does alex prefer")[0];
    assert_eq!(
        around["edges"],
        json!([{ "source": "person:alex", "rel": "prefers", "target": "tech:vue",
                                           "valid_from": "2025-01-31T09:30:00.123456+00:00" }])
    );
}

#[tokio::test]
async fn unicode_ids_are_normalised_when_written_and_searched() {
    let llm = ScriptedLlm::start(vec![turn(
        "note josé",
        vec![
            (
                "graph_link",
                json!({ "source": "Persona: José  Núñez", "rel": "Trabaja En", "target": "Proyecto:Café-Ñandú" }),
            ),
            ("graph_search", json!({ "query": "JOSÉ" })),
            ("graph_search", json!({ "query": "persona:" })),
            ("graph_search", json!({ "query": "proyecto cafe" })),
        ],
    )])
    .await;
    let home = Home::new(&llm.base_url(), GRAPH);
    say(&home, "note josé").await;
    let out = results(&llm, "note josé");
    let edge = json!({ "source": "persona:jose_nunez", "rel": "trabaja_en", "target": "proyecto:cafe_nandu" });
    for key in ["source", "rel", "target"] {
        assert_eq!(out[0]["edge"][key], edge[key], "{}", out[0]);
    }
    assert_eq!(out[1]["query"], "JOSÉ");
    assert_eq!(out[1]["edges"].as_array().unwrap().len(), 1, "{}", out[1]);
    assert_eq!(out[2]["edges"].as_array().unwrap().len(), 1, "a typed prefix finds its nodes: {}", out[2]);
    assert_eq!(out[3]["edges"], json!([]), "the `_` of `proyecto_cafe` is no LIKE wildcard: {}", out[3]);
}

#[tokio::test]
async fn unlink_keeps_the_edge_as_history() {
    let llm = ScriptedLlm::start(vec![turn(
        "alex moved on",
        vec![
            ("graph_link", json!({ "source": "person:alex", "rel": "works_on", "target": "project:website" })),
            ("graph_link", json!({ "source": "person:alex", "rel": "works_on", "target": "project:shop" })),
            ("graph_unlink", json!({ "source": "person:alex", "rel": "works_on", "target": "project:website" })),
            ("graph_unlink", json!({ "source": "person:alex", "rel": "works_on", "target": "project:website" })),
            ("graph_neighbors", json!({ "node": "person:alex" })),
            ("graph_neighbors", json!({ "node": "person:alex", "history": true })),
            ("graph_search", json!({ "query": "website" })),
            ("graph_search", json!({ "query": "website", "history": true })),
        ],
    )])
    .await;
    let home = Home::new(&llm.base_url(), GRAPH);
    say(&home, "alex moved on").await;
    let out = results(&llm, "alex moved on");
    assert_eq!(out[2], json!({ "closed": true }));
    assert_eq!(out[3], json!({ "closed": false }), "nothing live is left to close");
    assert_eq!(out[4]["nodes"], json!(["person:alex", "project:shop"]), "{}", out[4]);
    assert_eq!(out[4]["history"], json!([]));
    let history = out[5]["history"].as_array().unwrap();
    assert_eq!(history.len(), 1, "{}", out[5]);
    assert_eq!(history[0]["target"], "project:website");
    assert!(history[0]["valid_to"].as_str().is_some(), "{}", out[5]);
    assert_eq!(out[6]["edges"], json!([]));
    assert_eq!(out[7]["edges"][0]["target"], "project:website");
    assert!(out[7]["edges"][0]["valid_to"].is_string());
}

#[tokio::test]
async fn merge_then_path_goes_through_the_canonical_node() {
    let llm = ScriptedLlm::start(vec![turn(
        "dedupe alex",
        vec![
            ("graph_link", json!({ "source": "person:alex", "rel": "prefers", "target": "tech:vue" })),
            ("graph_link", json!({ "source": "person:alexander", "rel": "prefers", "target": "tech:vue" })),
            ("graph_link", json!({ "source": "person:alexander", "rel": "works_on", "target": "project:site" })),
            ("graph_link", json!({ "source": "project:legacy", "rel": "migration_target", "target": "tech:vue" })),
            ("graph_merge", json!({ "source": "person:alexander", "target": "person:alex" })),
            ("graph_path", json!({ "source": "person:alex", "target": "project:legacy" })),
            ("graph_path", json!({ "source": "person:alexander", "target": "project:site" })),
        ],
    )])
    .await;
    let home = Home::new(&llm.base_url(), GRAPH);
    say(&home, "dedupe alex").await;
    let out = results(&llm, "dedupe alex");
    assert_eq!(
        out[4],
        json!({ "merged": "person:alexander", "into": "person:alex", "edges_rewritten": 1,
                "active_duplicates_discarded": 1, "history_edges_rekeyed": 0 })
    );
    assert_eq!(out[5]["found"], true, "{}", out[5]);
    assert_eq!(out[5]["nodes"], json!(["person:alex", "tech:vue", "project:legacy"]));
    assert_eq!(
        out[5]["hops"],
        json!([
            { "source": "person:alex", "rel": "prefers", "target": "tech:vue", "direction": "forward" },
            { "source": "project:legacy", "rel": "migration_target", "target": "tech:vue", "direction": "backward" },
        ])
    );
    assert_eq!(out[6]["found"], false);
    assert_eq!(out[6]["reason"], "unknown node(s): person:alexander", "the old id is gone: {}", out[6]);
}

#[tokio::test]
async fn a_path_that_is_not_there_says_why() {
    let llm = ScriptedLlm::start(vec![turn(
        "how are they related",
        vec![
            ("graph_link", json!({ "source": "a:one", "rel": "r", "target": "a:two" })),
            ("graph_link", json!({ "source": "a:two", "rel": "r", "target": "a:three" })),
            ("graph_link", json!({ "source": "b:island", "rel": "r", "target": "b:other" })),
            ("graph_path", json!({ "source": "a:one", "target": "b:island" })),
            ("graph_path", json!({ "source": "a:one", "target": "a:three", "max_depth": 1 })),
            ("graph_path", json!({ "source": "a:one", "target": "a:three", "max_depth": 50 })),
        ],
    )])
    .await;
    let home = Home::new(&llm.base_url(), GRAPH);
    say(&home, "how are they related").await;
    let out = results(&llm, "how are they related");
    assert_eq!(out[3], json!({ "found": false, "reason": "no path", "nodes": [], "hops": [] }));
    assert_eq!(out[4]["reason"], "shortest path is longer than max_depth=1");
    assert_eq!(out[5]["found"], true, "a max_depth above 8 is read as 8: {}", out[5]);
}

#[tokio::test]
async fn bad_arguments_from_the_model_are_refused_and_the_turn_goes_on() {
    let llm = ScriptedLlm::start(vec![turn(
        "bad calls",
        vec![
            ("graph_link", json!({ "source": "person:alex", "rel": "!!!", "target": "tech:vue" })),
            ("graph_link", json!({ "source": "person:alex", "rel": "uses", "target": "tech:vue", "attrs": "[1, 2]" })),
            ("graph_link", json!({ "source": "person:alex", "rel": "uses", "target": "tech:vue", "attrs": "{oops" })),
            ("graph_link", json!({ "source": "person:alex", "rel": "uses", "target": "" })),
            ("graph_neighbors", json!({ "node": "person:alex", "depth": 0 })),
            ("graph_neighbors", json!({ "node": "person:alex", "depth": "two" })),
            ("graph_neighbors", json!({ "node": "person:alex", "direction": "sideways" })),
            ("graph_merge", json!({ "source": "Person:Alex", "target": "person:alex" })),
            ("graph_search", json!({ "query": "alex" })),
        ],
    )])
    .await;
    let home = Home::new(&llm.base_url(), GRAPH);
    say(&home, "bad calls").await;
    let out = results(&llm, "bad calls");
    let refusal = |i: usize, fragment: &str| {
        assert_eq!(out[i]["ok"], false, "{}", out[i]);
        assert_eq!(out[i]["error_code"], "invalid_arguments", "{}", out[i]);
        let error = out[i]["error"].as_str().unwrap();
        assert!(error.contains(fragment), "{fragment:?} in {error:?}");
    };
    refusal(0, "rel must contain at least one letter or digit");
    refusal(1, "attrs must be a JSON object");
    refusal(2, "attrs must be valid JSON");
    refusal(3, "target is required");
    refusal(4, "depth must be at least 1");
    refusal(5, "invalid type");
    refusal(6, "direction must be one of: out, in, both");
    refusal(7, "source and target are the same node");
    assert_eq!(out[8]["edges"], json!([]), "nothing was stored: {}", out[8]);
}

#[tokio::test]
async fn graph_settings_that_are_not_built_or_unknown_stop_start_up() {
    for (extra, expected) in [
        ("echo = true\n", "SQL statement logging of the relation graph is not supported by this version yet"),
        ("sqlite_path = \"g.db\"\n", "unknown key `sqlite_path`"),
    ] {
        let home = Home::new("http://127.0.0.1:9/v1", &format!("{GRAPH}{extra}"));
        let output = run(home.minibot(&["console", "--once", "hi"])).await;
        assert!(!output.status.success());
        assert!(stderr(&output).contains(expected), "{expected:?} in {}", stderr(&output));
    }
}
