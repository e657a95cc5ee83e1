use super::macros::strings;
use crate::bytesize::ByteSize;
use std::collections::BTreeMap;

section! {
    /// `[tools]`: one sub-section per tool family.
    pub struct ToolsSection {
        pub approval: ApprovalSection = ApprovalSection::default(),
        pub kv_memory: KvMemorySection = KvMemorySection::default(),
        pub http_client: HttpClientSection = HttpClientSection::default(),
        pub time: TimeSection = TimeSection::default(),
        pub wait: WaitSection = WaitSection::default(),
        pub calculator: CalculatorSection = CalculatorSection::default(),
        pub python_exec: PythonExecSection = PythonExecSection::default(),
        pub bash: BashSection = BashSection::default(),
        pub tool_output_spill: ToolOutputSpillSection = ToolOutputSpillSection::default(),
        pub apply_patch: ApplyPatchSection = ApplyPatchSection::default(),
        pub file_storage: FileStorageSection = FileStorageSection::default(),
        pub grep: GrepSection = GrepSection::default(),
        pub browser: BrowserSection = BrowserSection::default(),
        pub audio_transcription: AudioTranscriptionSection = AudioTranscriptionSection::default(),
        pub mcp: McpSection = McpSection::default(),
        pub skills: SkillsSection = SkillsSection::default(),
        pub rag: RagSection = RagSection::default(),
        pub codemode: CodemodeSection = CodemodeSection::default(),
        pub safety_classifier: SafetyClassifierSection = SafetyClassifierSection::default(),
    }
}

section! {
    pub struct ApprovalSection {
        pub require_approval: Vec<String> = vec![],
        pub timeout_seconds: u64 = 90,
    }
}

section! {
    pub struct KvMemorySection {
        pub enabled: bool = false,
        pub sqlite_url: String = "sqlite+aiosqlite:///./data/kv_memory.db".into(),
        pub pool_size: u32 = 5,
        pub echo: bool = false,
        pub default_limit: u32 = 20,
        pub max_limit: u32 = 100,
    }
}

section! {
    pub struct HttpClientSection {
        pub enabled: bool = false,
        pub timeout_seconds: f64 = 10.0,
        pub follow_redirects: bool = false,
        pub max_redirects: u32 = 5,
        pub max_bytes: ByteSize = ByteSize(16_384),
        pub max_parse_bytes: ByteSize = ByteSize(2_000_000),
        pub response_processing_mode: String = "auto".into(),
        pub max_chars: Option<u64> = None,
        pub normalize_whitespace: bool = true,
        pub spill_to_managed_file: bool = false,
        pub spill_after_chars: u64 = 16_000,
        pub spill_preview_chars: u64 = 2_000,
        pub max_spill_bytes: ByteSize = ByteSize(5_000_000),
        pub spill_subdir: String = "http_responses/tmp".into(),
        /// minibot-rs only (MiniBot does no address filtering): refuse requests whose destination, after DNS
        /// resolution and at every redirect hop, is loopback, private, link-local (cloud metadata), CGNAT,
        /// unspecified, multicast or broadcast. On by default, unlike MiniBot: a fetched page can tell the model
        /// to fetch `http://127.0.0.1:…`, and the user's local services must not answer it unless the user says
        /// so with `false`.
        pub deny_private_networks: bool = true,
    }
}

section! {
    pub struct TimeSection {
        pub enabled: bool = true,
        pub default_format: String = "%Y-%m-%dT%H:%M:%SZ".into(),
    }
}

section! {
    pub struct WaitSection {
        pub enabled: bool = false,
        pub max_milliseconds: u64 = 30_000,
    }
}

section! {
    pub struct CalculatorSection {
        pub enabled: bool = true,
        pub default_scale: u32 = 28,
        pub max_expression_length: usize = 200,
        pub max_exponent_abs: u32 = 1000,
    }
}

