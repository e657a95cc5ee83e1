use std::path::PathBuf;

/// Everything that can go wrong while reading configuration. Every variant names the file, the key path or the
/// variable involved, because the user has to find and fix it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("config path {0} exists but is not a file")]
    NotAFile(PathBuf),
    #[error("config file {0} must end in .toml")]
    NotToml(PathBuf),
    #[error("{path}: invalid TOML: {message}")]
    Syntax { path: String, message: String },
    #[error("{file}: environment variable {var} is not set (referenced by `{key}`); set it or write `$${{{var}}}` for a literal")]
    UnsetVariable { file: String, var: String, key: String },
    #[error("{file}: unknown section [{section}]")]
    UnknownSection { file: String, section: String },
    #[error("{file}: `{key}`: {message}")]
    InvalidKey { file: String, key: String, message: String },
    #[error("{file}: {message}")]
    Invalid { file: String, message: String },
    #[error("agent file {path}: {message}")]
    Agent { path: PathBuf, message: String },
}

pub type Result<T> = std::result::Result<T, ConfigError>;
