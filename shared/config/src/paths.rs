use std::path::{Path, PathBuf};

pub(crate) fn resolve(base: &Path, written: &str) -> PathBuf {
    let expanded = match written.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME").map(|home| PathBuf::from(home).join(rest)),
        None if written == "~" => std::env::var_os("HOME").map(PathBuf::from),
        None => None,
    };
    let path = expanded.unwrap_or_else(|| PathBuf::from(written));
    if path.is_absolute() { path } else { base.join(path) }
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
    use super::sqlite_path_from_url;

    #[test]
    fn minibot_and_sqlx_urls() {
        assert_eq!(sqlite_path_from_url("sqlite+aiosqlite:///./data/x.db").as_deref(), Some("./data/x.db"));
        assert_eq!(sqlite_path_from_url("sqlite:////var/lib/x.db").as_deref(), Some("/var/lib/x.db"));
        assert_eq!(sqlite_path_from_url("sqlite://data/x.db").as_deref(), Some("data/x.db"));
        assert_eq!(sqlite_path_from_url("data/x.db").as_deref(), Some("data/x.db"));
        assert_eq!(sqlite_path_from_url("postgres://localhost/db"), None);
    }
}
