//! When history must be compacted: the size, in tokens, at which a conversation is summarised before the next
//! request, so that no request exceeds the model's context.
//!
//! MiniBot (reference 6.5) set `[memory] max_history_tokens = context × context_ratio_before_compact` from a
//! catalog fetched at start-up, replacing whatever the user had written. Here a configured
//! `max_history_tokens` wins: it is how a user corrects the table (a model missing from it, or limits that
//! changed since its refresh). Without it the threshold is the model's context × the ratio, lowered if need be
//! so that the answer still fits after the history.

use super::table::ModelLimits;

/// `[memory] context_ratio_before_compact`'s default, used when the configured ratio is not in (0, 1].
pub const DEFAULT_COMPACT_RATIO: f64 = 0.95;
/// Room kept for the answer when `[llm] max_new_tokens` is not set: what OpenRouter requests by default, and
/// far more than a chat reply usually takes.
pub const DEFAULT_ANSWER_TOKENS: u64 = 4_096;

/// Where a [`ContextBudget`]'s threshold comes from, for logs and diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetSource {
    /// `[memory] max_history_tokens`.
    Configured,
    /// The model table's context size and `[memory] context_ratio_before_compact`.
    ModelTable,
}

/// The compaction threshold of one model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextBudget {
    /// Compact when a request's history reaches this many tokens.
    pub threshold_tokens: u64,
    pub source: BudgetSource,
    /// `[llm] max_new_tokens` lowered to the model's output limit: what to request as the answer's maximum.
    /// `None` when not configured (the provider's default applies).
    pub max_new_tokens: Option<u64>,
}

impl ContextBudget {
    /// The budget for a model with `limits` (from [`super::model_limits`]), given `[memory] max_history_tokens`,
    /// `[memory] context_ratio_before_compact` and `[llm] max_new_tokens`. `None` when neither the table nor the
    /// configuration gives a size: history is then never compacted, as in MiniBot without a catalog entry.
    pub fn for_model(
        limits: Option<ModelLimits>,
        configured_max_history_tokens: Option<u64>,
        ratio: f64,
        max_new_tokens: Option<u32>,
    ) -> Option<Self> {
        let max_new_tokens = max_new_tokens.map(|configured| {
            let model_limit = limits.and_then(|l| l.max_output_tokens).unwrap_or(u64::MAX);
            u64::from(configured).min(model_limit)
        });
        if let Some(configured) = configured_max_history_tokens {
            return Some(Self { threshold_tokens: configured, source: BudgetSource::Configured, max_new_tokens });
        }
        let limits = limits?;
        let context = limits.context_tokens;
        let ratio = if ratio.is_finite() && ratio > 0.0 { ratio.min(1.0) } else { DEFAULT_COMPACT_RATIO };
        // Truncating is what MiniBot did (`int(context * ratio)`); a fraction of a token does not matter.
        let by_ratio = (context as f64 * ratio) as u64;
        // Keep room for the answer, but never more than half the context: some rows give an output limit equal
        // to the context, which would leave no room for history at all.
        let answer = max_new_tokens
            .unwrap_or_else(|| limits.max_output_tokens.unwrap_or(DEFAULT_ANSWER_TOKENS).min(DEFAULT_ANSWER_TOKENS))
            .min(context / 2);
        let threshold_tokens = by_ratio.min(context - answer);
        Some(Self { threshold_tokens, source: BudgetSource::ModelTable, max_new_tokens })
    }

    /// Whether a request of `tokens` must wait for compaction first.
    pub fn needs_compaction(&self, tokens: u64) -> bool {
        tokens >= self.threshold_tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::model_limits;
    use minibot_config::ApiFormat;

    fn limits(model: &str) -> ModelLimits {
        model_limits(ApiFormat::OpenAi, model).unwrap_or_else(|| panic!("{model} should be in the table"))
    }

    #[test]
    fn a_configured_max_history_tokens_wins_over_the_table() {
        let gpt4o = limits("gpt-4o");
        let budget = ContextBudget::for_model(Some(gpt4o), Some(20_000), 0.95, None).unwrap();
        assert_eq!(budget.threshold_tokens, 20_000);
        assert_eq!(budget.source, BudgetSource::Configured);
        // Also above the table's context: the user may know better than a stale table.
        let larger = gpt4o.context_tokens * 2;
        assert_eq!(ContextBudget::for_model(Some(gpt4o), Some(larger), 0.95, None).unwrap().threshold_tokens, larger);
        // And for a model the table does not know.
        assert_eq!(ContextBudget::for_model(None, Some(8_000), 0.95, None).unwrap().threshold_tokens, 8_000);
    }

    #[test]
    fn without_configuration_the_threshold_is_context_times_ratio() {
        let gpt5 = limits("gpt-5");
        let budget = ContextBudget::for_model(Some(gpt5), None, 0.8, None).unwrap();
        assert_eq!(budget.threshold_tokens, (gpt5.context_tokens as f64 * 0.8) as u64);
        assert_eq!(budget.source, BudgetSource::ModelTable);
        let lower = ContextBudget::for_model(Some(gpt5), None, 0.5, None).unwrap();
        assert!(lower.threshold_tokens < budget.threshold_tokens);
    }

    #[test]
    fn the_threshold_always_leaves_room_for_the_answer() {
        // gpt-4: 8k context. 0.95 × 8192 leaves ~400 tokens, less than the default answer room.
        let gpt4 = limits("gpt-4");
        let budget = ContextBudget::for_model(Some(gpt4), None, 0.95, None).unwrap();
        assert_eq!(budget.threshold_tokens, gpt4.context_tokens - DEFAULT_ANSWER_TOKENS);
        // A configured answer size is reserved instead, capped by the model's output limit.
        let budget = ContextBudget::for_model(Some(gpt4), None, 1.0, Some(1_000)).unwrap();
        assert_eq!(budget.threshold_tokens, gpt4.context_tokens - 1_000);
        assert_eq!(budget.max_new_tokens, Some(1_000));
    }

    #[test]
    fn a_huge_answer_setting_cannot_squeeze_out_the_history() {
        let grok = model_limits("xai", "grok-code-fast-1").unwrap();
        let budget = ContextBudget::for_model(Some(grok), None, 0.95, Some(u32::MAX)).unwrap();
        assert_eq!(budget.threshold_tokens, grok.context_tokens / 2);
        assert_eq!(budget.max_new_tokens, grok.max_output_tokens, "max_new_tokens is lowered to the model's limit");
    }

    #[test]
    fn an_invalid_ratio_falls_back_to_the_default() {
        let gpt5 = limits("gpt-5");
        let default = ContextBudget::for_model(Some(gpt5), None, DEFAULT_COMPACT_RATIO, None).unwrap();
        for ratio in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(ContextBudget::for_model(Some(gpt5), None, ratio, None), Some(default), "{ratio}");
        }
        let above_one = ContextBudget::for_model(Some(gpt5), None, 1.5, None).unwrap();
        assert!(above_one.threshold_tokens < gpt5.context_tokens, "a ratio above 1 is treated as 1");
    }

    #[test]
    fn nothing_known_means_no_compaction() {
        assert_eq!(ContextBudget::for_model(None, None, 0.95, Some(4_096)), None);
    }

    #[test]
    fn compaction_is_needed_from_the_threshold_on() {
        let budget = ContextBudget::for_model(Some(limits("gpt-4o")), None, 0.95, None).unwrap();
        assert!(!budget.needs_compaction(budget.threshold_tokens - 1));
        assert!(budget.needs_compaction(budget.threshold_tokens));
    }
}
