#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

fn config(dir: &Path, management: &str) -> Config {
    let toml = format!(
        "[llm]\napi_key = \"sk-test\"\n[providers.local]\napi_format = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n\
         [providers.other]\napi_format = \"openai\"\nbase_url = \"http://127.0.0.1:2/v1\"\n\
         [orchestration.agent_management]\nwrite = true\n{management}"
    );
    Config::from_toml(&toml, "test.toml", dir, &|_| None).unwrap()
}

const CEILING: &str =
    "tools_allow = [\"file*\", \"current_datetime\"]\nmcp_servers = [\"web\"]\nproviders = [\"local\"]\n";

fn definition(name: &str, frontmatter: &str) -> String {
    format!("---\nname: {name}\ndescription: writes notes\n{frontmatter}---\nYou write notes.\n")
}

fn problems(result: Result<ManagedDefinition, ManagedError>) -> Vec<String> {
    match result {
        Err(ManagedError::Ceiling(problems)) => problems,
        other => panic!("expected a ceiling refusal, got {other:?}"),
    }
}

#[test]
fn names_follow_minibots_strict_rule() {
    for good in ["abc", "note_taker", "A_b_C", &"x".repeat(30)] {
        assert!(valid_name(good), "{good}");
    }
    for bad in ["ab", "", &"x".repeat(31), "note-taker", "notes1", "../etc", "a.md", "näme", "a b c"] {
        assert!(!valid_name(bad), "{bad}");
        assert_eq!(file_of(Path::new("/m"), bad), None, "no path for {bad}");
    }
    assert_eq!(file_of(Path::new("/m"), "notes"), Some(PathBuf::from("/m/notes.md")));
}

#[test]
fn a_definition_within_the_ceiling_is_prepared() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), CEILING);
    let text = definition(
        "notes",
        "model_provider: local\ntools_allow:\n  - file_info\n  - current_datetime\nmcp_servers:\n  - web\n",
    );
    let prepared = prepare(&config, "notes", &text, &[]).unwrap();
    assert_eq!(prepared.agent.name, "notes");
    assert_eq!(prepared.agent.tools_allow, ["file_info", "current_datetime"]);
    assert_eq!(prepared.text, text);
    assert_eq!(prepared.agent.hash, minibot_protocol::definition_hash(text.as_bytes()));
    assert_eq!(prepared.agent.path, dir.path().join("data/agents/notes.md"));
    // The main provider is always allowed, listed or not.
    prepare(&config, "notes", &definition("notes", "model_provider: openai\n"), &[]).unwrap();
}

#[test]
fn every_way_past_the_ceiling_is_named_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), CEILING);
    let text = definition(
        "notes",
        "model_provider: other\ntools_allow:\n  - file*\n  - bash\n  - mcp_web__search\n  - spawn_task\n  - create_agent\n\
         mcp_servers:\n  - web\n  - mail\nrequires:\n  - gpu\n",
    );
    let found = problems(prepare(&config, "notes", &text, &[]));
    let expected = [
        "`file*` is a pattern",
        "`bash` is not allowed by the ceiling's tools_allow (file*, current_datetime)",
        "`mcp_web__search` is an MCP tool",
        "`spawn_task` is a delegation or agent-management tool",
        "`create_agent` is a delegation or agent-management tool",
        "MCP server `mail` is not in the ceiling's mcp_servers (web)",
        "model provider `other` is not allowed for managed agents (allowed: openai, local)",
        "`requires` is not allowed",
    ];
    assert_eq!(found.len(), expected.len(), "{found:#?}");
    for (problem, expected) in found.iter().zip(expected) {
        assert!(problem.contains(expected), "{problem} should say {expected}");
    }
    let deny = problems(prepare(&config, "notes", &definition("notes", "tools_deny:\n  - bash\n"), &[]));
    assert_eq!(deny.len(), 1);
    assert!(deny[0].contains("`tools_deny` is not allowed"), "{deny:?}");
}

#[test]
fn an_empty_ceiling_grants_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "");
    let found = problems(prepare(&config, "notes", &definition("notes", "tools_allow:\n  - current_datetime\n"), &[]));
    assert!(found[0].contains("(it lists none)"), "{found:?}");
    // No tools at all is within any ceiling.
    prepare(&config, "notes", &definition("notes", ""), &[]).unwrap();
}

#[test]
fn names_must_match_be_valid_and_be_free() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), CEILING);
    let text = definition("notes", "");
    assert_eq!(
        prepare(&config, "other_name", &text, &[]),
        Err(ManagedError::NameMismatch { expected: "other_name".into(), found: "notes".into() })
    );
    assert_eq!(prepare(&config, "no", &text, &[]), Err(ManagedError::InvalidName("no".into())));
    assert_eq!(prepare(&config, "notes", &text, &["notes".into()]), Err(ManagedError::Collision("notes".into())));
    let main = definition("minibot", "");
    assert_eq!(prepare(&config, "minibot", &main, &[]), Err(ManagedError::Collision("minibot".into())));
    let err = prepare(&config, "notes", "---\nname: notes\ncolour: blue\n---\nx\n", &[]).unwrap_err();
    assert!(matches!(&err, ManagedError::Unparsable(m) if m.contains("unknown frontmatter keys: colour")), "{err}");
    assert!(!err.to_string().contains(".md"), "the model wrote text, not a file: {err}");
    let huge = definition("notes", "").replace("You write notes.", &"x".repeat(MAX_DEFINITION_BYTES));
    assert!(matches!(prepare(&config, "notes", &huge, &[]), Err(ManagedError::TooLarge(_))));
}

