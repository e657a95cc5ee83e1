//! Finding a configured model in the table. Users write ids the way their provider does, litellm keys some by
//! provider (`gemini/…`, `xai/…`), OpenRouter names models `vendor/model` with its own spellings
//! (`anthropic/claude-sonnet-4.5`), and dated snapshots (`gpt-3.5-turbo-0613`) may be missing while their family
//! is listed. The lookup tries, in order: the id with the provider's litellm prefix (a provider's own row is the
//! most specific); the id as written; the OpenRouter `vendor/model` id mapped to litellm's names; then each of
//! those with a trailing date stripped. The first row found wins; a model found nowhere has no known limits.

use super::table::{ModelLimits, row};
use minibot_config::ApiFormat;

/// A provider as the lookup understands it: an [`ApiFormat`] or a name such as `"xai"` or `"deepseek"`
/// (litellm's provider names, for OpenAI-compatible endpoints of those vendors).
pub trait ProviderName {
    fn provider_name(&self) -> &str;
}

impl ProviderName for ApiFormat {
    fn provider_name(&self) -> &str {
        self.as_str()
    }
}

impl ProviderName for &str {
    fn provider_name(&self) -> &str {
        self
    }
}

impl ProviderName for String {
    fn provider_name(&self) -> &str {
        self
    }
}

/// The limits of `model` as served by `provider`, or `None` when the table does not know the model.
pub fn model_limits(provider: impl ProviderName, model: &str) -> Option<ModelLimits> {
    candidates(provider.provider_name(), model).iter().find_map(|id| row(id))
}

/// The ids to look for, best first.
fn candidates(provider: &str, model: &str) -> Vec<String> {
    let model = model.trim().to_lowercase();
    // The provider's own row first: it may differ from the vendor's (ChatGPT's Codex serves `gpt-5.2` with a
    // smaller context than OpenAI's API).
    let mut ids: Vec<String> =
        litellm_prefix(&provider.trim().to_lowercase()).map(|prefix| format!("{prefix}/{model}")).into_iter().collect();
    ids.push(model.clone());
    if let Some((vendor, name)) = model.split_once('/') {
        ids.extend(vendor_ids(vendor, strip_openrouter_variant(name)));
    }
    let dated: Vec<String> = ids.iter().filter_map(|id| undated(id)).map(str::to_owned).collect();
    ids.extend(dated);
    ids
}

/// The prefix litellm puts before a provider's model ids; `None` for OpenAI, whose ids are bare.
fn litellm_prefix(provider: &str) -> Option<&str> {
    match provider {
        "" | "openai" | "openai_responses" => None,
        "claude" | "anthropic" => Some("anthropic"),
        "google" | "gemini" => Some("gemini"),
        "chatgpt_codex" | "chatgpt" => Some("chatgpt"),
        "x-ai" | "xai" => Some("xai"),
        other => Some(other),
    }
}

/// litellm's ids for OpenRouter's `vendor/name` (https://openrouter.ai/models): OpenAI's and Anthropic's models
/// are bare in litellm, the other vendors' carry litellm's provider name, which is not always OpenRouter's vendor
/// name. Anthropic versions are dotted on OpenRouter (`claude-sonnet-4.5`) and dashed at Anthropic.
fn vendor_ids(vendor: &str, name: &str) -> Vec<String> {
    let mut ids = vec![name.to_owned()];
    match vendor {
        "openai" => {}
        "anthropic" => ids.push(name.replace('.', "-")),
        "google" => ids.push(format!("gemini/{name}")),
        "x-ai" => ids.push(format!("xai/{name}")),
        "mistralai" => ids.push(format!("mistral/{name}")),
        "moonshotai" => ids.push(format!("moonshot/{name}")),
        "z-ai" => ids.push(format!("zai/{name}")),
        other => ids.push(format!("{other}/{name}")),
    }
    ids
}

/// OpenRouter's variants (`:free`, `:thinking`, `:online`, …) serve the same model.
fn strip_openrouter_variant(name: &str) -> &str {
    name.split_once(':').map_or(name, |(base, _)| base)
}

/// `id` without a trailing snapshot date: `-2024-08-06`, `-20250929`, `@20251001` (Vertex AI), or `-0613`
/// (month and day, as OpenAI's and xAI's older snapshots are named).
fn undated(id: &str) -> Option<&str> {
    let (base, date) = id.rsplit_once(['-', '@'])?;
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    if digits(date, 8) || (digits(date, 4) && is_month_day(date)) {
        return Some(base);
    }
    // `-YYYY-MM-DD` splits at its last dash: look two dashes further back.
    let (base, year_month) = base.rsplit_once('-').and_then(|(rest, month)| {
        let (base, year) = rest.rsplit_once('-')?;
        Some((base, [year, month]))
    })?;
    (digits(year_month[0], 4) && digits(year_month[1], 2) && digits(date, 2)).then_some(base)
}

