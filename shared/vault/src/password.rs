//! Where the vault password comes from, in MiniBot's order: a password file, then `MINIBOT_VAULT_PASSWORD`,
//! then a prompt on the terminal. The prompt is a trait so that libraries and tests never need a terminal.

use crate::VaultError;
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use zeroize::Zeroizing;

/// Asks a person for a password.
pub trait PasswordPrompt: Send + Sync {
    /// Shows `prompt` and reads one line without echo. `Ok(None)` when there is nobody to ask (no terminal).
    fn ask(&self, prompt: &str) -> std::io::Result<Option<Zeroizing<String>>>;
}

/// Never asks: for processes and tests without a terminal.
pub struct NoPrompt;

impl PasswordPrompt for NoPrompt {
    fn ask(&self, _prompt: &str) -> std::io::Result<Option<Zeroizing<String>>> {
        Ok(None)
    }
}

/// Asks on the controlling terminal (`/dev/tty`) with echo off, so it works while stdin is a pipe. A process
/// without a controlling terminal (a service, CI) has nobody to ask.
pub struct TtyPrompt;

impl PasswordPrompt for TtyPrompt {
    fn ask(&self, prompt: &str) -> std::io::Result<Option<Zeroizing<String>>> {
        let Ok(tty) = std::fs::OpenOptions::new().read(true).write(true).open("/dev/tty") else {
            return Ok(None);
        };
        (&tty).write_all(prompt.as_bytes())?;
        let line = {
            let _echo_off = EchoOff::new(&tty)?;
            read_line(&tty)?
        };
        (&tty).write_all(b"\n")?;
        Ok(Some(line))
    }
}

/// Turns terminal echo off until dropped (also when reading fails).
struct EchoOff<'a> {
    tty: &'a File,
    saved: nix::sys::termios::Termios,
}

impl<'a> EchoOff<'a> {
    fn new(tty: &'a File) -> std::io::Result<Self> {
        use nix::sys::termios::{LocalFlags, SetArg, tcgetattr, tcsetattr};
        let saved = tcgetattr(tty).map_err(std::io::Error::from)?;
        let mut quiet = saved.clone();
        quiet.local_flags.remove(LocalFlags::ECHO);
        tcsetattr(tty, SetArg::TCSAFLUSH, &quiet).map_err(std::io::Error::from)?;
        Ok(Self { tty, saved })
    }
}

impl Drop for EchoOff<'_> {
    fn drop(&mut self) {
        let _ = nix::sys::termios::tcsetattr(self.tty, nix::sys::termios::SetArg::TCSAFLUSH, &self.saved);
    }
}

/// Reads up to a newline byte by byte, so no buffer outside the zeroized one keeps the password.
fn read_line(mut source: impl Read) -> std::io::Result<Zeroizing<String>> {
    let mut bytes = Zeroizing::new(Vec::new());
    let mut byte = [0u8; 1];
    while source.read(&mut byte)? == 1 && byte[0] != b'\n' {
        bytes.push(byte[0]);
    }
    if bytes.last() == Some(&b'\r') {
        bytes.pop();
    }
    let text = String::from_utf8(std::mem::take(&mut *bytes))
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.utf8_error()))?;
    Ok(Zeroizing::new(text))
}

/// The password sources for one vault.
pub struct PasswordSources<'a> {
    /// A file that holds the password (already resolved); trailing line breaks are stripped.
    pub file: Option<PathBuf>,
    /// The setting that names such a file (`[vault] password_file`, `--password-file`), for the message when
    /// no source is there.
    pub file_setting: &'a str,
    /// The value of `MINIBOT_VAULT_PASSWORD`; empty counts as unset.
    pub env: Option<String>,
    pub prompt: &'a dyn PasswordPrompt,
}

impl PasswordSources<'_> {
    /// The password to open `vault` with.
    pub fn password(&self, vault: &Path) -> Result<Zeroizing<String>, VaultError> {
        self.obtain(vault, false)
    }

    /// The password for a new vault: as [`Self::password`], but a prompt asks twice and both must match.
    pub fn new_password(&self, vault: &Path) -> Result<Zeroizing<String>, VaultError> {
        self.obtain(vault, true)
    }

    fn obtain(&self, vault: &Path, confirm: bool) -> Result<Zeroizing<String>, VaultError> {
        if let Some(path) = &self.file {
            return read_password_file(path);
        }
        if let Some(value) = self.env.as_deref().filter(|v| !v.is_empty()) {
            return Ok(Zeroizing::new(value.to_string()));
        }
        let prompt_error = |error| VaultError::Prompt { path: vault.to_path_buf(), error };
        let Some(first) = self.prompt.ask(&format!("Password for {}: ", vault.display())).map_err(prompt_error)? else {
            return Err(VaultError::NoPassword {
                path: vault.to_path_buf(),
                ways: format!(
                    "set {}, set {}, or run on a terminal to type it",
                    self.file_setting,
                    crate::PASSWORD_ENV
                ),
            });
        };
        if first.is_empty() {
            return Err(VaultError::EmptyPassword { path: vault.to_path_buf() });
        }
        if confirm {
            let again = self.prompt.ask("Repeat the password: ").map_err(prompt_error)?;
            if again.as_deref().map(String::as_str) != Some(first.as_str()) {
                return Err(VaultError::PasswordMismatch { path: vault.to_path_buf() });
            }
        }
        Ok(first)
    }
}

