//! The console's slash commands. They are handled here and never reach the model: `/help`, `/new`, `/model`,
//! `/tasks`, `/stop`, `/exit` (`/quit`). A line whose first word looks like a command but is none gets a hint;
//! a line such as `/etc/hosts is missing` is no command and goes to the model.

use crate::runtime::{Runtime, SessionModel};
use minibot_agent::ModelSettings;
use minibot_store::TaskRecord;

pub const HELP: &str = "Commands:
  /help          this list
  /new           start a new conversation (the old one stays in the history database)
  /model         show the model; /model NAME switches this chat to NAME until you quit
  /tasks         background tasks that have not finished, with their progress
  /stop          stop the answer being worked on (also Ctrl-C)
  /exit          quit after the answers still coming (also /quit, Ctrl-D)
Any other line is a message to the assistant.";

const NAMES: &str = "/help /new /model /tasks /stop /exit";

/// What a typed line means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Help,
    New,
    /// `/model` (`None`) or `/model NAME…`.
    Model(Option<String>),
    Tasks,
    Stop,
    Exit,
    Unknown(String),
}

/// The command a line is, or `None` for a message (or an empty line).
pub fn parse(line: &str) -> Option<Command> {
    let line = line.trim();
    let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let name = word.strip_prefix('/')?;
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        return None;
    }
    let rest = rest.trim();
    Some(match name {
        "help" | "?" => Command::Help,
        "new" => Command::New,
        "model" => Command::Model((!rest.is_empty()).then(|| rest.to_string())),
        "tasks" => Command::Tasks,
        "stop" => Command::Stop,
        "exit" | "quit" => Command::Exit,
        _ => Command::Unknown(word.to_string()),
    })
}

pub fn unknown(word: &str) -> String {
    format!("Unknown command {word}. Commands: {NAMES} (/help explains them).")
}

/// One model this config can switch to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelOption {
    pub provider: String,
    pub model: String,
}

/// Every provider the config names that this build can call with a key (`[llm]` first, then each
/// `[providers.<name>]`), with its listed `models`; `[llm] model` for the main provider and for a provider that
/// lists none.
pub fn model_options(rt: &Runtime) -> Vec<ModelOption> {
    let config = &rt.config;
    let mut options = Vec::new();
    for choice in config.available_providers() {
        let mut models = choice.models.clone();
        if choice.name == config.llm.provider || models.is_empty() {
            models.insert(0, config.llm.model.clone());
        }
        models.dedup();
        for model in models {
            let option = ModelOption { provider: choice.name.clone(), model };
            if !options.contains(&option) {
                options.push(option);
            }
        }
    }
    options
}

/// The model `name` picks: `PROVIDER MODEL`, a model some provider lists, or a provider (its first model).
pub fn pick(rt: &Runtime, name: &str) -> Result<ModelOption, String> {
    let options = model_options(rt);
    if let Some((provider, model)) = name.split_once(char::is_whitespace) {
        let (provider, model) = (provider.trim(), model.trim());
        if options.iter().any(|o| o.provider == provider) {
            return Ok(ModelOption { provider: provider.into(), model: model.into() });
        }
        return Err(not_a_choice(provider, &options));
    }
    options
        .iter()
        .find(|o| o.model == name)
        .or_else(|| options.iter().find(|o| o.provider == name))
        .cloned()
        .ok_or_else(|| not_a_choice(name, &options))
}

fn not_a_choice(name: &str, options: &[ModelOption]) -> String {
    let list: Vec<String> = options.iter().map(|o| format!("{} ({})", o.model, o.provider)).collect();
    format!(
        "`{name}` is not a configured model or provider. Choose one of: {}. Or /model PROVIDER MODEL.",
        list.join(", ")
    )
}

/// A client for `option`, with the `[llm]` settings (temperature, tokens, effort) the config gives it.
pub fn session_model(rt: &Runtime, option: &ModelOption) -> Result<SessionModel, String> {
    let endpoint = rt.config.llm_for(Some(&option.provider), Some(&option.model), None)?;
    let provider = minibot_llm::provider_for(&endpoint).map_err(|e| format!("provider {}: {e}", option.provider))?;
    Ok(SessionModel {
        provider_name: option.provider.clone(),
        provider,
        settings: ModelSettings {
            model: endpoint.model.clone(),
            temperature: endpoint.temperature,
            max_tokens: endpoint.max_new_tokens,
            reasoning_effort: endpoint.reasoning_effort.clone(),
        },
    })
}

/// `/model` without a name: the model now and the choices.
pub fn describe_models(rt: &Runtime, current: &SessionModel) -> String {
    let mut text = format!("Model: {} (provider {})", current.settings.model, current.provider_name);
    let others: Vec<String> = model_options(rt)
        .into_iter()
        .filter(|o| !(o.model == current.settings.model && o.provider == current.provider_name))
        .map(|o| format!("{} ({})", o.model, o.provider))
        .collect();
    if !others.is_empty() {
        text.push_str(&format!("\nSwitch with /model NAME: {}", others.join(", ")));
    }
    text
}

/// `/tasks`: one line per task that has not ended.
pub fn describe_tasks(tasks: &[TaskRecord]) -> String {
    if tasks.is_empty() {
        return "No background tasks are running.".into();
    }
    let mut text = format!("Background tasks ({}):", tasks.len());
    for task in tasks {
        let short: String = task.id.chars().take(8).collect();
        let agent = task.agent_name.as_deref().unwrap_or("worker");
        let step = task.progress.get("step").and_then(|s| s.as_u64());
        let tools: Vec<&str> = task
            .progress
            .get("tool_names")
            .and_then(|t| t.as_array())
            .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        let mut progress = task.status.to_string();
        if let Some(step) = step {
            progress.push_str(&format!(", step {step}"));
        }
        if !tools.is_empty() {
            progress.push_str(&format!(", running {}", tools.join(", ")));
        }
        let prompt: String = task.prompt.split_whitespace().collect::<Vec<_>>().join(" ");
        let prompt = match prompt.char_indices().nth(60) {
            Some((cut, _)) => format!("{}…", &prompt[..cut]),
            None => prompt,
        };
        text.push_str(&format!("\n  {short} ({agent}) {progress}: {prompt}"));
    }
    text
}

#[cfg(test)]
mod tests {
    use crate::channels::console::commands::{Command, parse};

    #[test]
    fn lines_are_commands_only_when_their_first_word_is_one() {
        assert_eq!(parse("/help"), Some(Command::Help));
        assert_eq!(parse("  /model  "), Some(Command::Model(None)));
        assert_eq!(parse("/model openai gpt-4o"), Some(Command::Model(Some("openai gpt-4o".into()))));
        assert_eq!(parse("/quit"), Some(Command::Exit));
        assert_eq!(parse("/frobnicate now"), Some(Command::Unknown("/frobnicate".into())));
        assert_eq!(parse("/etc/hosts is missing"), None, "a path is a message");
        assert_eq!(parse("hello /new"), None);
        assert_eq!(parse("/"), None);
    }
}
