//! The typed shape of `config.toml`. Every section rejects keys it does not know, naming them.

#[macro_use]
mod macros;
pub mod llm;
pub mod runtime;
pub mod tools;

pub use llm::*;
pub use runtime::*;
pub use tools::*;

use std::collections::BTreeMap;

impl serde::Serialize for crate::ByteSize {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(self.0)
    }
}

section! {
    /// The whole file as written, after `${VAR}` expansion; see [`crate::Config`] for the resolved view.
    pub struct ConfigFile {
        pub runtime: RuntimeSection = RuntimeSection::default(),
        pub channels: ChannelsSection = ChannelsSection::default(),
        pub llm: LlmSection = LlmSection::default(),
        pub providers: BTreeMap<String, ProviderSection> = BTreeMap::new(),
        pub codex: CodexSection = CodexSection::default(),
        pub orchestration: OrchestrationSection = OrchestrationSection::default(),
        pub decision: DecisionSection = DecisionSection::default(),
        pub memory: MemorySection = MemorySection::default(),
        pub tools: ToolsSection = ToolsSection::default(),
        pub scheduler: SchedulerSection = SchedulerSection::default(),
        pub logging: LoggingSection = LoggingSection::default(),
        pub tasks: TasksSection = TasksSection::default(),
        pub rabbitmq: RabbitmqSection = RabbitmqSection::default(),
        pub worker: WorkerSection = WorkerSection::default(),
        pub vault: VaultSection = VaultSection::default(),
        pub http: HttpSection = HttpSection::default(),
        pub extensions: ExtensionsSection = ExtensionsSection::default(),
    }
}

/// Top-level section names, for the "unknown section" error.
pub const SECTIONS: &[&str] = &[
    "runtime",
    "channels",
    "llm",
    "providers",
    "codex",
    "orchestration",
    "decision",
    "memory",
    "tools",
    "scheduler",
    "logging",
    "tasks",
    "rabbitmq",
    "worker",
    "vault",
    "http",
    "extensions",
];
