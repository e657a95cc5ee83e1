//! The model table compiled into the binary: `shared/llm/data/model-limits.tsv`, one chat model a line (id,
//! context tokens, output tokens), written by `scripts/refresh-model-limits` from litellm's data. It is parsed
//! once, on first use, into a map keyed by lower-case id.

use std::collections::HashMap;
use std::sync::LazyLock;

const TABLE: &str = include_str!("../../data/model-limits.tsv");

/// What one model accepts, as litellm records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelLimits {
    /// The most tokens a request may carry (litellm's `max_input_tokens`). For most models this is the whole
    /// context window, which the answer shares; for some (GPT-5: 272k of 400k) the answer has its own room.
    pub context_tokens: u64,
    /// The longest answer the model can write; `None` when litellm does not say.
    pub max_output_tokens: Option<u64>,
}

static LIMITS: LazyLock<HashMap<&'static str, ModelLimits>> = LazyLock::new(|| parse(TABLE));

/// The limits of the table row `id` (already lower-case), without any of the lookup's fallbacks.
pub(super) fn row(id: &str) -> Option<ModelLimits> {
    LIMITS.get(id).copied()
}

/// The table's first line: which litellm version and date the numbers come from, for logs and diagnostics.
pub fn model_table_source() -> &'static str {
    TABLE.lines().next().unwrap_or_default().trim_start_matches('#').trim()
}

fn parse(text: &'static str) -> HashMap<&'static str, ModelLimits> {
    text.lines().filter(|line| !line.starts_with('#') && !line.trim().is_empty()).filter_map(parse_line).collect()
}

/// A malformed line is skipped rather than failing the program: the file is generated and a test checks that
/// every line parses.
fn parse_line(line: &'static str) -> Option<(&'static str, ModelLimits)> {
    let mut fields = line.split('\t');
    let id = fields.next()?;
    let context_tokens = fields.next()?.parse().ok().filter(|&n: &u64| n > 0)?;
    let max_output_tokens = match fields.next()? {
        "-" => None,
        n => Some(n.parse().ok()?),
    };
    fields.next().is_none().then_some((id, ModelLimits { context_tokens, max_output_tokens }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data_lines() -> impl Iterator<Item = &'static str> {
        TABLE.lines().filter(|line| !line.starts_with('#') && !line.trim().is_empty())
    }

    #[test]
    fn every_line_of_the_shipped_table_parses_into_a_distinct_lower_case_id() {
        let lines = data_lines().count();
        assert!(lines > 500, "the table should hold the chat models of several providers, has {lines}");
        for line in data_lines() {
            assert!(parse_line(line).is_some(), "line does not parse: {line:?}");
        }
        assert_eq!(LIMITS.len(), lines, "duplicate ids in the table");
        assert!(LIMITS.keys().all(|id| *id == id.to_lowercase()), "ids must be lower-case: the lookup lower-cases");
    }

    #[test]
    fn the_header_names_the_litellm_version_and_the_refresh_command() {
        assert!(model_table_source().contains("litellm "), "{}", model_table_source());
        assert!(TABLE.lines().take(3).any(|line| line.contains("scripts/refresh-model-limits")));
    }

    #[test]
    fn well_known_models_have_plausible_limits() {
        // Bounds, not exact numbers: a refresh may change them, but never below these.
        for id in ["gpt-4o", "gpt-5", "o3", "claude-sonnet-4-5", "gemini/gemini-2.5-pro"] {
            let limits = row(id).unwrap_or_else(|| panic!("{id} missing from the table"));
            assert!(limits.context_tokens >= 128_000, "{id}: {limits:?}");
            let output = limits.max_output_tokens.unwrap_or_else(|| panic!("{id} has no output limit"));
            assert!(output >= 4_096 && output <= limits.context_tokens, "{id}: {limits:?}");
        }
    }

    #[test]
    fn table_holds_no_image_audio_or_embedding_models() {
        for id in ["text-embedding-3-large", "dall-e-3", "whisper-1", "tts-1", "gpt-image-1"] {
            assert_eq!(row(id), None, "{id} is not a chat model");
        }
    }

    #[test]
    fn a_line_with_a_missing_output_limit_or_a_bad_number_is_handled() {
        assert_eq!(
            parse_line("some/model\t32768\t-"),
            Some(("some/model", ModelLimits { context_tokens: 32_768, max_output_tokens: None }))
        );
        assert_eq!(parse_line("some/model\tlots\t100"), None);
        assert_eq!(parse_line("some/model\t0\t100"), None);
        assert_eq!(parse_line("some/model\t100"), None);
        assert_eq!(parse_line("some/model\t100\t10\textra"), None);
    }
}
