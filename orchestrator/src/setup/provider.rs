//! Step 1: the model provider, the model and the API key, checked with one real request before anything is
//! written. The key goes into the vault; the config only names it (`api_key = "${secret:NAME}"`).

use super::args::{InitArgs, ProviderKind};
use super::ask::Ui;
use super::context::Context;
use super::document::Document;
use minibot_config::is_loopback_url;
use minibot_vault::Zeroizing;

impl ProviderKind {
    // New kinds go last: the menu numbers of the others stay what scripts and habits know.
    const ALL: [Self; 6] = [Self::Openai, Self::Openrouter, Self::Local, Self::Compatible, Self::Claude, Self::Google];

    /// The `[providers.<name>]` section, which `[llm] provider` names.
    pub fn section(self) -> &'static str {
        match self {
            Self::Openai => "openai",
            Self::Openrouter => "openrouter",
            Self::Claude => "claude",
            Self::Google => "google",
            Self::Local => "local",
            Self::Compatible => "compatible",
        }
    }

    /// As `--provider` spells it.
    fn flag_name(self) -> &'static str {
        match self {
            Self::Openai => "openai",
            Self::Openrouter => "openrouter",
            Self::Claude => "claude",
            Self::Google => "google",
            Self::Local => "local",
            Self::Compatible => "openai-compatible",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::Openai => "OpenAI",
            Self::Openrouter => "OpenRouter (many vendors' models behind one key)",
            Self::Claude => "Anthropic (Claude)",
            Self::Google => "Google (Gemini)",
            Self::Local => "Ollama or another server on this machine (LM Studio, llama.cpp, vLLM): no key",
            Self::Compatible => "Another OpenAI-compatible server (any base URL)",
        }
    }

    /// Sections not named after an API format must say which one they speak.
    fn api_format(self) -> Option<&'static str> {
        matches!(self, Self::Local | Self::Compatible).then_some("openai")
    }

    /// The base URL to suggest; OpenAI's and OpenRouter's are built in and not written.
    fn suggested_url(self) -> Option<&'static str> {
        match self {
            Self::Local => Some("http://127.0.0.1:11434/v1"),
            _ => None,
        }
    }

    fn builtin_url(self) -> Option<&'static str> {
        match self {
            Self::Openai => Some("https://api.openai.com/v1"),
            Self::Openrouter => Some("https://openrouter.ai/api/v1"),
            Self::Claude => Some("https://api.anthropic.com/v1"),
            Self::Google => Some("https://generativelanguage.googleapis.com/v1beta"),
            _ => None,
        }
    }

    fn suggested_model(self) -> Option<&'static str> {
        match self {
            Self::Openai => Some("gpt-4o-mini"),
            Self::Openrouter => Some("openai/gpt-4o-mini"),
            Self::Claude => Some("claude-sonnet-4-5"),
            Self::Google => Some("gemini-2.5-flash"),
            Self::Local => Some("llama3.2"),
            Self::Compatible => None,
        }
    }

    fn key_hint(self) -> &'static str {
        match self {
            Self::Openai => " (https://platform.openai.com/api-keys)",
            Self::Openrouter => " (https://openrouter.ai/keys)",
            Self::Claude => " (https://console.anthropic.com/settings/keys)",
            Self::Google => " (https://aistudio.google.com/apikey)",
            _ => "",
        }
    }

    /// What an existing config's provider is, as far as the wizard can tell.
    fn of(name: &str, base_url: Option<&str>) -> Self {
        match name {
            "openrouter" => Self::Openrouter,
            "claude" | "anthropic" => Self::Claude,
            "google" | "gemini" => Self::Google,
            "local" | "ollama" => Self::Local,
            "compatible" => Self::Compatible,
            "openai" if base_url.is_none() => Self::Openai,
            _ if base_url.is_some_and(is_loopback_url) => Self::Local,
            "openai" => Self::Compatible,
            _ => Self::Compatible,
        }
    }
}

/// The key to write.
enum Key {
    /// Leave `api_key` as the file has it.
    Keep,
    /// None at all (a server on this machine).
    Nothing,
    New(Zeroizing<String>),
}

/// The answers of this step.
struct Plan {
    kind: ProviderKind,
    /// `[llm] provider`, the section name.
    name: String,
    /// `None`: the provider's built-in address.
    base_url: Option<String>,
    model: String,
    key: Key,
}

