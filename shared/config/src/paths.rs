use std::path::{Component, Path, PathBuf};

/// A path as written in the config, made absolute: `~` is the home folder and a relative path sits under
/// `base`, except that with a `state` folder (the platform layout, [`crate::places`]) a path under `data/` sits
/// under `state` instead (`./data/minibot.db` is `<state>/minibot.db`) and one under `logs/` in `<state>/logs`.
pub(crate) fn resolve(base: &Path, state: Option<&Path>, written: &str) -> PathBuf {
    let expanded = match written.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME").map(|home| PathBuf::from(home).join(rest)),
        None if written == "~" => std::env::var_os("HOME").map(PathBuf::from),
        None => None,
    };
    let path = expanded.unwrap_or_else(|| PathBuf::from(written));
    if path.is_absolute() {
        return path;
    }
    if let Some(state) = state {
        let mut parts = path.components().skip_while(|c| matches!(c, Component::CurDir));
        match parts.next() {
            Some(Component::Normal(first)) if first == "data" => {
                let rest: PathBuf = parts.collect();
                return if rest.as_os_str().is_empty() { state.to_path_buf() } else { state.join(rest) };
            }
            Some(Component::Normal(first)) if first == "logs" => return state.join(&path),
            _ => {}
        }
    }
    base.join(path)
}

/// The file path inside a SQLite URL as MiniBot writes them: `sqlite+aiosqlite:///./data/x.db` (three slashes,
/// relative), `sqlite:////var/x.db` (four, absolute), and also sqlx's `sqlite://x.db` / `sqlite:x.db` and plain
/// paths. Returns `None` for anything that is not SQLite (`postgres://…`).
pub fn sqlite_path_from_url(url: &str) -> Option<String> {
    let Some((scheme, rest)) = url.split_once(':') else {
        return Some(url.to_string());
    };
    if !scheme.starts_with("sqlite") {
        // A Windows-less world: a colon in a plain path is rare, but a scheme we do not know is not SQLite.
        return if scheme.contains('/') { Some(url.to_string()) } else { None };
    }
    let path = if let Some(after) = rest.strip_prefix("///") {
        after
    } else if let Some(after) = rest.strip_prefix("//") {
        after
    } else {
        rest
    };
    let path = path.split('?').next().unwrap_or(path);
    Some(path.to_string())
}

#[cfg(test)]
mod tests {
    use super::{resolve, sqlite_path_from_url};
    use std::path::Path;

    #[test]
    fn the_platform_layout_puts_data_and_logs_in_the_state_folder_and_the_rest_with_the_config() {
        let (base, state) = (Path::new("/c/minibot"), Path::new("/d/minibot"));
        assert_eq!(resolve(base, Some(state), "./data/minibot.db"), state.join("minibot.db"));
        assert_eq!(resolve(base, Some(state), "data/files"), state.join("files"));
        assert_eq!(resolve(base, Some(state), "data"), state);
        assert_eq!(resolve(base, Some(state), "logs"), state.join("logs"));
        assert_eq!(resolve(base, Some(state), "./agents"), base.join("agents"));
        assert_eq!(resolve(base, Some(state), "secrets.vault.yml"), base.join("secrets.vault.yml"));
        assert_eq!(resolve(base, Some(state), "database/x.db"), base.join("database/x.db"));
        assert_eq!(resolve(base, Some(state), "/srv/x.db"), Path::new("/srv/x.db"));
        // A config file elsewhere: everything next to it, as written.
        assert_eq!(resolve(base, None, "./data/minibot.db"), base.join("./data/minibot.db"));
    }

    #[test]
    fn minibot_and_sqlx_urls() {
        assert_eq!(sqlite_path_from_url("sqlite+aiosqlite:///./data/x.db").as_deref(), Some("./data/x.db"));
        assert_eq!(sqlite_path_from_url("sqlite:////var/lib/x.db").as_deref(), Some("/var/lib/x.db"));
        assert_eq!(sqlite_path_from_url("sqlite://data/x.db").as_deref(), Some("data/x.db"));
        assert_eq!(sqlite_path_from_url("data/x.db").as_deref(), Some("data/x.db"));
        assert_eq!(sqlite_path_from_url("postgres://localhost/db"), None);
    }
}
