use std::path::PathBuf;

/// Everything that can go wrong while reading configuration. Every variant names the file, the key path or the
/// variable involved, because the user has to find and fix it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The cause is the `source()`, not part of the message, so `{:#}` prints it once.
    #[error("cannot read config file {}", .path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("config path {0} exists but is not a file")]
    NotAFile(PathBuf),
    #[error("config file {0} must end in .toml")]
    NotToml(PathBuf),
    #[error("{path}: invalid TOML: {message}")]
    Syntax { path: String, message: String },
    #[error(
        "{file}: environment variable {var} is not set (referenced by `{key}`); set it or write `$${{{var}}}` for a literal"
    )]
    UnsetVariable { file: String, var: String, key: String },
    /// `hint` is empty or starts with `; ` (the closest known name, or where the name belongs); `line` is where
    /// the file writes it.
    #[error("{file}{}: unknown section [{section}]{hint}", at_line(*.line))]
    UnknownSection { file: String, section: String, line: Option<usize>, hint: String },
    /// `line` is where the file writes the key, when it is known (an unknown key: "unknown key; did you mean …").
    #[error("{file}{}: `{key}`: {message}", at_line(*.line))]
    InvalidKey { file: String, key: String, message: String, line: Option<usize> },
    #[error("{file}: {message}")]
    Invalid { file: String, message: String },
    /// A `MINIBOT__…` override that cannot be applied, or a problem at a key it set: named by both, because
    /// the fix is in the environment, not in the file.
    #[error("environment variable {var} (`{key}`): {message}")]
    Override { var: String, key: String, message: String },
    #[error("agent file {path}: {message}")]
    Agent { path: PathBuf, message: String },
    #[error("{file}: key {key}: ${{secret:{name}}} needs the vault, which is off: set [vault] enabled = true")]
    SecretWithoutVault { file: String, key: String, name: String },
    #[error("{file}: key {key}: secret {name} is not in the vault {}", .vault.display())]
    MissingSecret { file: String, key: String, name: String, vault: PathBuf },
    #[error(
        "{file}: key {key}: [vault] cannot use ${{secret:{name}}}: the vault is still closed while [vault] is read"
    )]
    SecretInVaultSection { file: String, key: String, name: String },
    /// The vault did not open: no password source, a wrong password, a missing or damaged file. The cause is
    /// part of the one-line message, not a `source()`, so `{:#}` does not print it twice.
    #[error("{file}: key {key}: {error}")]
    Vault { file: String, key: String, error: minibot_vault::VaultError },
    /// An error whose text held a value taken from the environment, with that value masked.
    #[error("{0}")]
    Masked(String),
    /// A `config.toml` in the working folder that the user has not trusted ([`crate::trust`]).
    #[error(transparent)]
    Untrusted(#[from] crate::trust::Untrusted),
    /// Keys that ask for features this version does not have ([`crate::support`]); one line each.
    #[error("{}", lines(.0))]
    Unsupported(Vec<crate::Unsupported>),
}

pub type Result<T> = std::result::Result<T, ConfigError>;

fn at_line(line: Option<usize>) -> String {
    line.map(|n| format!(", line {n}")).unwrap_or_default()
}

fn lines(findings: &[crate::Unsupported]) -> String {
    findings.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
}
