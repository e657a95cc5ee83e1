//! Which skills are found where, how they rank, what activation reads, and that edits on disk show at once.

use super::{skill_md, write_skill};
use minibot_config::Config;
use minibot_skills::{SkillRegistry, SkillSettings, SkillSource};
use std::path::Path;

fn config(dir: &Path, toml: &str) -> Config {
    Config::from_toml(toml, "test.toml", dir, &|_| None).unwrap()
}

/// A registry over `toml` whose working folder and home are folders of `dir`.
fn registry(dir: &Path, toml: &str) -> SkillRegistry {
    let config = config(dir, toml);
    SkillRegistry::new(SkillSettings::from_config_in(&config, &dir.join("cwd"), Some(&dir.join("home"))))
}

fn names(registry: &SkillRegistry) -> Vec<String> {
    let mut names: Vec<String> = registry.skills().iter().map(|s| s.name.clone()).collect();
    names.sort();
    names
}

#[test]
fn write_path_then_defaults_then_bundled_and_the_first_name_wins() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_skill(&root.join("mine"), "alpha", &skill_md("alpha", "from the write folder"), &[]);
    write_skill(&root.join("cwd/.minibot/skills"), "alpha-copy", &skill_md("alpha", "from the project"), &[]);
    write_skill(&root.join("cwd/.agents/skills"), "beta", &skill_md("beta", "project agents folder"), &[]);
    write_skill(&root.join("home/.minibot/skills"), "gamma", &skill_md("gamma", "user folder"), &[]);
    write_skill(&root.join("home/.agents/skills"), "create-skill", &skill_md("create-skill", "my own"), &[]);
    let registry = registry(root, "[tools.skills]\nwrite_path = \"mine\"\n");

    let get = |name: &str| registry.get(name).unwrap_or_else(|| panic!("{name} missing"));
    assert_eq!(get("alpha").description, "from the write folder");
    assert_eq!(get("alpha").source, SkillSource::Project);
    assert_eq!(get("beta").source, SkillSource::Project);
    assert_eq!(get("gamma").source, SkillSource::User);
    assert_eq!(get("create-skill").description, "my own", "a user skill shadows the bundled one");
    assert_eq!(get("minibot-docs").source, SkillSource::Native);
    assert_eq!(get("minibot-docs").dir_label(), "bundled:minibot-docs");
    assert_eq!(names(&registry), ["alpha", "beta", "create-skill", "gamma", "minibot-docs"]);
    let paths = registry.discovery_paths();
    assert_eq!(paths.len(), 6);
    assert!(paths[0].ends_with("/mine") && paths[5] == "bundled:", "{paths:?}");
}

#[test]
fn paths_replace_the_default_folders_but_not_the_write_folder_or_bundled() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_skill(&root.join("cwd/.agents/skills"), "ignored", &skill_md("ignored", "default folder"), &[]);
    write_skill(&root.join("listed"), "listed", &skill_md("listed", "from paths"), &[]);
    write_skill(&root.join("w"), "written", &skill_md("written", "write folder"), &[]);
    let registry = registry(root, "[tools.skills]\nwrite_path = \"w\"\npaths = [\"listed\", \"w\", \"listed\"]\n");
    assert_eq!(names(&registry), ["create-skill", "listed", "minibot-docs", "written"]);
    assert_eq!(registry.discovery_paths().len(), 3, "repeated folders are scanned once");
}

#[test]
fn bundled_skills_follow_the_switches_that_make_them_useful() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let plain = registry(root, "[tools.skills]\nwrite_path = \"w\"\n");
    assert_eq!(names(&plain), ["create-skill", "minibot-docs"]);

    let installing =
        registry(root, "[tools.skills]\nwrite_path = \"w\"\ninstall = true\nnative_disabled = [\"minibot-docs\"]\n");
    assert_eq!(names(&installing), ["create-skill", "install-skill"]);

    let mut managing = config(root, "[tools.skills]\nwrite_path = \"w\"\n");
    managing.orchestration.agent_management.write = true;
    let managing = SkillRegistry::new(SkillSettings::from_config_in(&managing, &root.join("cwd"), None));
    assert_eq!(names(&managing), ["create-agent", "create-skill", "minibot-docs"]);

    assert!(names(&registry(root, "[tools.skills]\nwrite_path = \"w\"\nnative = false\n")).is_empty());
    let off = registry(root, "[tools.skills]\nenabled = false\n");
    assert!(off.skills().is_empty() && off.catalog_prompt().is_none());
}

