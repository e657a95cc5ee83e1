//! `minibot vault init|edit|list|set|rm [PATH]`. The vault file is PATH, else `[vault] path` of the `--config`
//! file, else `secrets.vault.yml`; the password comes from `--password-file`, `[vault] password_file`,
//! `MINIBOT_VAULT_PASSWORD`, then a prompt on the terminal. Exit codes: 0 done, 2 bad input (arguments, the
//! edited text, no password source), 1 anything else. Every message names the vault file; none shows a value.

use minibot_config::{Config, Unlock};
use minibot_orchestrator::cli::{VaultAction, VaultArgs};
use minibot_vault::{PasswordPrompt, PasswordSources, Secrets, TtyPrompt, VaultError, Zeroizing};
use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

enum Failure {
    /// Exit 2.
    BadInput(String),
    /// Exit 1.
    Other(String),
}

impl From<VaultError> for Failure {
    fn from(error: VaultError) -> Self {
        match error {
            VaultError::NoPassword { .. }
            | VaultError::PasswordMismatch { .. }
            | VaultError::EmptyPassword { .. }
            | VaultError::EmptyPasswordFile { .. } => Self::BadInput(error.to_string()),
            _ => Self::Other(error.to_string()),
        }
    }
}

pub fn run(config: Option<&Path>, args: VaultArgs) -> ExitCode {
    match execute(config, args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::BadInput(message)) => {
            eprintln!("minibot vault: {message}");
            ExitCode::from(2)
        }
        Err(Failure::Other(message)) => {
            eprintln!("minibot vault: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The vault file and where its password comes from.
struct Target {
    path: PathBuf,
    password_file: Option<PathBuf>,
    file_setting: &'static str,
}

impl Target {
    fn resolve(config: Option<&Path>, path: Option<PathBuf>, password_file: Option<PathBuf>) -> Result<Self, Failure> {
        // Only `[vault]` is needed, and the vault may not exist or be switched on yet: leave it closed.
        // Without --config, the config the assistant itself would load (MINIBOT_CONFIG, then ./config.toml, then the platform config file), so
        // both use the same `[vault] path`. A default config that does not load does not block the vault tool.
        let config = match config {
            Some(path) => {
                Some(Config::load_with(Some(path), Unlock::Skip).map_err(|e| Failure::BadInput(e.to_string()))?)
            }
            None => match Config::load_with(None, Unlock::Skip) {
                Ok(config) => config.source.is_some().then_some(config),
                Err(error) => {
                    eprintln!("minibot vault: not reading [vault] from the default config ({error}); pass --config");
                    None
                }
            },
        };
        let path = path
            .or_else(|| config.as_ref().map(Config::vault_file))
            .unwrap_or_else(|| PathBuf::from("secrets.vault.yml"));
        let from_config = config.as_ref().and_then(|c| c.vault_password_file());
        let file_setting =
            if config.is_some() { "--password-file or [vault] password_file" } else { "--password-file" };
        Ok(Self { path, password_file: password_file.or(from_config), file_setting })
    }

    fn sources<'a>(&'a self, prompt: &'a dyn PasswordPrompt) -> PasswordSources<'a> {
        PasswordSources {
            file: self.password_file.clone(),
            file_setting: self.file_setting,
            env: std::env::var(minibot_vault::PASSWORD_ENV).ok(),
            prompt,
        }
    }

    fn open(&self) -> Result<(Zeroizing<String>, Secrets), Failure> {
        let password = self.sources(&TtyPrompt).password(&self.path)?;
        let secrets = minibot_vault::read(&self.path, &password)?;
        Ok((password, secrets))
    }

    fn save(&self, password: &str, entries: std::collections::BTreeMap<String, String>) -> Result<(), Failure> {
        Ok(minibot_vault::write(&self.path, password, &Secrets::new(entries))?)
    }
}

fn execute(config: Option<&Path>, args: VaultArgs) -> Result<(), Failure> {
    let password_file = args.password_file;
    match args.action {
        VaultAction::Init { path } => {
            let target = Target::resolve(config, path, password_file)?;
            init(&target)
        }
        VaultAction::List { path } => {
            let target = Target::resolve(config, path, password_file)?;
            let (_, secrets) = target.open()?;
            let mut out = std::io::stdout().lock();
            for name in secrets.names() {
                writeln!(out, "{name}").map_err(|e| Failure::Other(format!("cannot print: {e}")))?;
            }
            Ok(())
        }
        VaultAction::Set { name, path } => {
            let target = Target::resolve(config, path, password_file)?;
            check_name(&name)?;
            let (password, secrets) = target.open()?;
            let value = read_value(&name)?;
            let mut entries = secrets.to_map();
            entries.insert(name.clone(), value.to_string());
            target.save(&password, entries)?;
            eprintln!("set {name} in {}", target.path.display());
            Ok(())
        }
        VaultAction::Rm { name, path } => {
            let target = Target::resolve(config, path, password_file)?;
            check_name(&name)?;
            let (password, secrets) = target.open()?;
            let mut entries = secrets.to_map();
            if entries.remove(&name).is_none() {
                return Err(Failure::Other(format!("secret {name} is not in the vault {}", target.path.display())));
            }
            target.save(&password, entries)?;
            eprintln!("removed {name} from {}", target.path.display());
            Ok(())
        }
        VaultAction::Generate { name, path, print } => {
            let target = Target::resolve(config, path, password_file)?;
            check_name(&name)?;
            let (password, secrets) = target.open()?;
            let mut entries = secrets.to_map();
            if entries.contains_key(&name) {
                return Err(Failure::BadInput(format!(
                    "secret {name} is already in the vault {}; not overwriting it (a new message key must reach \
                     every worker host at once: `vault rm` it first if that is what you want)",
                    target.path.display()
                )));
            }
            let mut random = Zeroizing::new([0u8; 32]);
            getrandom::fill(random.as_mut())
                .map_err(|e| Failure::Other(format!("no random bytes from the system: {e}")))?;
            let key = Zeroizing::new(minibot_protocol::generate_key_hex(&random));
            entries.insert(name.clone(), key.to_string());
            target.save(&password, entries)?;
            if print {
                println!("{}", key.as_str());
            }
            eprintln!("generated {name} in {} (use it as \"${{secret:{name}}}\")", target.path.display());
            Ok(())
        }
        VaultAction::Edit { path } => {
            let target = Target::resolve(config, path, password_file)?;
            edit(&target)
        }
    }
}

fn init(target: &Target) -> Result<(), Failure> {
    if target.path.symlink_metadata().is_ok() {
        return Err(Failure::BadInput(format!(
            "{} already exists; not overwriting it (use `minibot vault edit` to change it)",
            target.path.display()
        )));
    }
    let password = target.sources(&TtyPrompt).new_password(&target.path)?;
    target.save(&password, Default::default())?;
    eprintln!("created vault {}", target.path.display());
    Ok(())
}

fn check_name(name: &str) -> Result<(), Failure> {
    if minibot_vault::is_valid_name(name) {
        return Ok(());
    }
    Err(Failure::BadInput(format!(
        "invalid secret name `{}`: use letters, digits, `_`, `.` and `-`, starting with a letter or `_`",
        name.escape_debug()
    )))
}

/// The value for `vault set`: all of stdin less one trailing newline, or a line typed without echo.
fn read_value(name: &str) -> Result<Zeroizing<String>, Failure> {
    if std::io::stdin().is_terminal()
        && let Some(value) = TtyPrompt
            .ask(&format!("Value for {name}: "))
            .map_err(|e| Failure::Other(format!("cannot read the value of {name}: {e}")))?
    {
        return Ok(value);
    }
    let mut bytes = Zeroizing::new(Vec::new());
    std::io::stdin()
        .read_to_end(&mut bytes)
        .map_err(|e| Failure::Other(format!("cannot read the value of {name} from stdin: {e}")))?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| Failure::BadInput(format!("the value of {name} on stdin is not UTF-8 text")))?;
    let text = text.strip_suffix('\n').map_or(text, |t| t.strip_suffix('\r').unwrap_or(t));
    Ok(Zeroizing::new(text.to_string()))
}

const EDIT_HEADER: &str = "\
# minibot vault: one `name: value` per line. Values that are empty, padded with spaces, span lines or start
# with one of \"'#- are written JSON-quoted (\"like\\nthis\"). Lines starting with # are ignored.
# Save and quit to encrypt the result; nothing is changed if it does not parse.
";

fn edit(target: &Target) -> Result<(), Failure> {
    let (password, secrets) = target.open()?;
    let mut text = Zeroizing::new(EDIT_HEADER.to_string());
    text.push_str(&minibot_vault::format_plaintext(secrets.iter()));
    let scratch = Scratch::create(&text).map_err(|e| {
        Failure::Other(format!("cannot create a private temp file to edit {}: {e}", target.path.display()))
    })?;
    let editor = ["EDITOR", "VISUAL"]
        .iter()
        .find_map(|var| std::env::var(var).ok().filter(|v| !v.trim().is_empty()))
        .unwrap_or_else(|| "vi".into());
    // Through the shell, as git does, so EDITOR may carry arguments (`code --wait`).
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$@\""))
        .arg("minibot-vault-edit")
        .arg(&scratch.file)
        .status()
        .map_err(|e| Failure::Other(format!("cannot start the editor `{editor}`: {e}")))?;
    if !status.success() {
        return Err(Failure::Other(format!(
            "the editor `{editor}` failed ({status}); {} is unchanged",
            target.path.display()
        )));
    }
    let edited = scratch.read().map_err(|e| {
        Failure::Other(format!("cannot read the edited text: {e}; {} is unchanged", target.path.display()))
    })?;
    drop(scratch);
    let entries = minibot_vault::parse_plaintext(&edited)
        .map_err(|e| Failure::BadInput(format!("the edited text, {e}; {} is unchanged", target.path.display())))?;
    if entries == secrets.to_map() {
        eprintln!("no changes; {} is unchanged", target.path.display());
        return Ok(());
    }
    let count = entries.len();
    target.save(&password, entries)?;
    eprintln!("saved {count} secrets to {}", target.path.display());
    Ok(())
}

/// The plaintext while the editor has it: a 0600 file in a fresh 0700 folder, overwritten with zeros and
/// removed when dropped (also when editing fails).
struct Scratch {
    dir: PathBuf,
    file: PathBuf,
}

impl Scratch {
    fn create(text: &str) -> std::io::Result<Self> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!("minibot-vault-{}-{nanos}", std::process::id()));
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        let scratch = Self { file: dir.join("secrets.yml"), dir };
        let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&scratch.file)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        Ok(scratch)
    }

    fn read(&self) -> std::io::Result<Zeroizing<String>> {
        let bytes = Zeroizing::new(std::fs::read(&self.file)?);
        let text = std::str::from_utf8(&bytes).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        Ok(Zeroizing::new(text.to_string()))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // An editor may have replaced the file (write to new + rename); whatever is there now gets the zeros.
        if let Ok(meta) = std::fs::metadata(&self.file)
            && let Ok(mut file) = std::fs::OpenOptions::new().write(true).open(&self.file)
        {
            let zeros = vec![0u8; usize::try_from(meta.len()).unwrap_or(0)];
            let _ = file.write_all(&zeros).and_then(|()| file.sync_all());
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
