//! Step 2: the Telegram bot. The token is checked with `getMe` and kept in the vault; the person's own user id
//! goes into `allowed_user_ids`, since without it the bot answers nobody.

use super::context::Context;
use super::provider::{parse_url, secret_name};
use minibot_vault::Zeroizing;

const DEFAULT_API: &str = "https://api.telegram.org";
const TOKEN_SECRET: &str = "TELEGRAM_BOT_TOKEN";

/// Telegram user ids from a list such as `12345, 67890`.
pub fn parse_user_ids(text: &str) -> Result<Vec<i64>, String> {
    let ids: Result<Vec<i64>, String> = text
        .split([',', ' '])
        .filter(|part| !part.trim().is_empty())
        .map(|part| {
            part.trim().parse::<i64>().ok().filter(|id| *id > 0).ok_or_else(|| {
                format!(
                    "`{}` is not a Telegram user id: it is a number such as 123456789 (message @userinfobot on \
                     Telegram to see yours)",
                    part.trim()
                )
            })
        })
        .collect();
    let ids = ids?;
    if ids.is_empty() {
        return Err("give at least one Telegram user id, or nobody may talk to the bot".into());
    }
    Ok(ids)
}

/// Returns `Ok(false)` when a `--yes` run's check failed (already reported).
pub fn step(cx: &mut Context<'_>) -> anyhow::Result<bool> {
    cx.ui.say("\nStep 2/4: Telegram");
    let args = cx.args;
    let current_token = cx.doc.text(&["channels", "telegram", "bot_token"]);
    let enabled = cx.doc.get(&["channels", "telegram", "enabled"]).and_then(|i| i.as_bool()).unwrap_or(true);
    let current_ids: Vec<i64> = cx
        .doc
        .get(&["channels", "telegram", "allowed_user_ids"])
        .and_then(|i| i.as_array())
        .map(|a| a.iter().filter_map(|v| v.as_integer()).collect())
        .unwrap_or_default();
    let api_base = match &args.telegram_api_base {
        Some(url) => parse_url(url).map_err(|e| anyhow::anyhow!("--telegram-api-base: {e}"))?,
        None => cx.doc.text(&["channels", "telegram", "api_base_url"]).unwrap_or_else(|| DEFAULT_API.into()),
    };
    let flag_token = match (&args.telegram_token, &args.telegram_token_env) {
        (Some(token), _) => Some(Zeroizing::new(token.trim().to_string())),
        (None, Some(var)) => {
            let value = std::env::var(var).map_err(|_| anyhow::anyhow!("--telegram-token-env: {var} is not set"))?;
            Some(Zeroizing::new(value.trim().to_string()))
        }
        (None, None) => None,
    };
    let flag_ids = match args.telegram_user.is_empty() {
        true => None,
        false => {
            Some(parse_user_ids(&args.telegram_user.join(",")).map_err(|e| anyhow::anyhow!("--telegram-user: {e}"))?)
        }
    };

    if args.no_telegram {
        if current_token.is_some() && enabled {
            cx.doc.set(&["channels", "telegram", "enabled"], false)?;
            cx.ui.say("  Telegram turned off (enabled = false; the token stays in the file).");
        } else {
            cx.ui.say("  Skipped (--no-telegram).");
        }
        return Ok(true);
    }

    let token = match flag_token {
        Some(token) => Some(token),
        None if !cx.ui.interactive() => None,
        None => {
            let question = match (&current_token, enabled) {
                (Some(_), true) => "A Telegram bot is set up. Give it a new token?",
                (Some(_), false) => "A Telegram bot is set up but turned off. Give it a new token?",
                (None, _) => "Connect a Telegram bot (make one with @BotFather in Telegram first)?",
            };
            if cx.ui.yes_no(question, false)? { Some(ask_token(cx, &api_base)?) } else { None }
        }
    };
    let Some(token) = token else {
        if current_token.is_none() {
            if flag_ids.is_some() || args.telegram_api_base.is_some() {
                anyhow::bail!("--telegram-user and --telegram-api-base need a bot: add --telegram-token");
            }
            cx.ui.say("  No Telegram bot (the console works without one; run `minibot init` again to add it).");
            return Ok(true);
        }
        if !enabled && flag_ids.is_none() {
            cx.ui.say("  The bot stays off.");
            return Ok(true);
        }
        if !cx.ui.interactive() && flag_ids.is_none() && args.telegram_api_base.is_none() {
            return Ok(true);
        }
        // Keeping the token: only the ids or the server may change.
        return finish(cx, &api_base, None, flag_ids, &current_ids);
    };
    if !cx.ui.interactive() && !args.skip_check {
        match check(cx, &api_base, &token) {
            Ok(name) => cx.ui.say(&format!("  OK: the token belongs to {name}.")),
            Err(why) => {
                cx.ui.say(&format!("  The check of the bot token failed: {why}"));
                cx.ui.say(
                    "Nothing was written. Fix --telegram-token and run again, or add --skip-check to write anyway.",
                );
                return Ok(false);
            }
        }
    }
    finish(cx, &api_base, Some(token), flag_ids, &current_ids)
}

