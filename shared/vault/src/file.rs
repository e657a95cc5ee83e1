//! Opening and saving a vault file. Saving writes a 0600 temp file beside the vault and renames it over, so a
//! crash leaves the old vault or the new one, never half of one.

use crate::envelope::{self, Damage};
use crate::plaintext::{format_plaintext, parse_plaintext};
use crate::{Secrets, VaultError};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Opens the vault at `path` with `password`.
pub fn read(path: &Path, password: &str) -> Result<Secrets, VaultError> {
    let text = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(VaultError::Missing { path: path.to_path_buf() });
        }
        Err(error) => return Err(VaultError::Read { path: path.to_path_buf(), error }),
    };
    let text = String::from_utf8(text)
        .map_err(|_| VaultError::Format { path: path.to_path_buf(), reason: "the file is not UTF-8 text".into() })?;
    let plaintext = envelope::open(&text, password).map_err(|damage| match damage {
        Damage::WrongKey => VaultError::WrongPassword { path: path.to_path_buf() },
        Damage::Malformed(reason) => VaultError::Format { path: path.to_path_buf(), reason },
    })?;
    let plaintext = std::str::from_utf8(&plaintext).map_err(|_| VaultError::Format {
        path: path.to_path_buf(),
        reason: "the decrypted content is not UTF-8 text".into(),
    })?;
    let entries = parse_plaintext(plaintext).map_err(|error| VaultError::Plaintext {
        path: path.to_path_buf(),
        line: error.line,
        reason: error.reason,
    })?;
    Ok(Secrets::new(entries))
}

/// Encrypts `secrets` under `password` (fresh salt and nonce) and replaces the file at `path` atomically,
/// mode 0600.
pub fn write(path: &Path, password: &str, secrets: &Secrets) -> Result<(), VaultError> {
    let fail = |error| VaultError::Write { path: path.to_path_buf(), error };
    let plaintext = format_plaintext(secrets.iter());
    let text = envelope::seal(plaintext.as_bytes(), password).map_err(fail)?;
    write_private(path, text.as_bytes()).map_err(fail)
}

/// Writes `bytes` to `path` with mode 0600 through a new temp file beside it and a rename: a crash leaves the
/// old file or the new one, the file is never readable by others, not even for a moment, and a link planted at
/// `path` is replaced, not written through. The folder must exist.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let temp = temp_path(path);
    let written = write_new(&temp, bytes).and_then(|()| std::fs::rename(&temp, path));
    if let Err(error) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(error);
    }
    // The rename is durable only once the folder is synced; a failure here loses nothing already written.
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && let Ok(dir) = std::fs::File::open(dir)
    {
        let _ = dir.sync_all();
    }
    Ok(())
}

fn temp_path(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "file".into());
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    path.with_file_name(format!(".{name}.{}.{nanos}.tmp", std::process::id()))
}

fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
    // The umask can only narrow 0600, but say it exactly.
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::collections::BTreeMap;

    fn secrets(pairs: &[(&str, &str)]) -> Secrets {
        Secrets::new(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>())
    }

    #[test]
    fn round_trip_with_mode_0600_and_no_temp_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secrets.vault.yml");
        let original = secrets(&[("OPENAI_KEY", "sk-test-1"), ("multi", "a\nb"), ("empty", "")]);
        write(&path, "pw", &original).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(read(&path, "pw").unwrap(), original);
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["secrets.vault.yml"]);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("sk-test-1"), "the value is on disk in clear: {text}");
    }

    #[test]
    fn overwriting_replaces_a_wider_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.yml");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        write(&path, "pw", &secrets(&[("A", "b")])).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    }

    #[test]
    fn errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secrets.vault.yml");
        let missing = read(&path, "pw").unwrap_err().to_string();
        assert!(missing.contains("does not exist") && missing.contains("secrets.vault.yml"), "{missing}");
        write(&path, "right", &secrets(&[("A", "value")])).unwrap();
        let wrong = read(&path, "wrong").unwrap_err().to_string();
        assert_eq!(wrong, format!("wrong vault password or damaged file: {}", path.display()));
        std::fs::write(&path, "A: plain\n").unwrap();
        let format = read(&path, "right").unwrap_err().to_string();
        assert!(format.starts_with(&format!("{}: not a vault file", path.display())), "{format}");
        let unwritable = write(&dir.path().join("no/such/dir/v.yml"), "pw", &secrets(&[])).unwrap_err().to_string();
        assert!(unwritable.contains("no/such/dir/v.yml"), "{unwritable}");
    }
}