/// What the file says now about the provider it uses.
struct Current {
    name: String,
    kind: ProviderKind,
    /// The table that holds its key and URL: `providers.<name>`, or `llm` in a file written that way.
    table: Vec<String>,
    base_url: Option<String>,
    model: Option<String>,
    api_key: Option<String>,
}

impl Current {
    fn read(doc: &Document) -> Option<Self> {
        let name = doc.text(&["llm", "provider"]);
        let written = name.is_some() || doc.has_table(&["llm"]) || doc.has_table(&["providers"]);
        if !written {
            return None;
        }
        let name = name.unwrap_or_else(|| "openai".into());
        let table = table_for(doc, &name);
        let at = |key: &str| {
            let mut path: Vec<&str> = table.iter().map(String::as_str).collect();
            path.push(key);
            doc.text(&path)
        };
        let base_url = at("base_url");
        Some(Self {
            kind: ProviderKind::of(&name, base_url.as_deref()),
            model: doc.text(&["llm", "model"]),
            api_key: at("api_key"),
            base_url,
            table,
            name,
        })
    }
}

/// Where a provider's key and URL live: its `[providers.<name>]` section, unless the file keeps them in `[llm]`
/// (as hand-written files often do) and has no such section.
fn table_for(doc: &Document, name: &str) -> Vec<String> {
    let in_llm = doc.text(&["llm", "api_key"]).is_some() || doc.text(&["llm", "base_url"]).is_some();
    let llm_names_it = doc.text(&["llm", "provider"]).unwrap_or_else(|| "openai".into()) == name;
    if !doc.has_table(&["providers", name]) && in_llm && llm_names_it {
        vec!["llm".into()]
    } else {
        vec!["providers".into(), name.into()]
    }
}

pub fn parse_url(text: &str) -> Result<String, String> {
    let text = text.trim().trim_end_matches('/');
    let rest = text.strip_prefix("http://").or_else(|| text.strip_prefix("https://"));
    match rest {
        Some(rest) if !rest.is_empty() && !rest.contains(char::is_whitespace) => Ok(text.to_string()),
        _ => Err(format!("`{text}` is not an http:// or https:// URL such as http://127.0.0.1:11434/v1")),
    }
}

pub fn parse_model(text: &str) -> Result<String, String> {
    let text = text.trim();
    if text.is_empty() || text.contains(char::is_whitespace) {
        return Err("a model name is one word, such as gpt-4o-mini or llama3.2".into());
    }
    Ok(text.to_string())
}

/// The key named by `--api-key-env` or piped with `--api-key-stdin`, if either is given.
fn key_from_flags(args: &InitArgs) -> anyhow::Result<Option<Zeroizing<String>>> {
    if let Some(var) = &args.api_key_env {
        let value = std::env::var(var).map_err(|_| anyhow::anyhow!("--api-key-env: {var} is not set"))?;
        let value = value.trim();
        anyhow::ensure!(!value.is_empty(), "--api-key-env: {var} is empty");
        return Ok(Some(Zeroizing::new(value.to_string())));
    }
    if args.api_key_stdin {
        let mut text = Zeroizing::new(String::new());
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
            .map_err(|e| anyhow::anyhow!("--api-key-stdin: cannot read stdin: {e}"))?;
        let key = text.trim();
        anyhow::ensure!(!key.is_empty(), "--api-key-stdin: stdin was empty");
        return Ok(Some(Zeroizing::new(key.to_string())));
    }
    Ok(None)
}

