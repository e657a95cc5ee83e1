#![allow(clippy::expect_used, clippy::unwrap_used)]

//! Where a run keeps its state, by where (and whether) a config file is found: the working directory must not
//! decide where the history is unless a config file there says so.

use minibot_config::{Config, PlatformDirs, Unlock, Vars, sqlite_path_from_url};
use minibot_vault::NoPrompt;
use std::path::{Path, PathBuf};

/// A fake home with a working directory elsewhere.
struct Dirs {
    home: tempfile::TempDir,
    cwd: tempfile::TempDir,
}

impl Dirs {
    fn new() -> Self {
        Self { home: tempfile::tempdir().unwrap(), cwd: tempfile::tempdir().unwrap() }
    }

    fn vars(&self, extra: &[(&str, &str)]) -> Vars {
        let home = self.home.path().to_str().unwrap();
        [("HOME", home)].iter().chain(extra).copied().collect()
    }

    fn load(&self, extra: &[(&str, &str)]) -> Config {
        Config::load_from(None, self.cwd.path(), &self.vars(extra), Unlock::Password(&NoPrompt)).unwrap()
    }

    fn config_dir(&self) -> PathBuf {
        self.home.path().join(".config/minibot")
    }

    fn data_dir(&self) -> PathBuf {
        self.home.path().join(".local/share/minibot")
    }
}

fn memory_db(config: &Config) -> PathBuf {
    config.resolve_path(&sqlite_path_from_url(&config.memory.sqlite_url).unwrap())
}

#[test]
fn without_a_config_file_state_goes_to_the_platform_folders_not_the_working_directory() {
    let dirs = Dirs::new();
    let config = dirs.load(&[]);
    assert_eq!(config.source, None);
    assert_eq!(config.data_dir(), dirs.data_dir());
    assert_eq!(config.log_dir(), dirs.data_dir().join("logs"));
    assert_eq!(memory_db(&config), dirs.data_dir().join("minibot.db"));
    assert_eq!(config.resolve_path(&config.orchestration.directory), dirs.config_dir().join("agents"));
    assert_eq!(config.vault_file(), dirs.config_dir().join("secrets.vault.yml"));
    assert_eq!(config.config_file(), dirs.config_dir().join("config.toml"));
    assert!(!memory_db(&config).starts_with(dirs.cwd.path()));
}

#[test]
fn the_platform_config_file_is_found_from_any_folder_and_keeps_the_same_places() {
    let dirs = Dirs::new();
    std::fs::create_dir_all(dirs.config_dir()).unwrap();
    std::fs::write(dirs.config_dir().join("config.toml"), "[llm]\nmodel = \"from-platform\"\n").unwrap();
    let config = dirs.load(&[]);
    assert_eq!(config.llm.model, "from-platform");
    assert_eq!(config.source.as_deref(), Some(dirs.config_dir().join("config.toml").as_path()));
    // Writing the file (`minibot init`) does not move the history that a run without it kept.
    assert_eq!(memory_db(&config), dirs.data_dir().join("minibot.db"));
    assert_eq!(config.log_dir(), dirs.data_dir().join("logs"));
    assert_eq!(config.resolve_path(&config.orchestration.directory), dirs.config_dir().join("agents"));
    // The same file named with --config (as the orchestrator names it to its local workers) lays out the same.
    let explicit = dirs.config_dir().join("config.toml");
    let vars = dirs.vars(&[]);
    let again = Config::load_from(Some(&explicit), Path::new("/"), &vars, Unlock::Password(&NoPrompt)).unwrap();
    assert_eq!(memory_db(&again), memory_db(&config));
}

#[test]
fn a_trusted_config_file_in_the_working_directory_wins_and_keeps_everything_next_to_it() {
    let dirs = Dirs::new();
    std::fs::create_dir_all(dirs.config_dir()).unwrap();
    std::fs::write(dirs.config_dir().join("config.toml"), "[llm]\nmodel = \"from-platform\"\n").unwrap();
    let here = dirs.cwd.path().join("config.toml");
    std::fs::write(&here, "[llm]\nmodel = \"from-here\"\n").unwrap();
    let platform = PlatformDirs::from_vars(&dirs.vars(&[])).unwrap();
    let refused = Config::load_from(None, dirs.cwd.path(), &dirs.vars(&[]), Unlock::Password(&NoPrompt)).unwrap_err();
    assert!(refused.to_string().contains("is not trusted yet"), "{refused}");
    let parsed = Config::load_from(Some(&here), dirs.cwd.path(), &dirs.vars(&[]), Unlock::Password(&NoPrompt)).unwrap();
    minibot_config::trust::record(&platform, &here, &parsed).unwrap();
    let config = dirs.load(&[]);
    assert_eq!(config.llm.model, "from-here");
    assert_eq!(memory_db(&config), dirs.cwd.path().join("./data/minibot.db"));
    assert_eq!(config.log_dir(), dirs.cwd.path().join("logs"));
    assert_eq!(config.data_dir(), dirs.cwd.path().join("data"));
}

#[test]
fn xdg_folders_are_respected() {
    let dirs = Dirs::new();
    let (conf, data) = (dirs.home.path().join("conf"), dirs.home.path().join("share"));
    let config = dirs.load(&[("XDG_CONFIG_HOME", conf.to_str().unwrap()), ("XDG_DATA_HOME", data.to_str().unwrap())]);
    assert_eq!(config.config_file(), conf.join("minibot/config.toml"));
    assert_eq!(memory_db(&config), data.join("minibot/minibot.db"));
}

#[test]
fn without_a_home_folder_the_working_directory_is_used_as_before() {
    let cwd = tempfile::tempdir().unwrap();
    let config = Config::load_from(None, cwd.path(), &Vars::default(), Unlock::Password(&NoPrompt)).unwrap();
    assert_eq!(config.log_dir(), cwd.path().join("logs"));
    assert_eq!(memory_db(&config), cwd.path().join("./data/minibot.db"));
}

#[test]
fn overrides_without_a_file_use_the_platform_folders_too() {
    let dirs = Dirs::new();
    let config = dirs.load(&[("MINIBOT__MEMORY__SQLITE_URL", "sqlite:///./data/other.db")]);
    assert_eq!(memory_db(&config), dirs.data_dir().join("other.db"));
}

/// Red-team report (#22, F7): another user could swap a config in a world-writable folder and redirect the key.
#[cfg(unix)]
#[test]
fn a_config_anyone_can_change_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dirs = Dirs::new();
    let folder = dirs.cwd.path().join("shared");
    std::fs::create_dir(&folder).unwrap();
    let file = folder.join("config.toml");
    std::fs::write(&file, "").unwrap();
    let load = || Config::load_from(Some(&file), dirs.cwd.path(), &dirs.vars(&[]), Unlock::Password(&NoPrompt));
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o777)).unwrap();
    let refused = load().unwrap_err().to_string();
    assert!(refused.contains("has mode 777; run `chmod o-w"), "{refused}");
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o1777)).unwrap();
    load().unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
    let refused = load().unwrap_err().to_string();
    assert!(refused.contains("(mode 666)"), "{refused}");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o755)).unwrap();
    load().unwrap();
    // Red-team report (#22, B7): a world-writable folder further up, or where a link leads, counts too.
    std::fs::set_permissions(dirs.cwd.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    assert!(load().unwrap_err().to_string().contains("has mode 777"));
    std::fs::set_permissions(dirs.cwd.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let open = dirs.home.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::write(open.join("real.toml"), "").unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink(open.join("real.toml"), &file).unwrap();
    assert!(load().unwrap_err().to_string().contains("has mode 777"));
}