choice! {
    /// MiniBot's modes, plus `contain` (minibot-rs): Landlock, seccomp and namespaces through the
    /// `minibot-sandbox` helper. A config that does not name a mode gets `contain`.
    pub enum SandboxMode {
        None = "none", Basic = "basic", Rlimit = "rlimit", Cgroup = "cgroup", Jail = "jail", Contain = "contain"
    } default Contain
}

section! {
    pub struct PythonExecSection {
        pub enabled: bool = true,
        pub backend: String = "host".into(),
        #[serde(deserialize_with = "super::macros::empty_as_none")]
        pub python_path: Option<String> = None,
        #[serde(deserialize_with = "super::macros::empty_as_none")]
        pub venv_path: Option<String> = None,
        pub sandbox_mode: SandboxMode = SandboxMode::Contain,
        /// minibot-rs, `contain` mode: whether the code may open network sockets.
        pub allow_network: bool = false,
        pub default_timeout_seconds: u64 = 8,
        pub max_timeout_seconds: u64 = 20,
        pub max_output_bytes: ByteSize = ByteSize(64_000),
        pub max_code_bytes: ByteSize = ByteSize(32_000),
        pub artifacts_enabled: bool = true,
        pub artifacts_default_subdir: String = "generated".into(),
        pub artifacts_allowed_extensions: Vec<String> =
            strings(&[".png", ".jpg", ".jpeg", ".pdf", ".csv", ".txt", ".json", ".svg"]),
        pub artifacts_max_files: u32 = 5,
        pub artifacts_max_file_bytes: ByteSize = ByteSize(5_000_000),
        pub artifacts_max_total_bytes: ByteSize = ByteSize(20_000_000),
        pub artifacts_allow_in_jail: bool = false,
        #[serde(deserialize_with = "super::macros::empty_as_none")]
        pub artifacts_jail_shared_dir: Option<String> = None,
        pub pass_parent_env: bool = false,
        pub env_allowlist: Vec<String> = super::llm::default_env_allowlist(),
        pub rlimit: RlimitSection = RlimitSection::default(),
        /// minibot-rs, `contain` mode: what one call may use.
        pub limits: ContainLimitsSection = ContainLimitsSection::default(),
        pub cgroup: CgroupSection = CgroupSection::default(),
        pub jail: JailSection = JailSection::default(),
    }
}

section! {
    pub struct RlimitSection {
        pub enabled: bool = false,
        pub cpu_seconds: Option<u64> = Some(2),
        pub memory_mb: Option<u64> = Some(256),
        pub fsize_mb: Option<u64> = Some(16),
        pub nproc: Option<u64> = Some(64),
        pub nofile: Option<u64> = Some(256),
    }
}

section! {
    /// minibot-rs: the bounds of one `contain` call, on by default and chosen so that ordinary data work
    /// (pandas on a 100 MB CSV) runs. A key set to nothing (`0`) lifts that bound.
    pub struct ContainLimitsSection {
        /// Usable private memory of each process (`RLIMIT_DATA`), MiB.
        pub memory_mb: u64 = 4096,
        /// Processes and threads of the call (`RLIMIT_NPROC`; without namespaces the kernel counts all of the
        /// user's processes).
        pub processes: u64 = 256,
        /// CPU time of each process (`RLIMIT_CPU`), seconds.
        pub cpu_seconds: u64 = 600,
        /// Largest file a process may write (`RLIMIT_FSIZE`), MiB.
        pub file_size_mb: u64 = 2048,
        /// What `$TMPDIR` may hold (a tmpfs of the call's own; needs namespaces), MiB.
        pub temp_mb: u64 = 1024,
        /// Open files of each process (`RLIMIT_NOFILE`).
        pub open_files: u64 = 1024,
        /// What the call may take of the disk under its writable folders (the managed folder, Python's run
        /// folder), MiB; measured as the drop in free space while it runs.
        pub disk_mb: u64 = 4096,
        /// How many files and folders it may make there (the drop in free inodes).
        pub disk_files: u64 = 100_000,
    }
}