/// Runs the step and writes its answers into the document (the vault gets the key). Returns `Ok(false)` when a
/// `--yes` run's check failed (already reported).
pub fn step(cx: &mut Context<'_>) -> anyhow::Result<bool> {
    cx.ui.say("\nStep 1/4: the model");
    let current = Current::read(&cx.doc);
    let flag_key = key_from_flags(cx.args)?;
    let mut plan = first_answers(cx, current.as_ref(), flag_key, true)?;
    // Each attempt starts from the file as it was, so answers given up on leave nothing behind.
    let before = cx.snapshot();
    loop {
        cx.restore(&before);
        apply(cx, &plan, current.as_ref())?;
        if cx.args.skip_check {
            cx.ui.say("  Not checked (--skip-check).");
            return Ok(true);
        }
        let url = plan.base_url.clone().or(plan.kind.builtin_url().map(String::from)).unwrap_or_default();
        cx.ui.say(&format!("  Checking {} at {url} …", plan.model));
        match check(cx) {
            Ok(name) => {
                cx.ui.say(&format!("  OK: the provider knows the model as {name}."));
                return Ok(true);
            }
            Err(why) => {
                cx.ui.say(&format!("  The check failed: {why}"));
                if !cx.ui.interactive() {
                    cx.ui.say("Nothing was written. Fix the flags and run again, or add --skip-check to write anyway.");
                    return Ok(false);
                }
            }
        }
        let choice = cx.ui.pick(
            "What now?",
            &[
                ("key", "Type the API key again", 'k'),
                ("model", "Choose another model", 'm'),
                ("url", "Change the base URL", 'u'),
                ("provider", "Choose another provider", 'p'),
                ("retry", "Try again as it is", 'r'),
                ("skip", "Keep these answers without a check", 's'),
            ],
            0,
        )?;
        match choice {
            'k' => plan.key = ask_key(&mut cx.ui, plan.kind, plan.base_url.as_deref(), false)?,
            'm' => plan.model = cx.ui.until("Model", Some(&plan.model), parse_model)?,
            'u' => {
                let shown = plan.base_url.clone().or(plan.kind.builtin_url().map(String::from));
                plan.base_url = Some(cx.ui.until("Base URL", shown.as_deref(), parse_url)?);
            }
            'p' => plan = first_answers(cx, None, None, false)?,
            's' => return Ok(true),
            _ => {}
        }
    }
}

/// The answers before any check: from the flags (unless `use_flags` is false: the person asked to choose again),
/// then the questions (or, with `--yes`, the file and defaults).
fn first_answers(
    cx: &mut Context<'_>,
    current: Option<&Current>,
    flag_key: Option<Zeroizing<String>>,
    use_flags: bool,
) -> anyhow::Result<Plan> {
    let unset = InitArgs::default();
    let args = if use_flags { cx.args } else { &unset };
    let current_kind = current.map(|c| c.kind);
    let kind = match (args.provider, cx.ui.interactive()) {
        (Some(kind), _) => kind,
        (None, false) => current_kind.unwrap_or(ProviderKind::Openai),
        (None, true) => {
            let options: Vec<(&str, &str, ProviderKind)> =
                ProviderKind::ALL.iter().map(|k| (k.flag_name(), k.label(), *k)).collect();
            let default = ProviderKind::ALL.iter().position(|k| Some(*k) == current_kind).unwrap_or(0);
            cx.ui.pick("Provider", &options, default)?
        }
    };
    // What the file says applies only while the provider stays the same.
    let same = current.filter(|c| c.kind == kind);
    let name = same.map_or_else(|| kind.section().to_string(), |c| c.name.clone());
    let base_url = match &args.base_url {
        Some(url) => Some(parse_url(url).map_err(|e| anyhow::anyhow!("--base-url: {e}"))?),
        None => {
            let known = same.and_then(|c| c.base_url.clone()).or(kind.suggested_url().map(String::from));
            match (kind, cx.ui.interactive()) {
                (ProviderKind::Local | ProviderKind::Compatible, true) => {
                    Some(cx.ui.until("Base URL of its OpenAI-style API", known.as_deref(), parse_url)?)
                }
                (ProviderKind::Compatible, false) if known.is_none() => {
                    anyhow::bail!("--base-url: an openai-compatible provider needs the server's base URL")
                }
                _ => known,
            }
        }
    };
    let model = match &args.model {
        Some(model) => parse_model(model).map_err(|e| anyhow::anyhow!("--model: {e}"))?,
        None => {
            let known = same.and_then(|c| c.model.clone()).or(kind.suggested_model().map(String::from));
            if cx.ui.interactive() {
                cx.ui.until("Model", known.as_deref(), parse_model)?
            } else {
                known.ok_or_else(|| anyhow::anyhow!("--model: an openai-compatible provider needs a model name"))?
            }
        }
    };
    let has_key = same.is_some_and(|c| c.api_key.is_some());
    let key = match flag_key {
        Some(key) => Key::New(key),
        None if cx.ui.interactive() => ask_key(&mut cx.ui, kind, base_url.as_deref(), has_key)?,
        None if has_key => Key::Keep,
        None if base_url.as_deref().is_some_and(is_loopback_url) => Key::Nothing,
        None => {
            anyhow::bail!("--api-key-env VAR or --api-key-stdin: the {} provider needs an API key", kind.flag_name())
        }
    };
    Ok(Plan { kind, name, base_url, model, key })
}

