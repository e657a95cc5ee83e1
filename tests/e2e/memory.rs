//! The key/value memory tools (`[tools.kv_memory]`) end to end: the scripted model calls them through the real
//! `minibot console --once`, on the SQLite file the config names, and reads their results back.

use minibot_e2e::{Home, Reply, Script, ScriptedLlm, run, stderr, stdout};
use serde_json::{Value, json};
use std::path::PathBuf;

const MEMORY: &str = "[tools.kv_memory]\nenabled = true\n";

fn database(home: &Home) -> PathBuf {
    home.path().join("data/kv_memory.db")
}

/// Runs one turn and returns the results of its tool calls, in call order.
async fn turn(llm: &ScriptedLlm, home: &Home, message: &str) -> Vec<Value> {
    let output = run(home.minibot(&["console", "--once", message])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert!(!stdout(&output).is_empty(), "the turn answered");
    let requests = llm.requests();
    let last = requests.last().unwrap()["messages"].as_array().unwrap().clone();
    // History from earlier runs comes along: only what follows this turn's user message belongs to it.
    let start = last.iter().rposition(|m| m["role"] == "user" && m["content"] == message).unwrap();
    last[start..]
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| serde_json::from_str(m["content"].as_str().unwrap()).unwrap())
        .collect()
}

fn create(title: &str, data: &str, category: &str) -> Reply {
    Reply::tool(
        "memory_create",
        json!({ "title": title, "data": data, "category": category, "metadata": null, "source": null,
                "expires_at": null }),
    )
}

fn search(query: &str) -> Reply {
    Reply::tool(
        "memory_search",
        json!({ "query": query, "category": null, "source": null, "updated_after": null, "updated_before": null,
                "limit": null, "offset": null }),
    )
}

fn titles(result: &Value) -> Vec<&str> {
    result["entries"].as_array().unwrap().iter().map(|e| e["title"].as_str().unwrap()).collect()
}

async fn count_rows(path: &std::path::Path, id: &str) -> i64 {
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display())).await.unwrap();
    let n = sqlx::query_scalar("SELECT COUNT(*) FROM kv_memory WHERE id = ?1").bind(id).fetch_one(&pool).await.unwrap();
    pool.close().await;
    n
}

#[tokio::test]
async fn every_tool_works_and_memory_persists_across_runs() {
    let llm = ScriptedLlm::start(vec![Script::new(
        "remember my car",
        vec![
            Reply::tool(
                "memory_create",
                json!({ "title": "Vehículos", "data": "Seat Ibiza, matrícula 1234-ABC", "category": "vehículos",
                        "metadata": "{\"plate\": \"1234-ABC\"}", "source": "chat", "expires_at": null }),
            ),
            create("VEHÍCULOS", "a second copy", "otros"),
            create("ÜBER den Garten", "Tomaten gießen", "otros"),
            Reply::text("Saved."),
        ],
    )])
    .await;
    let home = Home::new(&llm.base_url(), MEMORY);
    let first = turn(&llm, &home, "remember my car").await;
    assert_eq!(first[0]["created"], true, "{}", first[0]);
    assert_eq!(first[0]["category"], "vehículos");
    assert_eq!(first[0]["metadata"], json!({ "plate": "1234-ABC", "category": "vehículos" }));
    assert_eq!((first[0]["owner_id"].as_str(), first[0]["source"].as_str()), (Some("primary"), Some("chat")));
    let car = first[0]["id"].as_str().unwrap().to_string();
    assert_eq!(car.len(), 32, "uuid hex");
    // The title is taken whatever its case: the result names the entry to update instead.
    assert_eq!(first[1]["ok"], false);
    assert_eq!(first[1]["error_code"], "memory:create:duplicate_title");
    assert_eq!(first[1]["existing_entry"]["id"], car.as_str());
    let garden = first[2]["id"].as_str().unwrap().to_string();
    assert!(database(&home).exists());

    // A second process finds everything the first one saved.
    llm.add_script(Script::new(
        "what do you know",
        vec![
            Reply::tool("memory_list_titles", json!({})),
            search("VEHICULOS"),
            search("über"),
            search("atrícul"),
            Reply::tool("memory_get", json!({ "entry_id": car })),
            Reply::tool("memory_update", json!({ "entry_id": car, "data": "Seat León", "category": "finanzas" })),
            Reply::tool("memory_delete", json!({ "entry_id": garden })),
            Reply::tool("memory_delete", json!({ "entry_id": garden })),
            Reply::tool("memory_list_titles", json!({ "category": "otros" })),
            Reply::text("Done."),
        ],
    ));
    let second = turn(&llm, &home, "what do you know").await;
    let listed = &second[0];
    assert_eq!(listed["total"], 2, "{listed}");
    assert_eq!((listed["limit"].as_u64(), listed["offset"].as_u64()), (Some(20), Some(0)));
    assert_eq!(listed["titles"][0]["title"], "ÜBER den Garten", "newest first");
    assert_eq!(listed["titles"][1]["category"], "vehículos");
    assert!(listed.get("hint").is_none());
    assert_eq!(titles(&second[1]), ["Vehículos"], "case and accents ignored: {}", second[1]);
    assert_eq!(titles(&second[2]), ["ÜBER den Garten"], "{}", second[2]);
    assert_eq!(titles(&second[3]), ["Vehículos"], "a substring of a non-ASCII word: {}", second[3]);
    assert_eq!(second[4]["data"], "Seat Ibiza, matrícula 1234-ABC");
    let updated = &second[5];
    assert_eq!(updated["updated"], true, "{updated}");
    assert_eq!(updated["data"], "Seat León");
    assert_eq!(updated["metadata"], json!({ "plate": "1234-ABC", "category": "finanzas" }));
    assert_eq!(updated["created_at"], second[4]["created_at"]);
    assert_eq!(second[6], json!({ "owner_id": "primary", "deleted": true, "entry_id": garden }));
    assert_eq!(second[7]["deleted"], false);
    assert_eq!(second[8]["total"], 0);
    assert_eq!(second[8]["hint"], "No memory entries found. Do not retry with identical parameters.");
}

