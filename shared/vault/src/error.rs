use std::path::PathBuf;

/// What can go wrong with a vault. Every variant names the file involved; none ever carries a secret value.
/// The I/O cause is part of the message and deliberately not a `source()`, so `{:#}` prints it once.
#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    #[error("vault {} does not exist; create it with `minibot vault init {}`", .path.display(), .path.display())]
    Missing { path: PathBuf },
    #[error("cannot read vault {}: {error}", .path.display())]
    Read { path: PathBuf, error: std::io::Error },
    #[error("cannot write vault {}: {error}", .path.display())]
    Write { path: PathBuf, error: std::io::Error },
    #[error("wrong vault password or damaged file: {}", .path.display())]
    WrongPassword { path: PathBuf },
    #[error("{}: not a vault file: {reason}", .path.display())]
    Format { path: PathBuf, reason: String },
    #[error("{}: line {line}: {reason}", .path.display())]
    Plaintext { path: PathBuf, line: usize, reason: String },
    #[error("cannot read vault password file {}: {error}", .path.display())]
    PasswordFile { path: PathBuf, error: std::io::Error },
    #[error("vault password file {} is empty", .path.display())]
    EmptyPasswordFile { path: PathBuf },
    #[error("no password for vault {}: {ways}", .path.display())]
    NoPassword { path: PathBuf, ways: String },
    #[error("cannot ask for the password of vault {}: {error}", .path.display())]
    Prompt { path: PathBuf, error: std::io::Error },
    #[error("the passwords for vault {} do not match", .path.display())]
    PasswordMismatch { path: PathBuf },
    #[error("the password for vault {} is empty", .path.display())]
    EmptyPassword { path: PathBuf },
}
