//! The vault the wizard puts keys and tokens in: the one `[vault]` of the config names (opened with its usual
//! password sources), or a new one next to the config. A new vault's password is `MINIBOT_VAULT_PASSWORD` when
//! that is set, else one the person types, else a generated one kept in `vault.password` (mode 0600) and named
//! by `[vault] password_file`, so the assistant starts unattended.

use super::ask::Ui;
use super::document::{Document, write_private};
use minibot_config::Config;
use minibot_vault::{NoPrompt, PasswordPrompt, PasswordSources, Secrets, TtyPrompt, Zeroizing};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where a generated password goes, next to the config.
const PASSWORD_FILE: &str = "vault.password";

pub struct Vault {
    pub path: PathBuf,
    password: Zeroizing<String>,
    entries: BTreeMap<String, String>,
    exists: bool,
    changed: bool,
    /// A generated password still to be written to this file.
    new_password_file: Option<PathBuf>,
    /// What `[vault] password_file` should say, when this run chose the file.
    pub password_file_setting: Option<String>,
    /// How the password is kept, for the summary.
    pub password_note: String,
}

impl Vault {
    pub fn open(doc: &Document, base_dir: &Path, ui: &mut Ui) -> anyhow::Result<Self> {
        let resolver = Config::defaults(base_dir);
        let written = setting(doc, "path")?.unwrap_or_else(|| "secrets.vault.yml".into());
        let path = resolver.resolve_path(&written);
        let password_file = setting(doc, "password_file")?.map(|f| (resolver.resolve_path(&f), f));
        let env = std::env::var(minibot_vault::PASSWORD_ENV).ok().filter(|v| !v.is_empty());
        let mut vault = Self {
            path: path.clone(),
            password: Zeroizing::new(String::new()),
            entries: BTreeMap::new(),
            exists: path.exists(),
            changed: false,
            new_password_file: None,
            password_file_setting: None,
            password_note: String::new(),
        };
        if vault.exists {
            let prompt: &dyn PasswordPrompt = if ui.interactive() { &TtyPrompt } else { &NoPrompt };
            let sources = PasswordSources {
                file: password_file.as_ref().map(|(resolved, _)| resolved.clone()),
                file_setting: "[vault] password_file",
                env: env.clone(),
                prompt,
            };
            vault.password = sources.password(&path)?;
            vault.entries = minibot_vault::read(&path, &vault.password)?.to_map();
            vault.password_note = match (&password_file, &env) {
                (Some((resolved, _)), _) => format!("password in {}", resolved.display()),
                (None, Some(_)) => format!("password from {}", minibot_vault::PASSWORD_ENV),
                (None, None) => "password typed at each start".into(),
            };
            return Ok(vault);
        }
        if let Some((resolved, written)) = password_file {
            vault.use_or_make_password_file(resolved, written)?;
        } else if env.is_some() {
            vault.password = Zeroizing::new(env.unwrap_or_default());
            vault.password_note =
                format!("password from {} (set it wherever minibot runs)", minibot_vault::PASSWORD_ENV);
        } else if let Some(typed) = ask_password(ui, &path)? {
            vault.password = typed;
            vault.password_note = format!("password typed at each start, or set {}", minibot_vault::PASSWORD_ENV);
        } else {
            let resolved = base_dir.join(PASSWORD_FILE);
            vault.use_or_make_password_file(resolved, PASSWORD_FILE.into())?;
        }
        Ok(vault)
    }

    fn use_or_make_password_file(&mut self, resolved: PathBuf, written: String) -> anyhow::Result<()> {
        if resolved.exists() {
            let sources =
                PasswordSources { file: Some(resolved.clone()), file_setting: "", env: None, prompt: &NoPrompt };
            self.password = sources.password(&self.path)?;
        } else {
            let mut random = Zeroizing::new([0u8; 24]);
            getrandom::fill(random.as_mut()).map_err(|e| anyhow::anyhow!("no random bytes from the system: {e}"))?;
            self.password = Zeroizing::new(random.iter().map(|b| format!("{b:02x}")).collect());
            self.new_password_file = Some(resolved.clone());
        }
        self.password_note = format!("password in {} (readable by you only)", resolved.display());
        self.password_file_setting = Some(written);
        Ok(())
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.entries.get(name).map(String::as_str)
    }

    pub fn put(&mut self, name: &str, value: &str) {
        if self.get(name) != Some(value) {
            self.entries.insert(name.to_string(), value.to_string());
            self.changed = true;
        }
    }

    pub fn secrets(&self) -> Secrets {
        Secrets::new(self.entries.clone())
    }

    /// Writes the password file (when generated) and the vault (when anything changed).
    pub fn save(&self) -> anyhow::Result<()> {
        if let Some(file) = &self.new_password_file {
            write_private(file, &format!("{}\n", self.password.as_str()))?;
        }
        if self.changed || !self.exists {
            // A typed password writes no file first, so the vault may be the first thing in a new folder.
            if let Some(folder) = self.path.parent() {
                super::document::private_folder(folder)?;
            }
            minibot_vault::write(&self.path, &self.password, &self.secrets())?;
        }
        Ok(())
    }
}

/// `[vault] <key>` as written, `${VAR}` expanded; `None` when not set.
fn setting(doc: &Document, key: &str) -> anyhow::Result<Option<String>> {
    let Some(text) = doc.text(&["vault", key]) else { return Ok(None) };
    let lookup = |name: &str| std::env::var(name).ok();
    let expanded = minibot_config::expand_str(&text, &format!("vault.{key}"), &lookup)
        .map_err(|unset| anyhow::anyhow!("`vault.{key}` in the config uses ${{{}}}, which is not set", unset.var))?;
    Ok(Some(expanded).filter(|v| !v.is_empty()))
}

/// A password for a new vault, typed twice; `None` when the person lets one be generated.
fn ask_password(ui: &mut Ui, vault: &Path) -> anyhow::Result<Option<Zeroizing<String>>> {
    if !ui.interactive() {
        return Ok(None);
    }
    ui.say(&format!("The keys go into an encrypted vault, {}.", vault.display()));
    ui.say(&format!(
        "  Press Enter to have a password generated and kept in {PASSWORD_FILE} next to the config (readable by \
         you only; the assistant starts unattended), or type a password to be asked for at each start."
    ));
    loop {
        let first = ui.secret("Vault password (Enter to generate one)")?;
        if first.is_empty() {
            return Ok(None);
        }
        let again = ui.secret("Repeat the password")?;
        if again.as_str() == first.as_str() {
            return Ok(Some(first));
        }
        ui.say("  The passwords differ; try again.");
    }
}
