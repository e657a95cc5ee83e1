use super::*;
use minibot_config::Config;

/// A temp folder as its real path (the tools compare resolved paths).
fn real_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let real = dir.path().canonicalize().expect("canonical");
    (dir, real)
}

fn config(dir: &Path, toml: &str) -> Config {
    Config::from_toml(toml, "test.toml", dir, &|_| None).expect("config")
}

fn what_hit(set: &ProtectedPaths, target: &Path) -> Option<(String, Relation)> {
    set.hit(target).map(|hit| (hit.what.to_string(), hit.relation))
}

#[test]
fn links_and_folders_holding_the_file_count() {
    let (_dir, real) = real_dir();
    std::fs::create_dir(real.join("etc")).expect("mkdir");
    std::fs::write(real.join("etc/config.toml"), "x").expect("write");
    std::os::unix::fs::symlink(real.join("etc/config.toml"), real.join("link.toml")).expect("symlink");
    let protected = ProtectedPaths::new().file(&real.join("link.toml"), "the assistant's config file");
    assert!(protected.hit(&real.join("link.toml")).is_some(), "the link the program opens");
    assert!(protected.hit(&real.join("etc/config.toml")).is_some(), "the file it points to");
    assert_eq!(protected.hit(&real.join("etc")).map(|h| h.relation), Some(Relation::Holds), "a folder holding it");
    assert!(protected.hit(&real.join("etc/other.toml")).is_none());
    assert!(protected.hit(&real.join("etc/config.toml.bak")).is_none(), "components, not prefixes");
}

#[test]
fn everything_inside_a_guarded_folder_counts_but_the_managed_folder_in_it() {
    let (_dir, real) = real_dir();
    // The data folder is a link to where the data really lies: both count.
    std::fs::create_dir_all(real.join("store/files")).expect("mkdir");
    std::os::unix::fs::symlink(real.join("store"), real.join("data")).expect("symlink");
    std::fs::create_dir_all(real.join("elsewhere")).expect("mkdir");
    std::os::unix::fs::symlink(real.join("store"), real.join("elsewhere/my-link")).expect("symlink");
    let protected = ProtectedPaths::new()
        .folder(&real.join("data"), "the assistant's data folder")
        .except(&real.join("data/files"));
    let inside = Some(("the assistant's data folder".to_string(), Relation::Inside));
    assert_eq!(what_hit(&protected, &real.join("store/minibot.db")), inside);
    assert_eq!(what_hit(&protected, &real.join("store/new/deep.txt")), inside, "a file that does not exist yet");
    assert_eq!(what_hit(&protected, &real.join("data")).map(|h| h.1), Some(Relation::Is), "the link");
    assert_eq!(what_hit(&protected, &real.join("store")).map(|h| h.1), Some(Relation::Is), "where it points");
    assert_eq!(what_hit(&protected, &real).map(|h| h.1), Some(Relation::Holds));
    assert!(protected.hit(&real.join("elsewhere/my-link")).is_none(), "removing another link changes nothing");
    assert!(protected.hit(&real.join("store/files/notes.txt")).is_none(), "the managed folder stays the model's");
    assert!(protected.hit(&real.join("store-old/x")).is_none(), "components, not prefixes");
}

#[test]
fn a_guarded_path_inside_the_managed_folder_stays_guarded() {
    let (_dir, real) = real_dir();
    let protected = ProtectedPaths::new()
        .folder(&real.join("data"), "the assistant's data folder")
        .file(&real.join("data/files/srv.py"), "MCP server `dice`'s script")
        .except(&real.join("data/files"));
    assert_eq!(
        what_hit(&protected, &real.join("data/files/srv.py")).map(|h| h.0).as_deref(),
        Some("MCP server `dice`'s script")
    );
}

#[test]
fn the_question_and_the_error_name_the_path_and_what_it_is() {
    let (_dir, real) = real_dir();
    let protected = ProtectedPaths::new().folder(&real.join("agents"), "the assistant's agents folder");
    let target = real.join("agents/spy.md");
    let hit = protected.hit(&target).expect("hit");
    assert_eq!(
        hit.describe(&target),
        format!("{} is inside the assistant's agents folder ({})", target.display(), real.join("agents").display())
    );
    assert_eq!(
        hit.reason("patches", &target),
        format!(
            "patches {}, inside the assistant's agents folder ({})",
            target.display(),
            real.join("agents").display()
        )
    );
}

