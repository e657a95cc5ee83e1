//! How many tokens a request will use, counted before it is sent, with OpenAI's tokenizers (`tiktoken-rs`).
//!
//! Exact for OpenAI models' message text; an estimate everywhere else. Other vendors (Anthropic, Google, xAI,
//! open models) use their own tokenizers, typically within 10–20 % of `cl100k_base` for English text, so their
//! counts are estimates and thresholds built on them keep a margin ([`super::ContextBudget`]).
//!
//! Message framing follows OpenAI's cookbook
//! (https://cookbook.openai.com/examples/how_to_count_tokens_with_tiktoken): 3 tokens per message plus its role
//! and text, 3 more that prime the reply. Tool definitions use the cookbook's function-calling figures
//! (7 per function, 12 for the block) over the function's name, description and JSON schema text, an
//! approximation of how the API renders them. Images are not tokenized (a `data:` URL's base64 would count
//! millions): each counts [`IMAGE_TOKENS`].

use crate::{ContentPart, Message, ToolSpec};
use std::sync::LazyLock;
use tiktoken_rs::CoreBPE;

/// Tokens counted for one image. A detailed image costs up to 1,445 tokens at OpenAI (2048×768, eight
/// 512-px tiles: 85 + 8 × 170) and about 1,600 at Anthropic (width × height / 750, images are scaled to
/// ~1.15 megapixels); the larger figure errs toward compacting early rather than overflowing.
pub const IMAGE_TOKENS: u64 = 1_600;

/// `<|start|>{role}<|message|>…<|end|>`: the framing around every message.
const TOKENS_PER_MESSAGE: u64 = 3;
/// `<|start|>assistant<|message|>`: every reply is primed with these.
const REPLY_PRIMING_TOKENS: u64 = 3;
const TOKENS_PER_TOOL: u64 = 7;
const TOOLS_BLOCK_TOKENS: u64 = 12;
/// A requested tool call's framing besides its name and arguments (id, type): not documented, estimated.
const TOKENS_PER_TOOL_CALL: u64 = 3;

// Building a BPE parses a 2–4 MB vocabulary (about 0.15 s optimised, 1 s unoptimised), so each is built once,
// on first use. The vocabularies are compiled into tiktoken-rs and parse; should one ever not, counting falls
// back to OpenAI's rule of thumb of four bytes a token rather than stopping the program.
static O200K: LazyLock<Option<CoreBPE>> = LazyLock::new(|| tiktoken_rs::o200k_base().ok());
static CL100K: LazyLock<Option<CoreBPE>> = LazyLock::new(|| tiktoken_rs::cl100k_base().ok());
const BYTES_PER_TOKEN_ESTIMATE: u64 = 4;

/// The tokenizer used to count for a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenEncoding {
    /// GPT-4o, GPT-4.1, GPT-4.5, GPT-5 and the o-series.
    O200kBase,
    /// GPT-4, GPT-3.5, and the estimate for every other vendor's model.
    Cl100kBase,
}

impl TokenEncoding {
    /// The encoding for `model`, written as a provider takes it (`gpt-4o`, `openai/gpt-5`, `o3-mini`).
    pub fn for_model(model: &str) -> Self {
        let model = model.trim().to_lowercase();
        let name = model.rsplit('/').next().unwrap_or_default();
        let o_series = name.strip_prefix('o').is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()));
        let o200k_family = ["gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "gpt-oss", "chatgpt-4o", "codex-"];
        if o_series || o200k_family.iter().any(|family| name.starts_with(family)) {
            Self::O200kBase
        } else {
            Self::Cl100kBase
        }
    }

    fn bpe(self) -> Option<&'static CoreBPE> {
        match self {
            Self::O200kBase => O200K.as_ref(),
            Self::Cl100kBase => CL100K.as_ref(),
        }
    }
}

/// Tokens in `text` alone, without message framing.
pub fn count_text_tokens(text: &str, encoding: TokenEncoding) -> u64 {
    // Ordinary encoding: text that looks like a special token (`<|endoftext|>`) is counted as the plain text
    // the API receives it as.
    match encoding.bpe() {
        Some(bpe) => bpe.encode_ordinary(text).len() as u64,
        None => (text.len() as u64).div_ceil(BYTES_PER_TOKEN_ESTIMATE),
    }
}

