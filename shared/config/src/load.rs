use crate::expand::{self, WholeReference};
use crate::keypath::{lookup_mut, lookup_ref};
use crate::overrides::{self, Override};
use crate::schema::{ConfigFile, SECTIONS};
use crate::vault::{Origin, Unlock};
use crate::{Config, ConfigError, Result, suggest};
use minibot_vault::{Password, Secrets};
use std::path::{Path, PathBuf};
use toml::Value;

pub(crate) fn from_file(
    path: &Path,
    lookup: &dyn Fn(&str) -> Option<String>,
    overrides: &[Override],
    unlock: Unlock<'_>,
    platform: Option<&crate::PlatformDirs>,
    found_here: bool,
) -> Result<Config> {
    if path.exists() && !path.is_file() {
        return Err(ConfigError::NotAFile(path.to_path_buf()));
    }
    if path.extension().and_then(|e| e.to_str()) != Some("toml") {
        return Err(ConfigError::NotToml(path.to_path_buf()));
    }
    let text =
        std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
    let origin = path.display().to_string();
    if let Some(problem) = writable_by_anyone(path) {
        return Err(ConfigError::Invalid { file: origin, message: problem });
    }
    // A config found in the working folder: the text just read is the one checked against the record, before
    // its secrets are read; the files it names, once it is parsed and before anything starts (crate::trust).
    let verified = if found_here { crate::trust::verify(platform, path, text.as_bytes())? } else { None };
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let base_dir = absolute.parent().map(Path::to_path_buf).unwrap_or_default();
    // The platform config file keeps its state where a run without a file kept it ([`crate::places`]).
    let state_dir = platform.filter(|dirs| dirs.is_config_dir(&base_dir)).map(|dirs| dirs.data_dir.clone());
    let file = File { text: &text, origin: &origin, path: Some(absolute), base_dir, state_dir };
    let config = build(file, lookup, overrides, unlock)?;
    if let Some(verified) = verified {
        verified.check_files(&config)?;
    }
    Ok(config)
}

/// Why any user of this machine could change what `path` says, if one could: the file (or the file a link
/// leads to) is world-writable, or a folder on the way to it is (without the sticky bit, which keeps others
/// from replacing a file they do not own). Such a file decides where the keys go and which programs start
/// (red-team reports, #22 F7 and B7), so it is refused, as ssh refuses such a `~/.ssh`.
#[cfg(unix)]
pub fn writable_by_anyone(path: &Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    const OTHERS_WRITE: u32 = 0o002;
    const STICKY: u32 = 0o1000;
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let real = std::fs::canonicalize(&absolute).ok()?;
    let mode = std::fs::metadata(&real).ok()?.permissions().mode();
    if mode & OTHERS_WRITE != 0 {
        return Some(format!(
            "any user of this machine can change {} (mode {:o}): run `chmod o-w {}`",
            real.display(),
            mode & 0o7777,
            real.display()
        ));
    }
    // The folders on the way to the link and to what it leads to: any of them lets others swap what is below.
    let folders = absolute.ancestors().skip(1).chain(real.ancestors().skip(1));
    for folder in folders {
        let Ok(meta) = std::fs::symlink_metadata(folder) else { continue };
        let mode = meta.permissions().mode();
        if meta.is_dir() && mode & OTHERS_WRITE != 0 && mode & STICKY == 0 {
            return Some(format!(
                "any user of this machine can replace {}: the folder {} has mode {:o}; run `chmod o-w {}`",
                absolute.display(),
                folder.display(),
                mode & 0o7777,
                folder.display()
            ));
        }
    }
    None
}

#[cfg(not(unix))]
pub fn writable_by_anyone(_path: &Path) -> Option<String> {
    None
}

/// The text to load (empty when there is no file), what to call it in errors and where it lives.
pub(crate) struct File<'a> {
    pub text: &'a str,
    pub origin: &'a str,
    pub path: Option<PathBuf>,
    pub base_dir: PathBuf,
    /// The platform data folder, in the platform layout ([`crate::places`]).
    pub state_dir: Option<PathBuf>,
}

