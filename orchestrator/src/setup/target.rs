//! Which file `minibot init` writes: `--config`, else `MINIBOT_CONFIG`, else `./config.toml` when it exists,
//! else the per-user config file (`~/.config/minibot/config.toml` on Linux) that `minibot` finds by itself.

use std::path::{Path, PathBuf};

pub fn resolve(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    let cwd = std::env::current_dir()?;
    let chosen = match explicit {
        Some(path) => path.to_path_buf(),
        None => match std::env::var("MINIBOT_CONFIG").ok().filter(|v| !v.is_empty()) {
            Some(path) => PathBuf::from(path),
            None if cwd.join("config.toml").exists() => {
                // Someone else's file (a cloned project) would be read for defaults and given the user's key.
                let here = cwd.join("config.toml");
                minibot_config::trust::check(minibot_config::PlatformDirs::current().as_ref(), &here)?;
                here
            }
            None => user_config_file()?,
        },
    };
    let chosen = if chosen.is_absolute() { chosen } else { cwd.join(chosen) };
    // `./config.toml` is shown as `/home/me/p/config.toml`, not `/home/me/p/./config.toml`.
    let chosen: PathBuf = chosen.components().collect();
    if chosen.extension().and_then(|e| e.to_str()) != Some("toml") {
        anyhow::bail!("{}: a config file must end in .toml", chosen.display());
    }
    if chosen.is_dir() {
        anyhow::bail!("{} is a folder; pass --config with a file name such as config.toml", chosen.display());
    }
    Ok(chosen)
}

fn user_config_file() -> anyhow::Result<PathBuf> {
    minibot_config::Config::default_config_file()
        .ok_or_else(|| anyhow::anyhow!("cannot tell where your config folder is (no home folder); pass --config PATH"))
}