/// Tokens of a request with these `messages` and `tools` for `model`, including the reply's priming. Exact for
/// the text of OpenAI models, an estimate otherwise (see the module documentation).
pub fn count_tokens(messages: &[Message], tools: &[ToolSpec], model: &str) -> u64 {
    let encoding = TokenEncoding::for_model(model);
    let text = |s: &str| count_text_tokens(s, encoding);
    let messages_tokens: u64 = messages.iter().map(|message| TOKENS_PER_MESSAGE + message_tokens(message, &text)).sum();
    messages_tokens + REPLY_PRIMING_TOKENS + tools_tokens(tools, &text)
}

fn message_tokens(message: &Message, text: &impl Fn(&str) -> u64) -> u64 {
    match message {
        Message::System(content) => text("system") + text(content),
        Message::User(content) => text("user") + text(content),
        Message::UserParts(parts) => {
            text("user")
                + parts
                    .iter()
                    .map(|part| match part {
                        ContentPart::Text(content) => text(content),
                        ContentPart::ImageUrl(_) => IMAGE_TOKENS,
                    })
                    .sum::<u64>()
        }
        // The replay (signed thinking blocks, thought signatures) is opaque provider data, mostly signatures
        // that are not billed as text; the readable reasoning is counted.
        Message::Assistant { content, tool_calls, reasoning, replay: _ } => {
            text("assistant")
                + content.as_deref().map_or(0, text)
                + reasoning.as_deref().map_or(0, text)
                + tool_calls
                    .iter()
                    .map(|call| TOKENS_PER_TOOL_CALL + text(&call.name) + text(&call.arguments))
                    .sum::<u64>()
        }
        Message::Tool { call_id: _, name, content } => text("tool") + text(name) + text(content),
    }
}