/// The file with `overrides` on top, typed and checked. A problem that an override caused names its variable.
pub(crate) fn build(
    file: File<'_>,
    lookup: &dyn Fn(&str) -> Option<String>,
    overrides: &[Override],
    unlock: Unlock<'_>,
) -> Result<Config> {
    let origin = Origin { name: file.origin, base_dir: &file.base_dir, state_dir: file.state_dir.as_deref(), lookup };
    let checked = parse(file.text, &origin, overrides, unlock).and_then(|(typed, (secrets, vault_password))| {
        let config = Config {
            file: typed,
            source: file.path,
            base_dir: file.base_dir.clone(),
            state_dir: file.state_dir.clone(),
            secrets,
            vault_password,
        };
        crate::validate::check(&config, file.origin).map(|()| config)
    });
    checked.map_err(|err| masked(overrides::blame(with_line(err, file.text), overrides), file.text, lookup, overrides))
}

/// The error with every credential the file took from the environment (`${OPENAI_API_KEY}`, a `MINIBOT__…`
/// override of a key such as `api_key`) masked: a message
/// that quotes a value it got ("unknown provider `…`", a vault path) must not print the key that a reference
/// stood for (red-team report, #22 B6). Type errors already quote the reference itself (see [`as_written`]).
fn masked(
    err: ConfigError,
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    overrides: &[Override],
) -> ConfigError {
    let message = err.to_string();
    let mut table: toml::Table = toml::from_str(text).unwrap_or_default();
    // Only credentials: a `${MODEL}` or `MINIBOT__LLM__MODEL` quoted in an error is what the user must see.
    // References in the file, and in override values (`MINIBOT__LLM__PROVIDER='${OPENAI_API_KEY}'`).
    let mut names: Vec<String> =
        expand::references(expand::Kind::Env, &mut table).into_iter().map(|(_, n)| n).collect();
    for value in overrides.iter().map(|o| o.value.as_str()) {
        names.extend(
            value.split("${").skip(1).filter_map(|rest| rest.split_once('}')).map(|(name, _)| name.to_string()),
        );
    }
    let mut values: Vec<String> =
        names.iter().filter_map(|name| lookup(name).filter(|value| crate::is_secret_variable(name, value))).collect();
    values.extend(overrides.iter().filter(|o| crate::is_secret_name(&o.key)).map(|o| o.value.clone()));
    values.retain(|value| value.chars().count() >= MASKED_MIN_CHARS && message.contains(value.as_str()));
    if values.is_empty() {
        return err;
    }
    let redactor = minibot_vault::Redactor::from_values(values.iter().map(String::as_str));
    ConfigError::Masked(redactor.redact(&message).into_owned())
}

/// Shorter values are ordinary words (`true`, `8080`, `INFO`) that a message may well contain on its own.
const MASKED_MIN_CHARS: usize = 8;

/// The error with the line of its key, where the text writes that key.
fn with_line(err: ConfigError, text: &str) -> ConfigError {
    match err {
        ConfigError::InvalidKey { file, key, message, line: None } => {
            ConfigError::InvalidKey { line: suggest::line_of(text, &key), file, key, message }
        }
        other => other,
    }
}

/// Parses, layers the overrides on top, expands `${ENV}` then `${secret:…}` (unlocking the vault as `unlock`
/// says), and types the result.
pub(crate) fn parse(
    text: &str,
    source: &Origin<'_>,
    overrides: &[Override],
    unlock: Unlock<'_>,
) -> Result<(ConfigFile, (Secrets, Option<Password>))> {
    let (origin, lookup) = (source.name, source.lookup);
    let file: toml::Table = toml::from_str(text)
        .map_err(|e| ConfigError::Syntax { path: origin.to_string(), message: e.to_string().trim_end().to_string() })?;
    if let Some((name, value)) = file.iter().find(|(k, _)| !SECTIONS.contains(&k.as_str())) {
        let line = suggest::line_of(text, name);
        return Err(match value.is_table() {
            true => ConfigError::UnknownSection {
                file: origin.into(),
                section: name.clone(),
                line,
                hint: suggest::for_section(name),
            },
            false => ConfigError::InvalidKey {
                file: origin.into(),
                key: name.clone(),
                message: format!("unknown key{}", suggest::for_top_level_key(name)),
                line,
            },
        });
    }
    let mut table = crate::layers::merge(file, origin, overrides)?;
    let written = table.clone();
    let expansion = expand::expand_tree(&mut table, lookup).map_err(|unset| ConfigError::UnsetVariable {
        file: origin.into(),
        var: unset.var,
        key: unset.key,
    })?;
    let mut whole = expansion.whole_references;
    // An override is text standing for whatever its key wants, like a value written as exactly "${VAR}".
    whole.extend(overrides.iter().map(|o| WholeReference { key: o.key.clone() }));
    let secrets = crate::vault::expand_secrets(&mut table, &mut whole, source, unlock)?;
    let typed = deserialize_with_coercion(table, &whole, origin).map_err(|err| as_written(err, &written))?;
    Ok((typed, secrets))
}

