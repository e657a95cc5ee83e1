use serde::de::{self, Deserializer, Visitor};
use std::collections::BTreeMap;
use std::fmt;

section! {
    /// `[runtime]`: process-wide settings.
    pub struct RuntimeSection {
        /// Overrides `[logging].log_level`.
        pub log_level: Option<String> = None,
        pub environment: String = "development".into(),
        /// Wall-clock limit of one whole main-agent turn.
        pub agent_timeout_seconds: u64 = 120,
        /// Owner of memory, schedules and tasks; never taken from a message.
        pub owner_id: String = "primary".into(),
        /// minibot-rs: on SIGTERM the daemon stops taking input and waits this long for running turns; what is
        /// still running then stays pending and is answered after the next start.
        pub shutdown_grace_seconds: u64 = 25,
    }
}

section! {
    pub struct ChannelsSection {
        pub telegram: TelegramSection = TelegramSection::default(),
    }
}

section! {
    pub struct TelegramSection {
        pub enabled: bool = true,
        pub bot_token: String = String::new(),
        pub allowed_chat_ids: Vec<i64> = vec![],
        pub allowed_user_ids: Vec<i64> = vec![],
        pub mode: String = "long_polling".into(),
        pub webhook_url: Option<String> = None,
        pub require_authorized: bool = true,
        pub media_enabled: bool = true,
        pub max_photo_bytes: crate::ByteSize = crate::ByteSize(5_242_880),
        pub max_document_bytes: crate::ByteSize = crate::ByteSize(10_485_760),
        pub max_total_media_bytes: crate::ByteSize = crate::ByteSize(12_582_912),
        pub max_attachments_per_message: u32 = 3,
        pub allowed_document_mime_types: Vec<String> = vec![],
        pub format_repair_enabled: bool = true,
        pub format_repair_max_attempts: u32 = 1,
        /// minibot-rs: the Bot API server (a self-hosted `telegram-bot-api` works too).
        pub api_base_url: String = "https://api.telegram.org".into(),
        /// minibot-rs, webhook mode: where the daemon listens for Telegram's POSTs (a reverse proxy with TLS
        /// usually sits in front; `webhook_url` is the public address).
        pub webhook_listen: String = "0.0.0.0:8443".into(),
        /// minibot-rs, webhook mode: sent to Telegram with `setWebhook` and required in the
        /// `X-Telegram-Bot-Api-Secret-Token` header of every update.
        pub webhook_secret_token: Option<String> = None,
        /// minibot-rs, long polling: how long one `getUpdates` call waits on the server.
        pub poll_timeout_seconds: u64 = 25,
    }
}

section! {
    pub struct OrchestrationSection {
        pub directory: String = "./agents".into(),
        pub tool_ownership_mode: ToolOwnershipMode = ToolOwnershipMode::Shared,
        pub shared_mcp_servers: Vec<String> = vec![],
        pub main_tool_use_guardrail: String = "disabled".into(),
        pub main_tool_use_guardrail_provider: Option<String> = None,
        pub main_tool_use_guardrail_model: Option<String> = None,
        pub main_tool_use_guardrail_reasoning_effort: Option<String> = None,
        pub main_agent: MainAgentSection = MainAgentSection::default(),
        pub specialists: SpecialistsSection = SpecialistsSection::default(),
        pub agent_management: AgentManagementSection = AgentManagementSection::default(),
    }
}

choice! {
    pub enum ToolOwnershipMode { Shared = "shared", Exclusive = "exclusive", ExclusiveMcp = "exclusive_mcp" } default Shared
}

section! {
    pub struct MainAgentSection {
        pub name: String = "minibot".into(),
        pub tools_allow: Vec<String> = vec![],
        pub tools_deny: Vec<String> = vec![],
    }
}

section! {
    pub struct SpecialistsSection {
        /// `None`: follows `[tasks].enabled`.
        pub enabled: Option<bool> = None,
    }
}

section! {
    pub struct AgentManagementSection {
        pub reload: bool = false,
        pub write: bool = false,
        pub directory: String = "./data/agents".into(),
        pub tools_allow: Vec<String> = vec![],
        pub mcp_servers: Vec<String> = vec![],
        pub providers: Vec<String> = vec![],
    }
}

section! {
    pub struct DecisionSection {
        pub enabled: bool = false,
        pub model: String = "~typesafe/jev-latest".into(),
        pub base_url: String = "https://openrouter.ai/api/alpha".into(),
        pub api_key: String = String::new(),
        pub timeout_seconds: f64 = 3.0,
    }
}