section! {
    pub struct CgroupSection {
        pub enabled: bool = false,
        pub driver: String = "systemd".into(),
        pub cpu_quota_percent: u32 = 100,
        pub memory_max_mb: u64 = 256,
    }
}

section! {
    pub struct JailSection {
        pub enabled: bool = false,
        pub command_prefix: Vec<String> = vec![],
    }
}

section! {
    pub struct BashSection {
        pub enabled: bool = false,
        pub default_timeout_seconds: u64 = 15,
        pub max_timeout_seconds: u64 = 120,
        pub max_output_bytes: ByteSize = ByteSize(128_000),
        pub pass_parent_env: bool = false,
        pub env_allowlist: Vec<String> = strings(&["PATH", "HOME", "USER", "LANG", "LC_ALL", "SHELL"]),
        pub spill_to_managed_file: bool = false,
        pub spill_after_chars: u64 = 2_000,
        pub spill_preview_chars: u64 = 500,
        pub spill_subdir: String = "bash_output/tmp".into(),
        /// Not in MiniBot, whose bash had no sandbox: the same modes and settings as `[tools.python_exec]`.
        pub sandbox_mode: SandboxMode = SandboxMode::Contain,
        /// minibot-rs, `contain` mode: whether the command may open network sockets.
        pub allow_network: bool = false,
        pub rlimit: RlimitSection = RlimitSection::default(),
        /// minibot-rs, `contain` mode: what one call may use.
        pub limits: ContainLimitsSection = ContainLimitsSection::default(),
        pub cgroup: CgroupSection = CgroupSection::default(),
        pub jail: JailSection = JailSection::default(),
    }
}

section! {
    pub struct ToolOutputSpillSection {
        pub enabled: bool = true,
        pub spill_after_chars: u64 = 8_000,
        pub preview_chars: u64 = 800,
        pub subdir: String = "tool_output/tmp".into(),
        pub exclude_tools: Vec<String> = strings(&["http_request", "pre_response"]),
    }
}

section! {
    pub struct ApplyPatchSection {
        pub enabled: bool = false,
        pub restrict_to_workspace: bool = true,
        pub workspace_root: String = ".".into(),
        pub allow_outside_workspace: bool = false,
        pub preserve_trailing_newline: bool = true,
        pub max_patch_bytes: ByteSize = ByteSize(262_144),
    }
}

section! {
    pub struct FileStorageSection {
        pub enabled: bool = false,
        pub root_dir: String = "./data/files".into(),
        pub max_write_bytes: ByteSize = ByteSize(64_000),
        pub allow_outside_root: bool = false,
        /// Accepted for MiniBot files; MiniBot never read it either.
        pub save_incoming_uploads: bool = false,
        /// Accepted for MiniBot files; MiniBot never read it either.
        pub uploads_subdir: String = "uploads".into(),
        pub incoming_temp_subdir: String = "uploads/temp".into(),
    }
}

section! {
    pub struct GrepSection {
        pub enabled: bool = false,
        pub max_matches: u32 = 200,
        pub max_file_size_bytes: ByteSize = ByteSize(1_000_000),
    }
}

section! {
    pub struct BrowserSection {
        pub output_dir: String = "./data/files/browser".into(),
    }
}

section! {
    pub struct AudioTranscriptionSection {
        pub enabled: bool = false,
        pub model: String = "small".into(),
        pub device: String = "auto".into(),
        pub compute_type: String = "int8".into(),
        pub beam_size: u32 = 5,
        pub vad_filter: bool = true,
        pub auto_transcribe_short_incoming: bool = true,
        pub auto_transcribe_max_duration_seconds: u32 = 45,
        pub server_url: Option<String> = None,
    }
}