fn tools_tokens(tools: &[ToolSpec], text: &impl Fn(&str) -> u64) -> u64 {
    if tools.is_empty() {
        return 0;
    }
    let functions: u64 = tools
        .iter()
        .map(|tool| TOKENS_PER_TOOL + text(&tool.name) + text(&tool.description) + text(&tool.parameters.to_string()))
        .sum();
    TOOLS_BLOCK_TOKENS + functions
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolCall;
    use std::time::Instant;

    fn conversation(turns: usize) -> Vec<Message> {
        let mut messages = vec![Message::System("You are a helpful assistant. Answer briefly.".into())];
        for turn in 0..turns {
            messages.push(Message::User(format!("Question {turn}: what is the capital of country number {turn}?")));
            messages.push(Message::assistant_text(format!("The capital of country {turn} is City {turn}.")));
        }
        messages
    }

    #[test]
    fn chooses_o200k_for_openais_current_models_and_cl100k_otherwise() {
        for model in
            ["gpt-4o", "gpt-4o-mini-2024-07-18", "gpt-4.1", "gpt-5", "o1", "o3-mini", "o4-mini", "openai/gpt-5"]
        {
            assert_eq!(TokenEncoding::for_model(model), TokenEncoding::O200kBase, "{model}");
        }
        for model in ["gpt-4", "gpt-3.5-turbo", "claude-sonnet-4-5", "gemini-2.5-pro", "ollama/llama3", "openai"] {
            assert_eq!(TokenEncoding::for_model(model), TokenEncoding::Cl100kBase, "{model}");
        }
    }

    #[test]
    fn counts_match_the_prompt_tokens_openai_reports_for_the_cookbooks_example() {
        // The cookbook's example conversation: the API reported 129 prompt tokens for gpt-4-0613 (cl100k_base)
        // and 124 for gpt-4o (o200k_base). Four of its messages carry a `name` (`example_user`,
        // `example_assistant`), which costs the name's tokens plus one; `Message` has no names, so the same
        // conversation without them weighs that much less.
        let messages = vec![
            Message::System(
                "You are a helpful, pattern-following assistant that translates corporate jargon into plain English."
                    .into(),
            ),
            Message::System("New synergies will help drive top-line growth.".into()),
            Message::System("Things working well together will increase revenue.".into()),
            Message::System(
                "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage."
                    .into(),
            ),
            Message::System("Let's talk later when we're less busy about how to do better.".into()),
            Message::User(
                "This late pivot means we don't have time to boil the ocean for the client deliverable.".into(),
            ),
        ];
        for (model, encoding, reported) in
            [("gpt-4-0613", TokenEncoding::Cl100kBase, 129), ("gpt-4o", TokenEncoding::O200kBase, 124)]
        {
            let names = 2 * (count_text_tokens("example_user", encoding) + 1)
                + 2 * (count_text_tokens("example_assistant", encoding) + 1);
            assert_eq!(count_tokens(&messages, &[], model), reported - names, "{model}");
        }
    }

    #[test]
    fn known_text_has_its_known_token_count() {
        // "tiktoken is great!" is 6 tokens in both encodings (OpenAI cookbook).
        assert_eq!(count_text_tokens("tiktoken is great!", TokenEncoding::Cl100kBase), 6);
        assert_eq!(count_text_tokens("tiktoken is great!", TokenEncoding::O200kBase), 6);
        assert_eq!(count_text_tokens("", TokenEncoding::O200kBase), 0);
        // Special-token text is plain text to the API, not one special token.
        assert!(count_text_tokens("<|endoftext|>", TokenEncoding::Cl100kBase) > 1);
    }

    #[test]
    fn a_longer_conversation_counts_more() {
        let short = count_tokens(&conversation(5), &[], "gpt-4o");
        let long = count_tokens(&conversation(500), &[], "gpt-4o");
        assert!(short > 3 * 11, "11 messages carry at least their framing: {short}");
        assert!(long > 50 * short, "1001 messages vs 11: {long} vs {short}");
        let same_text_more_messages =
            count_tokens(&[Message::User("a b".into()), Message::User("c".into())], &[], "gpt-4o");
        assert!(same_text_more_messages > count_tokens(&[Message::User("a b c".into())], &[], "gpt-4o"));
    }

    #[test]
    fn tools_tool_calls_and_results_are_counted() {
        let messages = conversation(1);
        let tool = ToolSpec {
            name: "read_file".into(),
            description: "Read a text file from the workspace and return its contents.".into(),
            parameters: std::sync::Arc::new(
                serde_json::json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
            ),
        };
        let plain = count_tokens(&messages, &[], "gpt-4o");
        let with_tool = count_tokens(&messages, std::slice::from_ref(&tool), "gpt-4o");
        let schema = count_text_tokens(&tool.parameters.to_string(), TokenEncoding::O200kBase);
        assert!(with_tool > plain + schema, "{with_tool} vs {plain} + {schema}");

        let call =
            ToolCall { id: "call_1".into(), name: "read_file".into(), arguments: r#"{"path":"notes/todo.md"}"#.into() };
        let mut with_call = messages.clone();
        with_call.push(Message::assistant_calls(None, vec![call]));
        with_call.push(Message::Tool {
            call_id: "call_1".into(),
            name: "read_file".into(),
            content: "buy milk\n".repeat(100),
        });
        let after_call = count_tokens(&with_call, &[], "gpt-4o");
        assert!(after_call > plain + 200, "a 100-line tool result weighs at least 200 tokens: {after_call} vs {plain}");
    }

    #[test]
    fn an_image_counts_its_fixed_estimate_not_its_base64() {
        let image = ContentPart::image_data("image/png", &vec![7u8; 300_000]);
        let text_only = vec![Message::UserParts(vec![ContentPart::Text("What is in this picture?".into())])];
        let with_image = vec![Message::UserParts(vec![ContentPart::Text("What is in this picture?".into()), image])];
        assert_eq!(count_tokens(&with_image, &[], "gpt-4o"), count_tokens(&text_only, &[], "gpt-4o") + IMAGE_TOKENS);
    }

    #[test]
    #[ignore = "timing report: cargo test -p minibot-llm --lib limits::tokens -- --ignored --nocapture"]
    fn report_first_and_later_count_timings() {
        let messages = conversation(25);
        for model in ["gpt-4o", "claude-sonnet-4-5"] {
            let started = Instant::now();
            let first = count_tokens(&messages, &[], model);
            let first_time = started.elapsed();
            let started = Instant::now();
            let later = count_tokens(&messages, &[], model);
            let later_time = started.elapsed();
            assert_eq!(first, later);
            println!(
                "{model}: {} messages, {first} tokens; first count {first_time:?}, later {later_time:?}",
                messages.len()
            );
        }
    }
}
