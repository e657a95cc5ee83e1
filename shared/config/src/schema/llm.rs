use super::macros::strings;
use std::collections::BTreeMap;

section! {
    /// `[llm]`: the main agent's model and the base every agent starts from.
    pub struct LlmSection {
        pub provider: String = "openai".into(),
        pub api_key: String = String::new(),
        pub base_url: Option<String> = None,
        pub model: String = "gpt-4o-mini".into(),
        pub http2: bool = false,
        pub temperature: Option<f64> = None,
        pub max_new_tokens: Option<u32> = None,
        /// Main-agent max steps per turn.
        pub max_tool_iterations: u32 = 15,
        pub request_timeout_seconds: f64 = 45.0,
        pub sock_connect_timeout_seconds: f64 = 10.0,
        pub sock_read_timeout_seconds: f64 = 45.0,
        pub retry_attempts: u32 = 3,
        pub retry_delay_seconds: f64 = 2.0,
        /// `None` means not written in the file: the built-in prompt applies.
        pub system_prompt: Option<String> = None,
        /// `None` means not written: `<prompts_dir>/main_agent_system.md` is used when it exists.
        pub system_prompt_file: Option<String> = None,
        pub prompts_dir: String = "./prompts".into(),
        pub reasoning_effort: Option<String> = None,
        pub reasoning_summary: Option<String> = None,
        pub main_responses_state_mode: String = "full_messages".into(),
        pub agent_responses_state_mode: String = "previous_response_id".into(),
        pub responses_state_mode: String = "full_messages".into(),
        pub prompt_cache_enabled: bool = true,
        pub prompt_cache_retention: Option<String> = None,
        pub strip_logs: bool = false,
        pub extra_headers: BTreeMap<String, String> = BTreeMap::new(),
        pub auth_path: Option<String> = None,
        pub openrouter: OpenRouterSection = OpenRouterSection::default(),
        pub xai: XaiSection = XaiSection::default(),
    }
}

section! {
    pub struct OpenRouterSection {
        pub attribution_enabled: bool = true,
        pub models: Vec<String> = vec![],
        pub reasoning_enabled: Option<bool> = None,
        pub plugins: Vec<toml::Value> = vec![],
        pub provider: OpenRouterProviderSection = OpenRouterProviderSection::default(),
    }
}

section! {
    pub struct OpenRouterProviderSection {
        pub order: Option<Vec<String>> = None,
        pub allow_fallbacks: Option<bool> = None,
        pub require_parameters: Option<bool> = None,
        pub data_collection: Option<String> = None,
        pub zdr: Option<bool> = None,
        pub enforce_distillable_text: Option<bool> = None,
        pub only: Option<Vec<String>> = None,
        pub ignore: Option<Vec<String>> = None,
        pub quantizations: Option<Vec<String>> = None,
        pub sort: Option<toml::Value> = None,
        pub preferred_min_throughput: Option<toml::Value> = None,
        pub preferred_max_latency: Option<toml::Value> = None,
        pub max_price: Option<toml::Value> = None,
        pub provider_extra: BTreeMap<String, toml::Value> = BTreeMap::new(),
    }
}

section! {
    pub struct XaiSection {
        pub web_search_enabled: bool = false,
        pub x_search_enabled: bool = false,
        pub web_search: XaiWebSearch = XaiWebSearch::default(),
        pub x_search: XaiXSearch = XaiXSearch::default(),
    }
}

section! {
    pub struct XaiWebSearch {
        pub allowed_domains: Vec<String> = vec![],
        pub excluded_domains: Vec<String> = vec![],
        pub enable_image_understanding: Option<bool> = None,
    }
}

section! {
    pub struct XaiXSearch {
        pub allowed_x_handles: Vec<String> = vec![],
        pub excluded_x_handles: Vec<String> = vec![],
        pub from_date: Option<String> = None,
        pub to_date: Option<String> = None,
        pub enable_image_understanding: Option<bool> = None,
        pub enable_video_understanding: Option<bool> = None,
    }
}

section! {
    /// `[providers.<name>]`: credentials and endpoint of one provider.
    pub struct ProviderSection {
        pub api_key: String = String::new(),
        pub base_url: Option<String> = None,
        pub headers: BTreeMap<String, String> = BTreeMap::new(),
        pub auth_path: Option<String> = None,
        pub api_format: Option<String> = None,
        pub models: Vec<String> = vec![],
    }
}

section! {
    pub struct CodexSection {
        pub version: String = "0.160.0".into(),
    }
}

/// The API formats MiniBot knows; a `[providers.X]` section named after one needs no `api_format`.
/// How a Responses provider keeps a conversation: the whole conversation with every request, or a chain of
/// `previous_response_id`s kept by the provider.
pub const RESPONSES_STATE_MODES: &[&str] = &["full_messages", "previous_response_id"];

impl LlmSection {
    /// Whether the main agent's requests chain on the provider's side (`main_responses_state_mode`).
    pub fn main_chains(&self) -> bool {
        self.main_responses_state_mode == "previous_response_id"
    }

    /// Whether a worker's requests within one run chain on the provider's side (`agent_responses_state_mode`,
    /// which replaces `responses_state_mode` for specialists, as in MiniBot).
    pub fn agent_chains(&self) -> bool {
        self.agent_responses_state_mode == "previous_response_id"
    }
}

pub const API_FORMATS: &[&str] = &["openai", "openai_responses", "openrouter", "claude", "google", "chatgpt_codex"];

pub(crate) fn default_env_allowlist() -> Vec<String> {
    strings(&["PATH", "LANG", "LC_ALL", "PYTHONUTF8"])
}