#[tokio::test]
async fn search_results_come_in_bm25_order_and_any_query_text_is_safe() {
    let llm = ScriptedLlm::start(vec![Script::new(
        "tomatoes",
        vec![
            create(
                "Shopping list",
                "milk bread eggs butter cheese flour sugar salt pepper rice and one tomato",
                "otros",
            ),
            create("Tomato garden", "tomato tomato tomato", "proyectos"),
            create("Sauce", "tomato garlic olive oil basil", "conocimiento"),
            search("tomato"),
            search("tomato garlic"),
            search("garlic unicorn"),
            search("a\"b OR ("),
            search("*"),
            search("NEAR(tomato"),
            Reply::tool("memory_search", json!({ "query": "tomato", "limit": 2, "offset": 1 })),
            Reply::tool("memory_search", json!({ "query": "tomato", "category": "proyectos" })),
            Reply::text("Found them."),
        ],
    )])
    .await;
    let home = Home::new(&llm.base_url(), MEMORY);
    let results = turn(&llm, &home, "tomatoes").await;
    assert_eq!(titles(&results[3]), ["Tomato garden", "Sauce", "Shopping list"], "best bm25 first: {}", results[3]);
    assert_eq!(results[3]["total"], 3);
    assert_eq!(titles(&results[4]), ["Sauce"], "every word required first");
    assert_eq!(titles(&results[5]), ["Sauce"], "then any word");
    for result in &results[6..9] {
        assert!(result.get("error_code").is_none(), "query syntax is only text: {result}");
        assert!(result["entries"].is_array(), "{result}");
    }
    assert_eq!(results[9]["total"], 3);
    assert_eq!(titles(&results[9]), ["Sauce", "Shopping list"], "a page of the same order");
    assert_eq!(titles(&results[10]), ["Tomato garden"]);
}

#[tokio::test]
async fn an_expired_entry_is_never_returned_and_is_purged_from_the_file() {
    let expiry = chrono::Utc::now() + chrono::Duration::seconds(3);
    let llm = ScriptedLlm::start(vec![Script::new(
        "remember the ticket",
        vec![
            Reply::tool(
                "memory_create",
                json!({ "title": "Concert ticket", "data": "row 7 seat 12", "category": "recordatorios",
                        "expires_at": expiry.to_rfc3339() }),
            ),
            create("Passport", "expires 2031", "viajes"),
            Reply::text("Noted."),
        ],
    )])
    .await;
    let home = Home::new(&llm.base_url(), MEMORY);
    let first = turn(&llm, &home, "remember the ticket").await;
    assert_eq!(first[0]["created"], true, "{}", first[0]);
    assert!(first[0]["expires_at"].as_str().unwrap().ends_with("+00:00"));
    let ticket = first[0]["id"].as_str().unwrap().to_string();
    assert_eq!(count_rows(&database(&home), &ticket).await, 1);

    let wait = (expiry - chrono::Utc::now()).to_std().unwrap_or_default() + std::time::Duration::from_millis(500);
    tokio::time::sleep(wait).await;
    llm.add_script(Script::new(
        "where is my ticket",
        vec![
            Reply::tool("memory_get", json!({ "entry_id": ticket })),
            search("ticket"),
            Reply::tool("memory_list_titles", json!({})),
            Reply::tool("memory_update", json!({ "entry_id": ticket, "data": "row 8" })),
            create("concert TICKET", "a new one", "recordatorios"),
            Reply::text("It expired."),
        ],
    ));
    let second = turn(&llm, &home, "where is my ticket").await;
    assert_eq!(second[0], json!({ "ok": false, "error": "Entry not found", "entry_id": ticket }));
    assert_eq!(second[1]["total"], 0, "{}", second[1]);
    assert_eq!(second[2]["titles"].as_array().unwrap().len(), 1);
    assert_eq!(second[2]["titles"][0]["title"], "Passport");
    assert_eq!(second[3]["error_code"], "memory:update:not_found");
    assert_eq!(second[4]["created"], true, "an expired title is free again: {}", second[4]);
    assert_eq!(count_rows(&database(&home), &ticket).await, 0, "the expired row is deleted from the file");
}