/// Asks for the token until `getMe` accepts it (or the person keeps it unchecked).
fn ask_token(cx: &mut Context<'_>, api_base: &str) -> anyhow::Result<Zeroizing<String>> {
    loop {
        let token = cx.ui.secret("Bot token from @BotFather (hidden; looks like 123456789:AAE…)")?;
        if token.is_empty() {
            cx.ui.say("  The token is empty.");
            continue;
        }
        if cx.args.skip_check {
            return Ok(token);
        }
        cx.ui.say("  Checking the token with getMe …");
        match check(cx, api_base, &token) {
            Ok(name) => {
                cx.ui.say(&format!("  OK: the token belongs to {name}."));
                return Ok(token);
            }
            Err(why) => {
                cx.ui.say(&format!("  The check failed: {why}"));
                if cx.ui.yes_no("Keep this token anyway?", false)? {
                    return Ok(token);
                }
            }
        }
    }
}

fn check(cx: &mut Context<'_>, api_base: &str, token: &str) -> Result<String, String> {
    let probe = crate::checks::telegram::probe(api_base, token);
    let bot = cx.runtime.block_on(probe).map_err(|e| e.to_string())?;
    Ok(bot.username.map_or_else(|| format!("the bot with id {}", bot.id), |name| format!("@{name}")))
}

fn finish(
    cx: &mut Context<'_>,
    api_base: &str,
    token: Option<Zeroizing<String>>,
    flag_ids: Option<Vec<i64>>,
    current_ids: &[i64],
) -> anyhow::Result<bool> {
    let path = |key: &'static str| ["channels", "telegram", key];
    let ids = match flag_ids {
        Some(ids) => ids,
        None if cx.ui.interactive() => {
            let shown = current_ids.iter().map(i64::to_string).collect::<Vec<_>>().join(", ");
            cx.ui.say("  Only the Telegram users you list may talk to the bot. @userinfobot tells you your id.");
            cx.ui.until("Your Telegram user id (several: separate with commas)", Some(&shown), parse_user_ids)?
        }
        None if current_ids.is_empty() => anyhow::bail!(
            "--telegram-user: give your Telegram user id (a number; @userinfobot tells you), or the bot answers \
             nobody"
        ),
        None => current_ids.to_vec(),
    };
    if let Some(token) = token {
        let written = cx.doc.text(&path("bot_token"));
        let name = written.as_deref().and_then(secret_name).unwrap_or_else(|| TOKEN_SECRET.into());
        cx.store_secret(&name, &token);
        cx.doc.set(&path("bot_token"), format!("${{secret:{name}}}"))?;
    }
    cx.doc.set(&path("enabled"), true)?;
    let mut list = toml_edit::Array::new();
    for id in &ids {
        list.push(*id);
    }
    cx.doc.set(&path("allowed_user_ids"), list)?;
    if api_base != DEFAULT_API || cx.doc.text(&path("api_base_url")).is_some() {
        cx.doc.set(&path("api_base_url"), api_base)?;
    }
    Ok(true)
}