fn read_password_file(path: &Path) -> Result<Zeroizing<String>, VaultError> {
    let bytes = std::fs::read(path)
        .map(Zeroizing::new)
        .map_err(|error| VaultError::PasswordFile { path: path.to_path_buf(), error })?;
    let text = std::str::from_utf8(&bytes).map_err(|e| VaultError::PasswordFile {
        path: path.to_path_buf(),
        error: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
    })?;
    let password = text.trim_end_matches(['\n', '\r']);
    if password.is_empty() {
        return Err(VaultError::EmptyPasswordFile { path: path.to_path_buf() });
    }
    Ok(Zeroizing::new(password.to_string()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::sync::Mutex;

    /// Answers from a list, recording the prompts.
    struct Scripted(Mutex<Vec<&'static str>>);

    impl PasswordPrompt for Scripted {
        fn ask(&self, _prompt: &str) -> std::io::Result<Option<Zeroizing<String>>> {
            let mut answers = self.0.lock().unwrap();
            Ok((!answers.is_empty()).then(|| Zeroizing::new(answers.remove(0).to_string())))
        }
    }

    fn sources<'a>(file: Option<PathBuf>, env: Option<&str>, prompt: &'a dyn PasswordPrompt) -> PasswordSources<'a> {
        PasswordSources { file, file_setting: "[vault] password_file", env: env.map(String::from), prompt }
    }

    #[test]
    fn file_wins_over_env_wins_over_prompt() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pw");
        std::fs::write(&file, "from-file\n").unwrap();
        let prompt = Scripted(Mutex::new(vec!["typed"]));
        let vault = Path::new("v.yml");
        assert_eq!(sources(Some(file), Some("env"), &prompt).password(vault).unwrap().as_str(), "from-file");
        assert_eq!(sources(None, Some("env"), &prompt).password(vault).unwrap().as_str(), "env");
        assert_eq!(sources(None, Some(""), &prompt).password(vault).unwrap().as_str(), "typed");
    }

    #[test]
    fn password_file_keeps_inner_spaces_and_rejects_empty() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pw");
        std::fs::write(&file, " two words \r\n").unwrap();
        let got = sources(Some(file.clone()), None, &NoPrompt).password(Path::new("v")).unwrap();
        assert_eq!(got.as_str(), " two words ");
        std::fs::write(&file, "\n").unwrap();
        let err = sources(Some(file.clone()), None, &NoPrompt).password(Path::new("v")).unwrap_err();
        assert_eq!(err.to_string(), format!("vault password file {} is empty", file.display()));
        let missing = dir.path().join("nope");
        let err = sources(Some(missing.clone()), None, &NoPrompt).password(Path::new("v")).unwrap_err();
        assert!(err.to_string().contains(&missing.display().to_string()), "{err}");
    }

    #[test]
    fn no_source_names_all_three_ways() {
        let err = sources(None, None, &NoPrompt).password(Path::new("/x/secrets.vault.yml")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no password for vault /x/secrets.vault.yml: set [vault] password_file, set MINIBOT_VAULT_PASSWORD, \
             or run on a terminal to type it"
        );
    }

    #[test]
    fn a_new_password_is_typed_twice() {
        let vault = Path::new("v");
        let same = Scripted(Mutex::new(vec!["abc", "abc"]));
        assert_eq!(sources(None, None, &same).new_password(vault).unwrap().as_str(), "abc");
        let differ = Scripted(Mutex::new(vec!["abc", "abd"]));
        let err = sources(None, None, &differ).new_password(vault).unwrap_err();
        assert!(matches!(err, VaultError::PasswordMismatch { .. }), "{err}");
        let empty = Scripted(Mutex::new(vec![""]));
        assert!(matches!(sources(None, None, &empty).password(vault), Err(VaultError::EmptyPassword { .. })));
    }

    #[test]
    fn read_line_stops_at_newline_and_strips_cr() {
        assert_eq!(read_line(&b"secret\r\nrest"[..]).unwrap().as_str(), "secret");
        assert_eq!(read_line(&b"no newline"[..]).unwrap().as_str(), "no newline");
    }
}