#[tokio::test]
async fn bad_arguments_from_the_model_get_errors_naming_them() {
    let llm = ScriptedLlm::start(vec![Script::new(
        "save junk",
        vec![
            create("Car", "red", "coches"),
            Reply::tool(
                "memory_create",
                json!({ "title": "Car", "data": "red", "category": "otros", "metadata": "[1, 2]" }),
            ),
            Reply::tool(
                "memory_create",
                json!({ "title": "Car", "data": "red", "category": "otros", "metadata": "{\"category\": \"otros\"}" }),
            ),
            Reply::tool(
                "memory_create",
                json!({ "title": "Car", "data": "red", "category": "otros", "expires_at": "2001-01-01" }),
            ),
            Reply::tool("memory_create", json!({ "title": "", "data": "red", "category": "otros" })),
            Reply::tool("memory_create", json!({ "title": "t".repeat(101), "data": "red", "category": "otros" })),
            // Year 10000 in UTC: stored as text it would sort before today and read as long expired.
            Reply::tool(
                "memory_create",
                json!({ "title": "Far", "data": "red", "category": "otros", "expires_at": "9999-12-31T23:30:00-01:00" }),
            ),
            Reply::tool(
                "memory_create",
                json!({ "title": "Big", "data": "red", "category": "otros", "metadata": { "blob": "x".repeat(5000) } }),
            ),
            Reply::tool("memory_update", json!({ "entry_id": "abc" })),
            Reply::tool("memory_update", json!({ "entry_id": "abc", "data": "blue" })),
            Reply::tool("memory_get", json!({ "entry_id": "abc" })),
            Reply::tool("memory_search", json!({ "query": "x", "updated_after": "last tuesday" })),
            Reply::tool("memory_search", json!({ "query": "x", "limit": "lots" })),
            Reply::text("Sorry."),
        ],
    )])
    .await;
    let home = Home::new(&llm.base_url(), MEMORY);
    let results = turn(&llm, &home, "save junk").await;
    let expected = [
        ("memory:invalid_arguments:invalid_category", "category 'coches'"),
        ("memory:invalid_arguments:invalid_metadata", "metadata must be a JSON object"),
        ("memory:invalid_arguments:category_in_metadata", "metadata must not contain category"),
        ("memory:invalid_arguments:expires_at_in_past", "expires_at"),
        ("memory:invalid_arguments:title_required", "title is required"),
        ("memory:invalid_arguments:invalid_title", "title is longer than 100 characters"),
        ("memory:invalid_arguments:invalid_expires_at", "year 9999 or earlier"),
        ("memory:invalid_arguments:invalid_metadata", "larger than 4096 bytes"),
        ("memory:invalid_arguments:nothing_to_update", "at least one of data, category"),
    ];
    for (result, (code, text)) in results.iter().zip(expected) {
        assert_eq!(result["ok"], false, "{result}");
        assert_eq!(result["error_code"], code, "{result}");
        let message = result["error"].as_str().unwrap().replace('"', "'");
        assert!(message.contains(text), "{code}: {message}");
    }
    assert_eq!(
        results[9],
        json!({ "ok": false, "error": "Entry not found", "error_code": "memory:update:not_found", "entry_id": "abc" })
    );
    assert_eq!(results[10], json!({ "ok": false, "error": "Entry not found", "entry_id": "abc" }));
    assert_eq!(results[11]["error_code"], "memory:invalid_arguments:invalid_updated_after");
    assert!(results[11]["error"].as_str().unwrap().contains("updated_after"));
    assert_eq!(results[12]["error_code"], "memory:invalid_arguments:invalid_limit");
    assert!(results[12]["error"].as_str().unwrap().contains("limit"));
}