/// A type error quotes the value it got, which for `"${secret:…}"` or `"${VAR}"` is the expanded secret: it
/// quotes what the file wrote instead.
fn as_written(err: ConfigError, written: &toml::Table) -> ConfigError {
    let ConfigError::InvalidKey { file, key, message, line } = err else { return err };
    let Some(Value::String(text)) = lookup_ref(written, &key) else {
        return ConfigError::InvalidKey { file, key, message, line };
    };
    if !text.contains("${") {
        return ConfigError::InvalidKey { file, key, message, line };
    }
    let message = match message.split_once('"').zip(message.rsplit_once('"')) {
        Some(((before, _), (_, after))) if message.matches('"').count() >= 2 => {
            format!("{before}{text:?} (as written){after}")
        }
        _ => format!("the value of {text:?} does not fit"),
    };
    ConfigError::InvalidKey { file, key, message, line }
}

/// A value written as exactly `"${VAR}"` may stand for a number or a boolean (`port = "${PORT}"`). Such values
/// are first read as that scalar; where the key turns out to want text, the text is put back and we try again.
pub(crate) fn deserialize_with_coercion(
    table: toml::Table,
    whole: &[WholeReference],
    origin: &str,
) -> Result<ConfigFile> {
    let mut coerced = table.clone();
    let mut candidates: Vec<&str> = Vec::new();
    for reference in whole {
        if let Some(slot) = lookup_mut(&mut coerced, &reference.key)
            && let Value::String(text) = slot
            && let Some(scalar) = scalar_from_text(text)
        {
            *slot = scalar;
            candidates.push(&reference.key);
        }
    }
    loop {
        match serde_path_to_error::deserialize::<_, ConfigFile>(Value::Table(coerced.clone())) {
            Ok(file) => return Ok(file),
            Err(err) => {
                let path = err.path().to_string();
                if let Some(index) = candidates.iter().position(|key| *key == path) {
                    let key = candidates.swap_remove(index);
                    if let (Some(slot), Some(original)) = (lookup_mut(&mut coerced, key), lookup_ref(&table, key)) {
                        *slot = original.clone();
                        continue;
                    }
                }
                return Err(describe(err, origin));
            }
        }
    }
}

fn describe(err: serde_path_to_error::Error<toml::de::Error>, origin: &str) -> ConfigError {
    let path = err.path().to_string();
    // toml appends "in `section`" on a second line; the key path already says where.
    let message = err.into_inner().to_string();
    let message = message.lines().next().unwrap_or_default().trim_end().to_string();
    let key = if path.is_empty() || path == "?" { String::from("(top level)") } else { path };
    if let Some(field) = message.strip_prefix("unknown field `").and_then(|rest| rest.split('`').next()) {
        // The path normally ends in the unknown key; where it stops at the table, the key is added.
        let key = if key.ends_with(&format!(".{field}")) || key == field { key } else { format!("{key}.{field}") };
        let message = format!("unknown key{}", suggest::for_key(field, &suggest::expected_names(&message)));
        return ConfigError::InvalidKey { file: origin.into(), key, message, line: None };
    }
    ConfigError::InvalidKey { file: origin.into(), key, message, line: None }
}

fn scalar_from_text(text: &str) -> Option<Value> {
    match text {
        "true" => return Some(Value::Boolean(true)),
        "false" => return Some(Value::Boolean(false)),
        _ => {}
    }
    if let Ok(int) = text.parse::<i64>() {
        return Some(Value::Integer(int));
    }
    text.parse::<f64>().ok().filter(|f| f.is_finite()).map(Value::Float)
}
