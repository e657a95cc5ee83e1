//! Context management: how much a model can take, how much a conversation weighs, and when history must be
//! compacted so no request exceeds the model's context.
//!
//! Nothing here touches the network. MiniBot fetched `https://models.dev/api.json` at every start; minibot-rs
//! compiles a model table into the binary instead ([`model_limits`]), made from litellm's
//! `model_prices_and_context_window` data by `scripts/refresh-model-limits` (see `docs/configuration.md`,
//! "Model limits"). [`count_tokens`] estimates a request's size with OpenAI's tokenizers, and [`ContextBudget`]
//! turns the model's limits and the `[memory]`/`[llm]` settings into the history size that triggers compaction.

mod budget;
mod lookup;
mod table;
mod tokens;

pub use budget::{BudgetSource, ContextBudget, DEFAULT_ANSWER_TOKENS, DEFAULT_COMPACT_RATIO};
pub use lookup::{ProviderName, model_limits};
pub use table::{ModelLimits, model_table_source};
pub use tokens::{IMAGE_TOKENS, TokenEncoding, count_text_tokens, count_tokens};
