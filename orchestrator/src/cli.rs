use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// minibot: a personal AI assistant you run yourself, in the terminal or on Telegram.
///
/// It answers with the model you choose (OpenAI, Anthropic, Gemini, OpenRouter, or a local server such as Ollama) and uses tools
/// when the model asks: files, grep, bash and Python in a sandbox, HTTP and MCP servers. It remembers each chat,
/// and long jobs go to specialist agents in worker processes. Start with `minibot init`, which asks for a
/// provider and a key and writes the config file.
#[derive(Debug, Parser)]
#[command(name = "minibot", version, after_help = EXAMPLES, help_template = HELP)]
pub struct Cli {
    /// Config file (default: $MINIBOT_CONFIG, then ./config.toml once trusted with `minibot trust`, then
    /// ~/.config/minibot/config.toml; no file means defaults, with data and logs in ~/.local/share/minibot).
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Also write logs to stderr.
    #[arg(long, short, global = true)]
    pub verbose: bool,
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// `minibot --help`: what it does, examples, then the commands and options.
const HELP: &str = "{about}{after-help}\n\n{usage-heading} {usage}\n\n{all-args}";

/// The examples of `minibot --help`, right below what it does.
const EXAMPLES: &str = "\
Examples:
  minibot init                       write a config file step by step (provider, key, Telegram)
  minibot console                    chat in the terminal
  minibot console --once \"hi\"        ask one question, print the answer, exit
  minibot                            run the Telegram bot until Ctrl+C
  minibot doctor                     check the config, the provider and Telegram
  minibot --config ~/bot/config.toml console

Without --config, the config file is $MINIBOT_CONFIG, else ./config.toml (once you trusted it with `minibot
trust`), else ~/.config/minibot/config.toml.
Without any, data and logs go to ~/.local/share/minibot.";

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run every enabled channel (Telegram) until SIGINT or SIGTERM; what running with no command does.
    Run,
    /// Chat in the terminal.
    Console(ConsoleArgs),
    /// Run a task worker (what `minibot-worker` runs; the orchestrator starts local ones itself).
    Worker(WorkerArgs),
    /// Manage the secrets vault (`secrets.vault.yml`, or `[vault] path` of the `--config` file).
    Vault(VaultArgs),
    /// Look after the task queue (`[tasks] backend`).
    Queue(QueueArgs),
    /// Set up or change a config file step by step (provider, key, Telegram, tasks, MCP servers).
    Init(crate::setup::InitArgs),
    /// Trust the config.toml in this folder (or PATH) as it is now. `minibot` uses a config file that it finds in
    /// the working folder only after this, and again after every change to it or to the files in its folder it
    /// runs or reads as instructions (MCP servers' scripts, prompts, agents): such a file (a cloned project's)
    /// can start programs and send your keys to its server. Read them first. The record is
    /// ~/.config/minibot/trusted-configs; delete a line there to take trust back.
    Trust {
        /// The config file (default: --config, else ./config.toml).
        path: Option<PathBuf>,
    },
    /// Check the config, the vault, the provider, Telegram, the sandbox, the workers, MCP and disk; exits non-zero
    /// when something you need is broken.
    Doctor(crate::doctor::DoctorArgs),
}

#[derive(Debug, Args)]
pub struct QueueArgs {
    #[command(subcommand)]
    pub action: QueueAction,
}

#[derive(Debug, Subcommand)]
pub enum QueueAction {
    /// RabbitMQ: turn task queues an older version left as classic queues into the quorum queues this version
    /// needs, keeping every waiting task. Stop the orchestrator and the workers first.
    Migrate,
    /// List the workers that are alive now (listens to their heartbeats for a moment).
    Workers,
}

#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// Read the unlocked vault's secrets from stdin instead of opening the vault (how the orchestrator hands
    /// them to the local workers it starts).
    #[arg(long, hide = true)]
    pub secrets_from_stdin: bool,
}

#[derive(Debug, Args)]
pub struct VaultArgs {
    #[command(subcommand)]
    pub action: VaultAction,
    /// File holding the vault password (trailing newline ignored). Else `[vault] password_file` of the
    /// `--config` file, then MINIBOT_VAULT_PASSWORD, then a prompt on the terminal.
    #[arg(long, global = true, value_name = "PATH")]
    pub password_file: Option<PathBuf>,
}

/// Each takes the vault file as an optional last argument (default: `[vault] path` of the `--config` file,
/// else `secrets.vault.yml`).
#[derive(Debug, Subcommand)]
pub enum VaultAction {
    /// Create an empty vault; the password is asked twice on a terminal. Never overwrites a file.
    Init { path: Option<PathBuf> },
    /// Edit the secrets as `name: value` lines in $EDITOR (then $VISUAL, then vi).
    Edit { path: Option<PathBuf> },
    /// Print the secret names, one per line (never the values).
    List { path: Option<PathBuf> },
    /// Set one secret to the value read from stdin (one trailing newline dropped; asked without echo on a
    /// terminal).
    Set { name: String, path: Option<PathBuf> },
    /// Remove one secret.
    Rm { name: String, path: Option<PathBuf> },
    /// Store a new random key of 64 hex digits under NAME (for `[rabbitmq] message_key`). Never overwrites.
    Generate {
        name: String,
        path: Option<PathBuf>,
        /// Also print the key on stdout, to copy it to the vaults of worker hosts.
        #[arg(long)]
        print: bool,
    },
}

#[derive(Debug, Args)]
pub struct ConsoleArgs {
    /// Send one message, print the answer and exit (`-` reads the message from stdin).
    #[arg(long, value_name = "TEXT")]
    pub once: Option<String>,
    /// Plain prompt loop (no line editing).
    #[arg(long)]
    pub plain: bool,
    #[arg(long, default_value_t = 1)]
    pub chat_id: i64,
    #[arg(long, default_value_t = 1)]
    pub user_id: i64,
    /// With --once: how long to wait for the answer.
    #[arg(long, default_value_t = 120.0)]
    pub timeout_seconds: f64,
    /// Approve tool calls whose name matches PATTERN (fnmatch, as `[tools.approval] require_approval`) without
    /// asking. Repeatable. A `--once` run cannot ask, so it denies every other call that needs approval.
    #[arg(long, value_name = "PATTERN")]
    pub approve: Vec<String>,
}