section! {
    pub struct MemorySection {
        /// Informational only, as in MiniBot.
        pub backend: String = "sqlite".into(),
        pub sqlite_url: String = "sqlite+aiosqlite:///./data/minibot.db".into(),
        pub max_history_messages: Option<u32> = None,
        pub max_history_tokens: Option<u64> = None,
        pub context_ratio_before_compact: f64 = 0.95,
        pub notify_compaction_updates: NotifyCompaction = NotifyCompaction::Off,
    }
}

choice! {
    pub enum NotifyCompaction { Off = "off", Brief = "brief", Full = "full" } default Off
}

section! {
    pub struct SchedulerSection {
        pub prompts: ScheduledPromptsSection = ScheduledPromptsSection::default(),
    }
}

section! {
    pub struct ScheduledPromptsSection {
        /// `None`: not written, MiniBot's default (on). Only `Some(false)` turns the scheduler off.
        pub enabled: Option<bool> = None,
        pub sqlite_url: String = "sqlite+aiosqlite:///./data/scheduled_prompts.db".into(),
        pub poll_interval_seconds: u64 = 60,
        pub lease_timeout_seconds: u64 = 120,
        pub batch_size: u32 = 10,
        pub max_attempts: u32 = 3,
        pub min_recurrence_interval_seconds: u64 = 60,
        pub pool_size: u32 = 5,
        pub echo: bool = false,
    }
}

section! {
    pub struct LoggingSection {
        pub structured: bool = true,
        pub logfmt_enabled: bool = true,
        pub log_level: String = "INFO".into(),
        pub kv_separator: String = "=".into(),
        pub record_separator: String = " ".into(),
        /// `logs/minibot.log` is turned over (renamed `minibot.log.1`, the older copies shifted up) before a
        /// write would take it past this size.
        pub max_file_bytes: crate::ByteSize = crate::ByteSize(10_485_760),
        /// How many turned-over copies are kept (`minibot.log.1` … `.N`); the oldest goes. 0 keeps none.
        pub backup_count: u32 = 5,
    }
}

section! {
    pub struct TasksSection {
        pub enabled: bool = true,
        pub backend: TaskBackend = TaskBackend::Sqlite,
        pub worker_timeout_seconds: u64 = 1800,
        pub worker_max_steps: Limit = Limit::Unlimited,
        pub worker_max_tool_calls: Limit = Limit::Unlimited,
        /// Caps the local workers: the orchestrator starts `min(local_workers, max_concurrent_workers)`.
        pub max_concurrent_workers: u32 = 4,
        pub delegation_mode: DelegationMode = DelegationMode::Auto,
        pub history: bool = false,
        pub worker_extensions: Vec<String> = vec![],
        /// minibot-rs: worker processes the orchestrator starts and supervises itself (SQLite backend only;
        /// with RabbitMQ, run `minibot-worker` wherever you like). 0 starts none. See [`TasksSection::local_worker_count`].
        pub local_workers: u32 = 2,
        /// minibot-rs: seconds a local worker waits for a task before it exits; the next task starts it again.
        /// 0 keeps the local workers running until the orchestrator stops. SQLite backend with local workers only.
        pub local_worker_idle_seconds: u64 = 300,
        /// minibot-rs: least seconds between two progress notes of one task in its chat (0 turns them off).
        pub progress_interval_seconds: f64 = 3.0,
        pub sqlite: TasksSqliteSection = TasksSqliteSection::default(),
    }
}

impl TasksSection {
    /// Local worker processes to start. Each runs one task at a time, so this is also how many tasks run at once
    /// on them: `local_workers`, capped by MiniBot's `max_concurrent_workers`.
    pub fn local_worker_count(&self) -> u32 {
        self.local_workers.min(self.max_concurrent_workers)
    }
}

choice! {
    pub enum TaskBackend { Sqlite = "sqlite", Rabbitmq = "rabbitmq" } default Sqlite
}

choice! {
    pub enum DelegationMode { Auto = "auto", Delegate = "delegate" } default Auto
}

section! {
    pub struct TasksSqliteSection {
        pub sqlite_url: String = "sqlite+aiosqlite:///./data/tasks.db".into(),
        pub poll_interval_seconds: f64 = 5.0,
        pub lease_timeout_seconds: u64 = 2100,
        pub batch_size: u32 = 4,
        pub max_attempts: u32 = 3,
        pub done_retention_seconds: u64 = 2_592_000,
        pub pool_size: u32 = 5,
        pub echo: bool = false,
    }
}

