//! The flags of `minibot init`, and the choices two of them take.

use clap::{Args, ValueEnum};

/// `minibot init [FLAGS]`. Every flag answers one question; with `--yes` the rest keep what the file says, or
/// the defaults.
#[derive(Debug, Default, Args)]
pub struct InitArgs {
    /// Ask nothing: answers come from the flags, then the existing file, then the defaults.
    #[arg(long, short)]
    pub yes: bool,
    /// Write without checking the key, the model and the bot token over the network.
    #[arg(long)]
    pub skip_check: bool,
    /// The model provider.
    #[arg(long, value_enum, value_name = "KIND")]
    pub provider: Option<ProviderKind>,
    /// The provider's OpenAI-style API address (for local and openai-compatible servers).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// The main agent's model, as the provider names it.
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// Read the API key from this environment variable (it is stored in the vault, not in the config).
    #[arg(long, value_name = "VAR", conflicts_with = "api_key_stdin")]
    pub api_key_env: Option<String>,
    /// Read the API key from stdin.
    #[arg(long)]
    pub api_key_stdin: bool,
    /// The Telegram bot token from @BotFather (stored in the vault). Visible to other users in the process
    /// list: prefer --telegram-token-env on a shared machine.
    #[arg(long, value_name = "TOKEN", conflicts_with = "telegram_token_env")]
    pub telegram_token: Option<String>,
    /// Read the Telegram bot token from this environment variable.
    #[arg(long, value_name = "VAR")]
    pub telegram_token_env: Option<String>,
    /// A Telegram user id allowed to talk to the bot (yours: @userinfobot tells you). Repeatable, or
    /// comma-separated; replaces the list in the file.
    #[arg(long, value_name = "ID")]
    pub telegram_user: Vec<String>,
    /// The Bot API server (default https://api.telegram.org; a self-hosted telegram-bot-api works too).
    #[arg(long, value_name = "URL")]
    pub telegram_api_base: Option<String>,
    /// No Telegram bot (turns an existing one off).
    #[arg(long, conflicts_with_all = ["telegram_token", "telegram_token_env", "telegram_user"])]
    pub no_telegram: bool,
    /// Where background tasks run.
    #[arg(long, value_enum, value_name = "BACKEND")]
    pub tasks_backend: Option<Backend>,
    /// How many tasks run at once: worker processes minibot starts (sqlite backend; 0 to 32).
    #[arg(long, value_name = "N")]
    pub workers: Option<String>,
    /// The RabbitMQ broker (rabbitmq backend), such as amqp://user:password@host:5672/.
    #[arg(long, value_name = "URL")]
    pub broker_url: Option<String>,
    /// An MCP server: NAME=COMMAND ARGS… (split at spaces) or NAME=URL. Repeatable; replaces a server of the
    /// same name.
    #[arg(long, value_name = "NAME=COMMAND|URL")]
    pub mcp: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProviderKind {
    /// api.openai.com
    Openai,
    /// openrouter.ai: many vendors' models behind one key
    Openrouter,
    /// Anthropic's Claude (api.anthropic.com)
    #[value(alias = "anthropic")]
    Claude,
    /// Google's Gemini (generativelanguage.googleapis.com)
    #[value(alias = "gemini")]
    Google,
    /// Ollama, LM Studio, llama.cpp or vLLM on this machine (no key)
    #[value(alias = "ollama")]
    Local,
    /// Any other server that speaks OpenAI's chat completions API (give --base-url)
    #[value(name = "openai-compatible", alias = "compatible")]
    Compatible,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// Worker processes on this machine, tasks in a SQLite file
    Sqlite,
    /// minibot-worker processes on any host, through a RabbitMQ broker
    Rabbitmq,
}