fn ask_key(ui: &mut Ui, kind: ProviderKind, base_url: Option<&str>, has_key: bool) -> anyhow::Result<Key> {
    let local = base_url.is_some_and(is_loopback_url);
    loop {
        let question = match (has_key, local) {
            (true, _) => format!("API key{} (hidden; Enter keeps the current one)", kind.key_hint()),
            (false, true) => "API key (hidden; Enter for none: a server on this machine needs none)".to_string(),
            (false, false) => format!("API key{} (hidden)", kind.key_hint()),
        };
        let key = ui.secret(&question)?;
        match (key.is_empty(), has_key, local) {
            (false, _, _) => return Ok(Key::New(key)),
            (true, true, _) => return Ok(Key::Keep),
            (true, false, true) => return Ok(Key::Nothing),
            (true, false, false) => {
                ui.say("  This server is not on this machine, so it needs a key (type any word if it takes none).")
            }
        }
    }
}

/// Writes the plan into the document, the key into the vault.
fn apply(cx: &mut Context<'_>, plan: &Plan, current: Option<&Current>) -> anyhow::Result<()> {
    let table =
        current.filter(|c| c.name == plan.name).map_or_else(|| table_for(&cx.doc, &plan.name), |c| c.table.clone());
    let at = |key: &'static str| -> Vec<&str> {
        let mut path: Vec<&str> = table.iter().map(String::as_str).collect();
        path.push(key);
        path
    };
    cx.doc.set_unless_default(&["llm", "provider"], plan.name.as_str(), "openai")?;
    cx.doc.set(&["llm", "model"], plan.model.as_str())?;
    if table.len() > 1 {
        cx.doc.table(&table.iter().map(String::as_str).collect::<Vec<_>>())?;
        if let Some(format) = plan.kind.api_format() {
            cx.doc.set(&at("api_format"), format)?;
        }
    }
    match &plan.base_url {
        Some(url) if Some(url.as_str()) != plan.kind.builtin_url() => {
            cx.doc.set(&at("base_url"), url.as_str())?;
        }
        _ => {
            cx.doc.remove(&at("base_url"));
        }
    }
    match &plan.key {
        Key::Keep => {
            // The run changes only what it is told, but a key in the file itself is read by editors, backups
            // and `git add`: say how to move it (red-team report, #22 F8).
            let written = cx.doc.text(&at("api_key")).filter(|text| !text.contains("${"));
            if written.is_some_and(|text| minibot_config::is_credential(&text)) {
                cx.ui.say(
                    "Note: the API key is written in the file itself. Give it again (the key question, or \
                     --api-key-env VAR) to move it into the vault.",
                );
            }
        }
        Key::Nothing => {
            cx.doc.remove(&at("api_key"));
        }
        Key::New(key) => {
            let written = cx.doc.text(&at("api_key"));
            let name = written
                .as_deref()
                .and_then(secret_name)
                .unwrap_or_else(|| format!("{}_API_KEY", plan.name.to_ascii_uppercase().replace('-', "_")));
            cx.store_secret(&name, key);
            cx.doc.set(&at("api_key"), format!("${{secret:{name}}}"))?;
        }
    }
    Ok(())
}

/// `NAME` of a value that is exactly `${secret:NAME}`.
pub fn secret_name(value: &str) -> Option<String> {
    let name = value.strip_prefix("${secret:")?.strip_suffix('}')?;
    minibot_vault::is_valid_name(name).then(|| name.to_string())
}

/// The provider as the document now describes it, asked with one real request.
fn check(cx: &mut Context<'_>) -> Result<String, String> {
    let config = cx.candidate().map_err(|e| format!("{e:#}"))?;
    let endpoint = config.main_llm();
    let probe = crate::checks::provider::probe(&endpoint);
    cx.runtime.block_on(probe).map_err(|e| e.to_string())
}
