//! `minibot init`: writes a config file step by step, or edits the one there is. Four steps (the model, Telegram,
//! background tasks, MCP servers) ask on the terminal, or take their answers from flags with `--yes`. The key and
//! the bot token are checked with one real request each before anything is written, and go into the encrypted
//! vault; the config names them as `${secret:NAME}`. An existing file is edited in place: comments, order and
//! every key the wizard does not set stay as they were.

mod agents;
mod args;
mod ask;
mod context;
mod document;
mod mcp;
mod provider;
mod target;
mod tasks;
mod telegram;
mod vault;

use ask::Ui;
use context::Context;
use document::{Document, write_private};
use minibot_config::{Config, Unlock};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use args::InitArgs;

/// Runs the wizard; returns the exit code: 0 written, 1 a check failed in a `--yes` run (nothing written).
pub fn run(config: Option<&Path>, args: InitArgs) -> anyhow::Result<i32> {
    check_flags(&args)?;
    let target = target::resolve(config)?;
    let base_dir = target.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let doc = Document::load(&target)?;
    let ui = if args.yes { Ui::Batch } else { Ui::terminal()? };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    minibot_llm::install_crypto_provider();
    let mut cx = Context { args: &args, ui, doc, target, base_dir, runtime, pending: BTreeMap::new(), vault: None };
    let intro = if cx.doc.existed {
        format!("minibot init: changing {} (your comments and other keys stay as they are)", cx.target.display())
    } else {
        format!("minibot init: writing a new config, {}", cx.target.display())
    };
    cx.ui.say(&intro);
    if cx.ui.interactive() {
        cx.ui.say("Enter takes the answer in [brackets]; Ctrl-D stops without writing anything.");
    }
    if !provider::step(&mut cx)? || !telegram::step(&mut cx)? {
        return Ok(1);
    }
    tasks::step(&mut cx)?;
    mcp::step(&mut cx)?;
    finish(&mut cx)?;
    Ok(0)
}

/// Every flag's value, checked before any question: a typo is named at once, not after the questions.
fn check_flags(args: &InitArgs) -> anyhow::Result<()> {
    let named = |flag: &str, result: Result<(), String>| result.map_err(|e| anyhow::anyhow!("{flag}: {e}"));
    if let Some(url) = &args.base_url {
        named("--base-url", provider::parse_url(url).map(drop))?;
    }
    if let Some(model) = &args.model {
        named("--model", provider::parse_model(model).map(drop))?;
    }
    if let Some(url) = &args.telegram_api_base {
        named("--telegram-api-base", provider::parse_url(url).map(drop))?;
    }
    if !args.telegram_user.is_empty() {
        named("--telegram-user", telegram::parse_user_ids(&args.telegram_user.join(",")).map(drop))?;
    }
    if let Some(workers) = &args.workers {
        named("--workers", tasks::parse_workers(workers).map(drop))?;
    }
    if let Some(url) = &args.broker_url {
        named("--broker-url", tasks::parse_broker(url).map(drop))?;
    }
    for server in &args.mcp {
        named("--mcp", mcp::parse_flag(server).map(drop))?;
    }
    Ok(())
}

/// Checks that the result loads, then writes the vault and the config.
fn finish(cx: &mut Context<'_>) -> anyhow::Result<()> {
    cx.ui.say("");
    let text = cx.final_text()?;
    if cx.doc.existed && std::fs::read_to_string(&cx.target).is_ok_and(|old| old == text) && cx.pending.is_empty() {
        cx.ui.say(&format!("Nothing to change in {}.", cx.target.display()));
        return Ok(());
    }
    if !cx.pending.is_empty() {
        // A new vault's password is asked now, before the last question.
        cx.vault()?;
    }
    if cx.ui.interactive() && !cx.ui.yes_no(&format!("Write {}?", cx.target.display()), true)? {
        cx.ui.say("Nothing was written.");
        return Ok(());
    }
    let mut doc = Document { doc: text.parse()?, existed: cx.doc.existed };
    let mut vault_note = None;
    if !cx.pending.is_empty() {
        let pending = std::mem::take(&mut cx.pending);
        let vault = cx.vault()?;
        for (name, value) in &pending {
            vault.put(name, value);
        }
        if let Some(file) = vault.password_file_setting.clone() {
            doc.set(&["vault", "password_file"], file)?;
        }
        vault_note = Some(format!("{}, {}", vault.path.display(), vault.password_note));
        cx.pending = pending;
    }
    let text = doc.text_of();
    let secrets = cx.secrets_for(&text)?;
    let lookup = |name: &str| std::env::var(name).ok();
    let origin = cx.target.display().to_string();
    let config = Config::from_toml_with(&text, &origin, &cx.base_dir, &lookup, Unlock::Given(secrets))
        .map_err(|e| anyhow::anyhow!("the config would not load, so nothing was written: {e}"))?;
    if let Some(vault) = &cx.vault {
        vault.save()?;
    }
    write_private(&cx.target, &text)?;
    let flag = if target::resolve(None).ok().as_deref() == Some(cx.target.as_path()) {
        String::new()
    } else {
        format!(" --config {}", cx.target.display())
    };
    let mut summary = format!("Wrote {} (readable by you only).\n", cx.target.display());
    if let Some(note) = vault_note {
        summary.push_str(&format!("Secrets are in the vault {note}.\n"));
    }
    // Only with a new file: an edited config keeps the specialists it has (or chose not to have).
    let specialists: std::path::PathBuf = config.resolve_path(&config.orchestration.directory).components().collect();
    let added = if cx.doc.existed { Vec::new() } else { agents::install_bundled(&specialists)? };
    // The user just wrote this file (and its specialists) with the wizard: a later run that finds it in its folder may use it.
    if let Some(dirs) = minibot_config::PlatformDirs::current()
        && let Err(error) = minibot_config::trust::record(&dirs, &cx.target, &config)
    {
        cx.ui.say(&format!("(could not record {} as trusted: {error})", cx.target.display()));
    }
    if !added.is_empty() {
        summary.push_str(&format!(
            "Added the bundled specialists ({}) to {}.\n",
            added.join(", "),
            specialists.display()
        ));
    }
    summary.push_str(&format!(
        "Next:\n  minibot{flag} console    chat in this terminal\n  minibot{flag} doctor     check the whole setup\n"
    ));
    // The daemon serves Telegram only: without a bot it would stop at once.
    if config.channels.telegram.enabled && !config.channels.telegram.bot_token.trim().is_empty() {
        summary.push_str(&format!("  minibot{flag}            run the assistant (Telegram)\n"));
    }
    match &mut cx.ui {
        Ui::Terminal(_) => cx.ui.say(summary.trim_end()),
        Ui::Batch => print!("{}", crate::terminal_text::for_terminal(&summary)),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn references_are_found_in_values_only() {
        let text = "# \"${secret:NAME}\" in a comment\na = \"${secret:ONE}\"\n[t]\nb = [\"x ${secret:TWO} y\"]\n\
                    c = \"${OTHER}\"";
        assert_eq!(super::context::references(text), ["ONE", "TWO"]);
    }
}