#[test]
fn invalid_skills_are_skipped_and_the_rest_load() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w");
    write_skill(&w, "empty-body", "---\nname: empty-body\ndescription: nothing\n---\n\n", &[]);
    write_skill(&w, "no-frontmatter", "# Just markdown\n", &[]);
    write_skill(&w, "no-name", "---\ndescription: d\n---\nbody\n", &[]);
    write_skill(&w, "good", &skill_md("good", "fine"), &[]);
    std::fs::create_dir_all(w.join("no-skill-file")).unwrap();
    std::fs::write(w.join("loose.md"), skill_md("loose", "not in a folder")).unwrap();
    let registry = registry(dir.path(), "[tools.skills]\nwrite_path = \"w\"\nnative = false\n");
    assert_eq!(names(&registry), ["good"]);
}

#[test]
fn adding_editing_and_deleting_a_skill_shows_on_the_next_read() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w");
    let registry = registry(dir.path(), "[tools.skills]\nwrite_path = \"w\"\nnative = false\n");
    assert!(registry.skills().is_empty());

    write_skill(&w, "fresh", &skill_md("fresh", "first words"), &[]);
    assert_eq!(registry.get("fresh").unwrap().description, "first words");

    write_skill(&w, "fresh", &skill_md("fresh", "second, longer words"), &[]);
    assert_eq!(registry.get("fresh").unwrap().description, "second, longer words");

    std::fs::remove_dir_all(w.join("fresh")).unwrap();
    assert!(registry.get("fresh").is_none());
}

#[test]
fn activation_reads_the_body_compatibility_and_resources() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w");
    let text = "---\nname: report\ndescription: >\n  Write a weekly\n  report.\ncompatibility: Requires bash\n---\n\
                \n# Report\n\nRead references/style.md first.\n";
    write_skill(&w, "report", text, &[("references/style.md", "short"), ("scripts/run.sh", "echo")]);
    let registry = registry(dir.path(), "[tools.skills]\nwrite_path = \"w\"\n");
    let skill = registry.get("report").unwrap();
    assert_eq!(skill.description, "Write a weekly report.");
    assert_eq!(skill.body, "# Report\n\nRead references/style.md first.");
    assert_eq!(skill.compatibility.as_deref(), Some("Requires bash"));
    assert_eq!(skill.resources(), ["references/style.md", "scripts/run.sh"]);
    assert_eq!(skill.dir_label(), w.join("report").to_string_lossy());

    let bundled = registry.get("create-skill").unwrap();
    assert!(bundled.body.starts_with("# Creating a MiniBot skill"), "{}", bundled.body);
    assert!(bundled.resources().is_empty());
    assert_eq!(
        registry.get("minibot-docs").unwrap().compatibility.as_deref(),
        Some("Uses the bundled read_docs tool; http_request is only the fallback.")
    );
}

#[test]
fn search_ranks_and_falls_back_to_fuzzy() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w");
    for (name, description) in [
        ("pdf", "PDF basics"),
        ("pdf-forms", "Fill forms"),
        ("merge-pdf", "Merge files"),
        ("notes", "Turn a pdf into notes"),
        ("spreadsheet", "Work with tables"),
    ] {
        write_skill(&w, name, &skill_md(name, description), &[]);
    }
    let registry = registry(dir.path(), "[tools.skills]\nwrite_path = \"w\"\nnative = false\n");
    let found = |query: &str| {
        let ranked = registry.search(Some(query));
        (ranked.matches.iter().map(|s| s.name.clone()).collect::<Vec<_>>(), ranked.used_fuzzy_fallback)
    };
    assert_eq!(found("pdf"), (vec!["pdf".into(), "pdf-forms".into(), "merge-pdf".into(), "notes".into()], false));
    assert_eq!(found("spredsheet"), (vec!["spreadsheet".to_string()], true));
    assert_eq!(found("qqqqzzzz"), (vec![], false));
}

#[test]
fn the_catalog_lists_names_and_descriptions_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w");
    write_skill(&w, "zeta", &skill_md("zeta", "Last one"), &[]);
    write_skill(&w, "alpha", "---\nname: alpha\n---\nbody\n", &[]);
    let registry = registry(dir.path(), "[tools.skills]\nwrite_path = \"w\"\nnative = false\n");
    assert_eq!(
        registry.catalog_prompt().unwrap(),
        "Available skills (call activate_skill with the exact skill name to load full instructions):\n\
         - alpha: No description provided.\n- zeta: Last one"
    );
    let off = config(dir.path(), "[tools.skills]\nwrite_path = \"w\"\npreload_catalog = false\n");
    assert_eq!(minibot_skills::catalog_prompt(&off), None);
    let empty = config(dir.path(), "[tools.skills]\nwrite_path = \"empty\"\nnative = false\npaths = [\"none\"]\n");
    assert_eq!(minibot_skills::catalog_prompt(&empty), None, "no skill, no catalog");
}