section! {
    pub struct RabbitmqSection {
        pub broker_url: String = "amqp://guest:guest@localhost:5672/".into(),
        pub queue_name: String = "minibot".into(),
        pub exchange_name: String = "minibot.tasks".into(),
        pub prefetch_count: u16 = 1,
        /// PEM file of the certificate authority that signed the broker's certificate, for an `amqps://`
        /// broker_url whose certificate the system's trust store does not know. Relative to the config file.
        pub tls_ca_file: Option<String> = None,
        /// The secret that signs every message on the broker (tasks, worker events, control messages,
        /// heartbeats), shared by the orchestrator and all its workers; at least 32 characters. Required with
        /// the RabbitMQ backend: `minibot vault generate NAME` makes one, referenced as `${secret:NAME}`.
        pub message_key: String = String::new(),
    }
}

section! {
    /// What a worker process offers (this project's own section; MiniBot has none).
    pub struct WorkerSection {
        /// Labels this worker offers; a specialist whose `requires` lists a label only runs on workers that
        /// offer it (for example `["gpu"]`).
        pub labels: Vec<String> = vec![],
        /// How often a worker tells the orchestrator it is alive; it leaves the roster after three missed beats.
        pub heartbeat_seconds: u64 = 5,
    }
}

section! {
    pub struct VaultSection {
        pub enabled: bool = false,
        pub path: String = "secrets.vault.yml".into(),
        pub password_file: String = String::new(),
    }
}

section! {
    pub struct HttpSection {
        pub enabled: bool = false,
        pub host: String = "127.0.0.1".into(),
        pub port: u16 = 8080,
        pub auth_token: String = String::new(),
        pub basic_auth_user: String = String::new(),
        pub basic_auth_password: String = String::new(),
        pub chat_upload_max_attachments: u32 = 3,
        pub chat_upload_max_image_bytes: crate::ByteSize = crate::ByteSize(5_000_000),
        pub chat_upload_max_audio_bytes: crate::ByteSize = crate::ByteSize(10_000_000),
        pub chat_upload_max_total_bytes: crate::ByteSize = crate::ByteSize(12_000_000),
        pub chat_upload_retention_hours: u32 = 24,
    }
}

section! {
    pub struct ExtensionsSection {
        pub modules: Vec<String> = vec![],
        pub config: BTreeMap<String, toml::Value> = BTreeMap::new(),
    }
}

/// The relation graph extension, as `[extensions] modules` names it.
pub const GRAPH_EXTENSION: &str = "minibot.extensions.tools.graph";
/// The keys `[extensions.config."minibot.extensions.tools.graph"]` may hold.
pub const GRAPH_EXTENSION_KEYS: &[&str] = &["sqlite_url", "echo"];

impl ExtensionsSection {
    /// Whether `modules` lists the relation graph.
    pub fn graph_enabled(&self) -> bool {
        self.modules.iter().any(|m| m == GRAPH_EXTENSION)
    }

    /// The relation graph's database URL when its extension is on: the module's `sqlite_url` (checked at load),
    /// else MiniBot's default `sqlite+aiosqlite:///./data/graph.db`.
    pub fn graph_sqlite_url(&self) -> Option<String> {
        if !self.graph_enabled() {
            return None;
        }
        let written = self.config.get(GRAPH_EXTENSION).and_then(|c| c.get("sqlite_url")).and_then(|v| v.as_str());
        Some(written.unwrap_or("sqlite+aiosqlite:///./data/graph.db").to_string())
    }
}

/// A positive count or `"unlimited"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Unlimited,
    Max(u32),
}

impl Limit {
    pub fn max(self) -> Option<u32> {
        match self {
            Self::Unlimited => None,
            Self::Max(n) => Some(n),
        }
    }
}

impl serde::Serialize for Limit {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Unlimited => serializer.serialize_str("unlimited"),
            Self::Max(n) => serializer.serialize_u32(*n),
        }
    }
}

impl<'de> serde::Deserialize<'de> for Limit {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct LimitVisitor;
        impl Visitor<'_> for LimitVisitor {
            type Value = Limit;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a positive integer or \"unlimited\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Limit, E> {
                match u32::try_from(v) {
                    Ok(n) if n > 0 => Ok(Limit::Max(n)),
                    _ => Err(E::custom("must be a positive integer or \"unlimited\"")),
                }
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Limit, E> {
                self.visit_i64(i64::try_from(v).unwrap_or(-1))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Limit, E> {
                if v == "unlimited" {
                    Ok(Limit::Unlimited)
                } else {
                    Err(E::custom("must be a positive integer or \"unlimited\""))
                }
            }
        }
        deserializer.deserialize_any(LimitVisitor)
    }
}
