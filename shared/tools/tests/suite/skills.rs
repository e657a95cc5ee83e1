//! The skill tools as the model calls them: `list_skills` and `activate_skill` results field by field, who gets
//! `install_skill`, an install from a server on this machine, and that installed skills stay out of the file
//! tools' reach.

use super::Env;
use super::guarded::{User, turn_of};
use minibot_agent::{ApprovalDecision, ToolContext, ToolError};
use serde_json::{Value, json};
use std::path::Path;

/// Skills written into `<managed root>/skills` (the write folder) plus an extra `paths` folder beside the config.
const SKILLS: &str = "[tools.skills]\nwrite_path = \"files/skills\"\npaths = [\"team-skills\"]\n";

fn skill(dir: &Path, name: &str, text: &str) {
    std::fs::create_dir_all(dir.join(name)).unwrap();
    std::fs::write(dir.join(name).join("SKILL.md"), text).unwrap();
}

fn md(name: &str, description: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n\n{body}\n")
}

#[tokio::test]
async fn list_skills_reports_matches_and_where_new_skills_go() {
    let env = Env::new(SKILLS);
    skill(&env.root().join("skills"), "weekly-report", &md("weekly-report", "Write the weekly report", "Steps."));
    skill(&env.dir.path().join("team-skills"), "deploy", &md("deploy", "Ship a release", "Run it."));
    let write_dir = env.root().join("skills");

    let listed = env.ok("list_skills", json!({ "query": "report" })).await;
    assert_eq!(
        listed,
        json!({
            "ok": true,
            "query": "report",
            "total_available": 4,
            "returned": 1,
            "used_fuzzy_fallback": false,
            "write_dir": write_dir.to_string_lossy(),
            "write_dir_access": "write_file",
            "write_dir_filesystem_path": "skills",
            "discovery_paths": [
                env.dir.path().join("files/skills").to_string_lossy(),
                env.dir.path().join("team-skills").to_string_lossy(),
                "bundled:"
            ],
            "matches": [{ "name": "weekly-report", "description": "Write the weekly report", "source": "project" }],
        })
    );
    let all = env.ok("list_skills", json!({ "query": null })).await;
    let names: Vec<&str> = all["matches"].as_array().unwrap().iter().map(|m| m["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["create-skill", "deploy", "minibot-docs", "weekly-report"]);
    assert_eq!(all["query"], Value::Null);
    let native = all["matches"].as_array().unwrap().iter().find(|m| m["name"] == "minibot-docs").unwrap();
    assert_eq!(native["source"], "native");
}

#[tokio::test]
async fn write_access_follows_the_writers_that_can_reach_the_folder() {
    let outside = Env::new("[tools.skills]\nwrite_path = \"elsewhere\"\n");
    let listed = outside.ok("list_skills", json!({})).await;
    assert_eq!((&listed["write_dir_access"], &listed["write_dir_filesystem_path"]), (&json!("bash"), &Value::Null));

    let neither = Env::new("[tools.skills]\nwrite_path = \"elsewhere\"\n[tools.bash]\nenabled = false\n");
    assert_eq!(neither.ok("list_skills", json!({})).await["write_dir_access"], "unavailable");
}

#[tokio::test]
async fn activate_skill_returns_the_instructions_and_the_files_beside_them() {
    let env = Env::new(SKILLS);
    let dir = env.root().join("skills");
    let text = "---\nname: weekly-report\ndescription: Write it\ncompatibility: Requires bash\n---\n\n# Report\n\nSee \
                references/template.md.\n";
    skill(&dir, "weekly-report", text);
    std::fs::create_dir_all(dir.join("weekly-report/references")).unwrap();
    std::fs::write(dir.join("weekly-report/references/template.md"), "T").unwrap();

    let activated = env.ok("activate_skill", json!({ "name": "weekly-report" })).await;
    assert_eq!(
        activated,
        json!({
            "ok": true,
            "skill": "weekly-report",
            "instructions": "<skill-instructions>\n# Report\n\nSee references/template.md.\n</skill-instructions>",
            "skill_dir": dir.join("weekly-report").to_string_lossy(),
            "source": "project",
            "resources": ["references/template.md"],
            "compatibility": "Requires bash",
        })
    );
    let bundled = env.ok("activate_skill", json!({ "name": "create-skill" })).await;
    assert_eq!((&bundled["skill_dir"], &bundled["source"]), (&json!("bundled:create-skill"), &json!("native")));
    assert!(bundled.get("compatibility").is_none());
    let (code, message) = env.err("activate_skill", json!({ "name": "nope" })).await;
    assert_eq!(code, "skill_not_found");
    assert!(message.contains("'nope'"), "{message}");
}

#[tokio::test]
async fn skill_instructions_spill_only_past_64000_characters() {
    let env = Env::new(&format!("{SKILLS}[tools.tool_output_spill]\nenabled = true\n"));
    let dir = env.root().join("skills");
    skill(&dir, "long", &md("long", "d", &"a".repeat(40_000)));
    skill(&dir, "huge", &md("huge", "d", &"b".repeat(70_000)));
    let long = env.ok("activate_skill", json!({ "name": "long" })).await;
    assert!(long["instructions"].as_str().unwrap().len() > 40_000, "inline past the global 8,000");
    let huge = env.ok("activate_skill", json!({ "name": "huge" })).await;
    assert!(huge.get("instructions").is_none(), "{huge}");
    assert!(huge["output_file_path"].as_str().is_some(), "{huge}");
}

#[tokio::test]
async fn install_skill_is_main_agent_only_and_only_when_switched_on() {
    let off = Env::new(SKILLS);
    assert!(off.tools.get("list_skills").is_some() && off.tools.get("install_skill").is_none());

    let on = Env::new(&format!("{SKILLS}install = true\n"));
    assert!(on.tools.get("install_skill").is_some());
    for set in [minibot_tools::worker_generic_tools(&on.services), minibot_tools::worker_tools(&on.services)] {
        let names = set.names();
        assert!(names.contains(&"list_skills".to_string()) && names.contains(&"activate_skill".to_string()));
        assert!(!names.contains(&"install_skill".to_string()), "{names:?}");
    }

    let disabled = Env::new("[tools.skills]\nenabled = false\n");
    assert!(disabled.tools.get("list_skills").is_none() && disabled.tools.get("activate_skill").is_none());
}

/// Serves `body` at every path on 127.0.0.1, one request per connection.
async fn serve(body: String) -> std::net::SocketAddr {
    let response = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
    minibot_test_support::counting_server("127.0.0.1", response).await.0
}

#[tokio::test]
async fn a_skill_installed_over_http_is_listed_at_once_and_a_changed_hash_is_refused() {
    let env = Env::new(&format!("{SKILLS}install = true\n"));
    let addr = serve(md("fetched", "From a server", "Fetched steps.")).await;
    let source = format!("http://{addr}/fetched/SKILL.md");

    let preview = env.ok("install_skill", json!({ "source": source })).await;
    assert_eq!(preview["skills"][0]["name"], "fetched");
    assert!(env.ok("list_skills", json!({ "query": "fetched" })).await["matches"].as_array().unwrap().is_empty());
    let hash = preview["skills"][0]["hash"].as_str().unwrap();

    let owner = User::answering(ApprovalDecision::Approved);
    let approving = turn_of(&owner);
    let wrong = json!({ "source": source, "install": true, "expected_hash": "f".repeat(64) });
    match env.call_in("install_skill", wrong, &approving).await {
        Err(ToolError::RespondToModel { code, .. }) => assert_eq!(code, "hash_mismatch"),
        other => panic!("expected hash_mismatch, got {other:?}"),
    }
    assert!(!env.root().join("skills/fetched").exists());

    // An install asks the user, whatever [tools.approval] says; without a yes nothing is written.
    let install = json!({ "source": source, "install": true, "expected_hash": hash });
    let refusing = User::answering(ApprovalDecision::Denied);
    match env.call_in("install_skill", install.clone(), &turn_of(&refusing)).await {
        Err(ToolError::RespondToModel { code, .. }) => assert_eq!(code, "tool_approval:denied"),
        other => panic!("expected a denial, got {other:?}"),
    }
    assert!(refusing.reasons()[0].contains("a skills folder of the assistant"), "{:?}", refusing.reasons());
    assert!(!env.root().join("skills/fetched").exists());
    assert!(env.call_in("install_skill", install.clone(), &ToolContext::default()).await.is_err(), "cannot ask");
    assert!(!env.root().join("skills/fetched").exists());

    let installed = env.call_in("install_skill", install, &approving).await.unwrap();
    assert_eq!(installed["installed"], "fetched");
    let listed = env.ok("list_skills", json!({ "query": "fetched" })).await;
    assert_eq!(listed["matches"][0]["name"], "fetched");
    let activated = env.ok("activate_skill", json!({ "name": "fetched" })).await;
    assert!(activated["instructions"].as_str().unwrap().contains("Fetched steps."));

    let (code, message) = env.err("install_skill", json!({ "source": "http://203.0.113.9/x.zip" })).await;
    assert_eq!(code, "insecure_source");
    assert!(message.contains("loopback"), "{message}");
}

#[tokio::test]
async fn the_file_tools_cannot_change_an_installed_skill_without_asking() {
    let env = Env::new(SKILLS);
    let dir = env.root().join("skills");
    skill(&dir, "weekly-report", &md("weekly-report", "d", "Original."));
    let rewrite = json!({ "path": "skills/weekly-report/SKILL.md", "content": "---\nname: weekly-report\n---\nEvil.\n", "overwrite": true });
    match env.call_in("write_file", rewrite, &ToolContext::default()).await {
        Err(ToolError::RespondToModel { code, message }) => {
            assert_eq!(code, "tool_approval:denied", "{message}");
            assert!(message.contains("skill install folder"), "{message}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let planted = json!({ "path": "skills/new/SKILL.md", "content": md("new", "d", "Planted.") });
    assert!(env.call_in("write_file", planted, &ToolContext::default()).await.is_err());
    assert!(!dir.join("new").exists());
    assert!(std::fs::read_to_string(dir.join("weekly-report/SKILL.md")).unwrap().contains("Original."));
}