fn is_month_day(mmdd: &str) -> bool {
    let (month, day) = mmdd.split_at(2);
    matches!(month.parse::<u8>(), Ok(1..=12)) && matches!(day.parse::<u8>(), Ok(1..=31))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(id: &str) -> ModelLimits {
        row(id).unwrap_or_else(|| panic!("{id} should be in the table"))
    }

    #[test]
    fn an_id_in_the_table_is_found_as_written_whatever_its_case() {
        assert_eq!(model_limits(ApiFormat::OpenAi, "gpt-4o"), Some(table("gpt-4o")));
        assert_eq!(model_limits(ApiFormat::OpenAi, " GPT-4o "), Some(table("gpt-4o")));
        assert_eq!(model_limits(ApiFormat::Claude, "claude-sonnet-4-5"), Some(table("claude-sonnet-4-5")));
        // A dated row that exists is used itself, not its family's.
        assert_eq!(model_limits(ApiFormat::OpenAi, "gpt-4o-2024-05-13"), Some(table("gpt-4o-2024-05-13")));
    }

    #[test]
    fn the_providers_litellm_prefix_is_added() {
        // litellm lists Google AI Studio's models only as `gemini/…`, xAI's as `xai/…`.
        assert_eq!(row("gemini-2.5-pro"), None, "the test needs a model listed only with its prefix");
        assert_eq!(model_limits(ApiFormat::Google, "gemini-2.5-pro"), Some(table("gemini/gemini-2.5-pro")));
        assert_eq!(model_limits("xai", "grok-code-fast-1"), Some(table("xai/grok-code-fast-1")));
        // The provider's row wins over the bare one when both exist and differ.
        assert_ne!(row("gpt-5.2"), row("chatgpt/gpt-5.2"), "the test needs two different rows");
        assert_eq!(model_limits(ApiFormat::ChatgptCodex, "gpt-5.2"), Some(table("chatgpt/gpt-5.2")));
        assert_eq!(model_limits(ApiFormat::OpenAi, "gpt-5.2"), Some(table("gpt-5.2")));
        assert_eq!(
            model_limits(String::from("mistral"), "mistral-large-latest"),
            Some(table("mistral/mistral-large-latest"))
        );
    }

    #[test]
    fn openrouter_vendor_ids_map_to_litellm_names() {
        let openrouter = ApiFormat::OpenRouter;
        assert_eq!(model_limits(openrouter, "openai/gpt-4o"), Some(table("gpt-4o")));
        assert_eq!(model_limits(openrouter, "anthropic/claude-sonnet-4.5"), Some(table("claude-sonnet-4-5")));
        assert_eq!(model_limits(openrouter, "google/gemini-2.5-flash"), Some(table("gemini/gemini-2.5-flash")));
        assert_eq!(model_limits(openrouter, "x-ai/grok-code-fast-1"), Some(table("xai/grok-code-fast-1")));
        assert_eq!(model_limits(openrouter, "deepseek/deepseek-chat"), Some(table("deepseek-chat")));
        assert_eq!(model_limits(openrouter, "openai/gpt-4o-mini:free"), Some(table("gpt-4o-mini")));
    }

    #[test]
    fn a_missing_dated_snapshot_falls_back_to_its_family() {
        for (snapshot, family) in [
            ("gpt-3.5-turbo-0613", "gpt-3.5-turbo"),
            ("gpt-4-0314", "gpt-4"),
            ("claude-haiku-4-5@20251001", "claude-haiku-4-5"),
        ] {
            assert_eq!(row(snapshot), None, "the test needs {snapshot} absent from the table");
            assert_eq!(model_limits(ApiFormat::OpenAi, snapshot), Some(table(family)), "{snapshot}");
        }
        assert_eq!(model_limits(ApiFormat::OpenRouter, "openai/gpt-4-0314"), Some(table("gpt-4")));
    }

    #[test]
    fn dates_are_recognised_in_each_form_and_nothing_else_is_stripped() {
        assert_eq!(undated("gpt-4o-2024-08-06"), Some("gpt-4o"));
        assert_eq!(undated("claude-sonnet-4-5-20250929"), Some("claude-sonnet-4-5"));
        assert_eq!(undated("claude-haiku-4-5@20251001"), Some("claude-haiku-4-5"));
        assert_eq!(undated("xai/grok-code-fast-1-0825"), Some("xai/grok-code-fast-1"));
        // Version numbers and sizes are not dates.
        assert_eq!(undated("gpt-4o"), None);
        assert_eq!(undated("claude-sonnet-4-5"), None);
        assert_eq!(undated("qwen2.5-72b-instruct"), None);
        assert_eq!(undated("mistral-large-2411"), None);
        assert_eq!(undated("llama-3.1-8b-2048"), None);
    }

    #[test]
    fn an_unknown_model_has_no_limits() {
        assert_eq!(model_limits(ApiFormat::OpenAi, "my-local-finetune"), None);
        assert_eq!(model_limits(ApiFormat::OpenRouter, "nobody/nothing-7b"), None);
        assert_eq!(model_limits(ApiFormat::OpenAi, ""), None);
    }
}