section! {
    pub struct McpSection {
        pub enabled: bool = false,
        pub name_prefix: String = "mcp".into(),
        pub timeout_seconds: f64 = 10.0,
        pub reload: bool = false,
        pub servers: Vec<McpServerSection> = vec![],
    }
}

choice! {
    pub enum McpMode { Bridge = "bridge", Lazy = "lazy" } default Bridge
}

choice! {
    pub enum McpTransport { Stdio = "stdio", Http = "http" } default Stdio
}

section! {
    pub struct McpServerSection {
        pub name: String = String::new(),
        pub mode: McpMode = McpMode::Bridge,
        pub transport: McpTransport = McpTransport::Stdio,
        pub command: Option<String> = None,
        pub args: Vec<String> = vec![],
        pub env: BTreeMap<String, String> = BTreeMap::new(),
        pub cwd: Option<String> = None,
        pub url: Option<String> = None,
        pub headers: BTreeMap<String, String> = BTreeMap::new(),
        pub auth_secret: Option<String> = None,
        pub enabled_tools: Vec<String> = vec![],
        pub disabled_tools: Vec<String> = vec![],
        pub catalog_cache_ttl_seconds: u64 = 60,
        pub inline_result_chars: u64 = 25_000,
    }
}

section! {
    pub struct SkillsSection {
        /// `None`: not written, MiniBot's default (on); see [`super::ScheduledPromptsSection::enabled`].
        pub enabled: Option<bool> = None,
        pub paths: Vec<String> = vec![],
        pub preload_catalog: bool = true,
        pub native: bool = true,
        pub native_disabled: Vec<String> = vec![],
        pub write_path: String = "~/.minibot/skills".into(),
        pub install: bool = false,
    }
}

section! {
    pub struct RagSection {
        pub enabled: bool = false,
        pub backend: String = "sqlite".into(),
        pub sqlite_url: String = "sqlite+aiosqlite:///./data/rag.db".into(),
        pub echo: bool = false,
        pub qdrant_url: String = "http://localhost:6333".into(),
        pub collection_name: String = "minibot_chunks".into(),
        pub embedding: RagEmbeddingSection = RagEmbeddingSection::default(),
        pub rerank: RagRerankSection = RagRerankSection::default(),
        pub chunk_size_tokens: u32 = 96,
        pub chunk_overlap_tokens: u32 = 20,
        pub search_limit: u32 = 5,
        pub truncate_result_tokens: bool = false,
        pub max_result_tokens: u32 = 1500,
    }
}

section! {
    pub struct RagEmbeddingSection {
        pub model: String = "sentence-transformers/all-MiniLM-L12-v2".into(),
        pub dim: u32 = 384,
        pub truncate_dim: Option<u32> = None,
        pub max_sequence_tokens: u32 = 128,
    }
}

section! {
    pub struct RagRerankSection {
        pub enabled: bool = false,
        pub model: String = "cross-encoder/ms-marco-MiniLM-L2-v2".into(),
        pub candidate_limit: u32 = 50,
        pub max_results: u32 = 7,
    }
}

section! {
    pub struct CodemodeSection {
        pub enabled: bool = false,
        pub timeout_seconds: u64 = 120,
        pub max_timeout_seconds: u64 = 600,
        pub max_tool_calls: u32 = 50,
        pub max_memory_mb: u32 = 64,
        pub max_output_chars: u64 = 20_000,
        pub exclude: Vec<String> = vec![],
    }
}

section! {
    pub struct SafetyClassifierSection {
        pub enabled: bool = false,
        pub provider: Option<String> = None,
        pub model: Option<String> = None,
        pub reasoning_effort: Option<String> = None,
        pub check_input: Vec<String> =
            strings(&["bash", "python_execute", "http_request", "install_skill", "schedule_prompt"]),
        pub check_output: Vec<String> = strings(&["http_request"]),
        pub max_output_chars: u64 = 20_000,
        pub max_output_chunks: u32 = 5,
        pub timeout_seconds: f64 = 30.0,
    }
}