#[test]
fn a_worker_checks_its_own_config_and_the_tasks_provider() {
    let dir = tempfile::tempdir().unwrap();
    let text = definition("notes", "tools_allow:\n  - current_datetime\n");
    let off = Config::from_toml("[llm]\napi_key = \"k\"\n", "test.toml", dir.path(), &|_| None).unwrap();
    assert_eq!(check_for_worker(&off, "notes", &text, None, &[]), Err(ManagedError::Disabled));
    let strict = config(dir.path(), "");
    assert!(matches!(check_for_worker(&strict, "notes", &text, None, &[]), Err(ManagedError::Ceiling(_))));
    let config = config(dir.path(), CEILING);
    check_for_worker(&config, "notes", &text, Some("local"), &[]).unwrap();
    let err = check_for_worker(&config, "notes", &text, Some("other"), &[]).unwrap_err();
    assert!(err.to_string().contains("model provider `other` is not allowed"), "{err}");
    assert_eq!(
        check_for_worker(&config, "notes", &text, None, &["notes".into()]),
        Err(ManagedError::Collision("notes".into()))
    );
}

#[test]
fn writes_replace_the_file_whole_and_leave_no_temporary_files() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("data/agents");
    files::write(&folder, "notes", "first version\n").unwrap();
    assert!(files::exists(&folder, "notes"));
    files::write(&folder, "notes", "second version\n").unwrap();
    assert_eq!(std::fs::read_to_string(folder.join("notes.md")).unwrap(), "second version\n");
    let names: Vec<String> =
        std::fs::read_dir(&folder).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().to_string()).collect();
    assert_eq!(names, ["notes.md"], "the temporary file was renamed, not left behind");
    assert!(files::write(&folder, "../escape", "x").is_err());
    assert!(!dir.path().join("data/escape.md").exists());
    assert!(files::remove(&folder, "notes").unwrap());
    assert!(!files::remove(&folder, "notes").unwrap(), "already gone");
    assert!(!files::exists(&folder, "notes"));
}

#[test]
fn a_failed_write_keeps_the_old_file() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("agents");
    files::write(&folder, "notes", "old\n").unwrap();
    // The target is a folder now: the rename fails, and the temporary file goes away with it.
    std::fs::create_dir(folder.join("other.md")).unwrap();
    assert!(files::write(&folder, "other", "new\n").is_err());
    let mut names: Vec<String> =
        std::fs::read_dir(&folder).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().to_string()).collect();
    names.sort();
    assert_eq!(names, ["notes.md", "other.md"]);
    assert_eq!(std::fs::read_to_string(folder.join("notes.md")).unwrap(), "old\n");
}

#[test]
fn the_folder_loads_whole_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), CEILING);
    let folder = directory(&config);
    assert!(files::load(&config, &[]).unwrap().is_empty(), "a missing folder holds none");
    files::write(&folder, "notes", &definition("notes", "tools_allow:\n  - file_info\n")).unwrap();
    files::write(&folder, "sleeper", &definition("sleeper", "enabled: false\n")).unwrap();
    let loaded = files::load(&config, &[]).unwrap();
    assert_eq!(loaded.iter().map(|d| d.agent.name.as_str()).collect::<Vec<_>>(), ["notes"]);

    std::fs::write(folder.join("bad.md"), definition("bad", "tools_allow:\n  - bash\n")).unwrap();
    let err = files::load(&config, &[]).unwrap_err().to_string();
    assert!(err.contains("bad.md") && err.contains("`bash` is not allowed"), "{err}");
    std::fs::remove_file(folder.join("bad.md")).unwrap();
    std::fs::write(folder.join("renamed.md"), definition("notes_two", "")).unwrap();
    let err = files::load(&config, &[]).unwrap_err().to_string();
    assert!(err.contains("renamed.md") && err.contains("names `notes_two`"), "{err}");
    std::fs::remove_file(folder.join("renamed.md")).unwrap();
    // An owner's specialist written later under the same name (in any case) wins; the assistant still starts.
    assert!(files::load(&config, &["Notes".into()]).unwrap().is_empty());
    assert!(matches!(
        prepare(&config, "notes", &definition("notes", ""), &["NOTES".into()]),
        Err(ManagedError::Collision(_))
    ));
}

#[test]
fn the_managed_folder_may_not_overlap_the_owners() {
    let dir = tempfile::tempdir().unwrap();
    check_directories(&config(dir.path(), "")).unwrap();
    for written in ["./agents", "./agents/managed", ".", "other/../agents/managed"] {
        let overlapping = config(dir.path(), &format!("directory = \"{written}\"\n"));
        let err = check_directories(&overlapping).unwrap_err();
        assert!(err.contains("must not overlap"), "{written}: {err}");
    }
}

/// Red-team report (#26): a blank `tools_allow` entry once left the worker a policy with no pattern (every
/// tool), and `{bash,file_info}` slipped past a `*file*` ceiling as a glob alternation.
#[test]
fn blank_entries_alternations_and_long_descriptions_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "tools_allow = [\"*file*\"]\n");
    for entry in ["\"\"", "\"   \"", "", "\"{bash,python_execute,file_info}\"", "\"file_info,bash\""] {
        let text = definition("notes", &format!("tools_allow:\n  - {entry}\n"));
        let found = problems(prepare(&config, "notes", &text, &[]));
        assert!(!found.is_empty(), "{entry} passed");
    }
    let long = format!("---\nname: notes\ndescription: {}\n---\nYou write notes.\n", "x".repeat(1001));
    assert!(problems(prepare(&config, "notes", &long, &[]))[0].contains("longer than 1000"));
}