#[test]
fn the_config_names_everything_the_assistant_runs_or_trusts() {
    let (_dir, real) = real_dir();
    std::fs::create_dir_all(real.join("servers/dice")).expect("mkdir");
    std::fs::write(real.join("servers/dice/server.py"), "print()").expect("write");
    std::fs::write(real.join("srv.js"), "1").expect("write");
    let toml = r#"
[vault]
password_file = "secret/vault.pass"
[llm]
prompts_dir = "my-prompts"
[orchestration]
directory = "specialists"
[tools.skills]
enabled = false
paths = ["skills"]
[tools.file_storage]
enabled = true
root_dir = "./data/files"
[[tools.mcp.servers]]
name = "dice"
command = "python3"
args = ["-u", "server.py", "--log=run.log", "--flag"]
cwd = "servers/dice"
[[tools.mcp.servers]]
name = "node"
command = "./bin/node-wrapper"
args = ["srv.js", "missing/later.js", "https://example.com/x", "stdio"]
"#;
    let set = ProtectedPaths::from_config_in(&config(&real, toml), &real);
    let entries: Vec<(PathBuf, String)> = set.entries().map(|(p, w)| (p.to_path_buf(), w.to_string())).collect();
    let has = |path: &str, what: &str| {
        assert!(entries.contains(&(real.join(path), what.to_string())), "{path} as {what} missing from {entries:#?}");
    };
    has("config.toml", "the assistant's config file");
    has("secrets.vault.yml", "the assistant's secrets vault file");
    has("secret/vault.pass", "the vault's password file");
    has("data", "the assistant's data folder");
    has("logs", "the assistant's log folder");
    has("specialists", "the assistant's agents folder");
    has("my-prompts", "the assistant's prompts folder");
    has("skills", "a skills folder of the assistant");
    has("servers/dice", "MCP server `dice`'s working folder");
    has("servers/dice/server.py", "MCP server `dice`'s script");
    has("bin/node-wrapper", "MCP server `node`'s program");
    has("srv.js", "MCP server `node`'s script");
    has("missing/later.js", "MCP server `node`'s script");
    let named = |name: &str| entries.iter().any(|(p, _)| p.ends_with(name));
    assert!(!named("run.log"), "an option's value that is neither a file nor reads like a script");
    assert!(!named("stdio") && !named("x"), "plain words and URLs are not scripts");
    assert!(set.hit(&real.join("data/files/report.txt")).is_none(), "the managed folder inside the data folder");
    assert!(set.hit(&real.join("servers/dice/helper.py")).is_some(), "inside the working folder");
}

#[test]
fn a_database_in_the_config_folder_guards_its_files_only() {
    let (_dir, real) = real_dir();
    let set = ProtectedPaths::from_config_in(&config(&real, "[memory]\nsqlite_url = \"sqlite:///./chat.db\"\n"), &real);
    assert_eq!(
        what_hit(&set, &real.join("chat.db-wal")).map(|h| h.0).as_deref(),
        Some("the assistant's conversation database")
    );
    assert!(set.hit(&real.join("notes.txt")).is_none(), "the config folder itself is not guarded whole");
}

#[test]
fn a_managed_folder_holding_state_is_refused() {
    let (_dir, real) = real_dir();
    let config = config(&real, "[tools.file_storage]\nenabled = true\nroot_dir = \".\"\n");
    let root = super::super::ManagedRoot::create(&real, false).expect("root");
    let err = super::super::check_root(&config, Some(&root)).expect_err("refused");
    let text = err.to_string();
    assert!(text.starts_with(&format!("tools.file_storage.root_dir: {} holds ", real.display())), "{text}");
    for what in ["the assistant's config file", "the assistant's data folder", "the assistant's log folder"] {
        assert!(text.contains(what), "{what}: {text}");
    }
    let fine = super::super::ManagedRoot::create(&real.join("data/files"), false).expect("root");
    assert_eq!(super::super::check_root(&config, Some(&fine)), Ok(()), "inside the data folder is fine");
}

#[test]
fn the_default_skill_folders_are_guarded_when_no_paths_are_written() {
    let (_dir, real) = real_dir();
    let set = ProtectedPaths::from_config_in(&config(&real, "[tools.skills]\nwrite_path = \"installed\"\n"), &real);
    for folder in ["installed", ".minibot/skills", ".agents/skills"] {
        assert!(set.hit(&real.join(folder).join("mine/SKILL.md")).is_some(), "{folder} is not guarded");
    }
    assert!(set.hit(&real.join("notes/SKILL.md")).is_none(), "a folder skills are not read from");
}
