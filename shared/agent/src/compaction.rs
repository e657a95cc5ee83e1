//! Summaries that stand in for old messages, so a conversation never outgrows the model's context (reference
//! 6.5). The summary is written by the run's own model with the compaction prompt (`prompts/compact.md`,
//! overridable like every prompt). The messages are sent as a transcript in one user message rather than as
//! the conversation itself: an old tool call whose result was cut away would be refused by some APIs, and the
//! summary model needs no tools.
//!
//! A transcript larger than one request may carry is summarised in parts: each part's request carries the
//! summary so far and the next messages, so no request exceeds the budget however long the history is.

use minibot_llm::{ChatProvider, ChatRequest, LlmError, Message, TokenEncoding, count_text_tokens};

/// A bound on the tokens of `text` that needs no tokenizer: half its bytes, plus a little (a token is at least
/// two bytes of text in practice).
pub fn rough_upper_text_tokens(text: &str) -> u64 {
    (text.len() / 2 + 8) as u64
}

/// A bound on the tokens of `messages` that needs no tokenizer: half their bytes, plus a little per message.
/// Building the tokenizer costs a process about 150 ms the first time and tens of MiB from then on, so it is
/// only built when this bound says the budget may be near and the provider has not counted.
pub fn rough_upper_tokens(messages: &[Message]) -> u64 {
    (text_bytes(messages, 2 * minibot_llm::IMAGE_TOKENS as usize) / 2 + messages.len() * 8) as u64
}

/// A floor under the tokens of `messages` that real text stays above (eight bytes a token: English runs about
/// four, code and other scripts fewer). A provider's count far below it is not a count of the whole request:
/// some local servers report only the tokens they did not have cached.
pub fn rough_lower_tokens(messages: &[Message]) -> u64 {
    // Images may cost a provider little (OpenAI's low detail: 85 tokens): none here.
    (text_bytes(messages, 0) / 8) as u64
}

/// The bytes of text in `messages`, each image counted as `image_bytes`.
fn text_bytes(messages: &[Message], image_bytes: usize) -> usize {
    messages
        .iter()
        .map(|message| match message {
            Message::System(text) | Message::User(text) => text.len(),
            Message::UserParts(parts) => parts
                .iter()
                .map(|part| match part {
                    minibot_llm::ContentPart::Text(text) => text.len(),
                    minibot_llm::ContentPart::ImageUrl(_) => image_bytes,
                })
                .sum(),
            Message::Assistant { content, tool_calls, .. } => {
                content.as_deref().map_or(0, str::len)
                    + tool_calls.iter().map(|c| c.name.len() + c.arguments.len()).sum::<usize>()
            }
            Message::Tool { content, .. } => content.len(),
        })
        .sum()
}

/// The user line of a summary request (MiniBot's wording).
pub const COMPACT_REQUEST: &str = "Please compact the current conversation memory.";
/// What a worker's run is told after its messages were replaced by a summary (MiniBot's wording).
pub const CONTINUE_AFTER_SUMMARY: &str = "Continue the task from the summary above. Do not repeat completed steps.";
/// The longest tool result or message quoted whole in a transcript; longer ones keep their start and end.
const MAX_QUOTED_CHARS: usize = 4_000;

/// Writes summaries with one model.
pub struct Compactor<'a> {
    pub provider: &'a dyn ChatProvider,
    pub model: String,
    pub reasoning_effort: Option<String>,
    /// The compaction prompt.
    pub prompt: String,
    /// The most tokens of transcript one summary request carries.
    pub part_tokens: u64,
}

impl<'a> Compactor<'a> {
    /// A compactor with `model`'s settings whose requests stay within `limit` tokens: each carries at most half
    /// of it as transcript, so the prompt and the summary so far fit beside it.
    pub fn for_model(provider: &'a dyn ChatProvider, model: &crate::ModelSettings, prompt: String, limit: u64) -> Self {
        Self {
            provider,
            model: model.model.clone(),
            reasoning_effort: model.reasoning_effort.clone(),
            prompt,
            part_tokens: (limit / 2).max(1_000),
        }
    }

    /// A summary of `earlier` (a previous summary, if the conversation had one) followed by `messages`.
    ///
    /// Parts are measured with the byte bound of [`rough_upper_tokens`], not a tokenizer: a daemon that builds
    /// one holds tens of MiB from then on. The bound errs high, so a part may be smaller than it could be (one
    /// more request for a long history), never over the budget; every line is still sent exactly once.
    pub async fn summarize(&self, earlier: Option<&str>, messages: &[Message]) -> Result<String, LlmError> {
        let mut summary = earlier.map(str::to_string);
        let mut part = String::new();
        let mut part_tokens = 0u64;
        for line in messages.iter().filter_map(transcript_line) {
            let tokens = rough_upper_text_tokens(&line);
            if part_tokens > 0 && part_tokens + tokens > self.part_tokens {
                summary = Some(self.ask(summary.as_deref(), &part).await?);
                part.clear();
                part_tokens = 0;
            }
            part.push_str(&line);
            part.push_str("\n\n");
            part_tokens += tokens;
        }
        if !part.is_empty() || summary.is_none() {
            summary = Some(self.ask(summary.as_deref(), &part).await?);
        }
        Ok(summary.unwrap_or_default())
    }

    async fn ask(&self, earlier: Option<&str>, transcript: &str) -> Result<String, LlmError> {
        let mut text = String::new();
        if let Some(earlier) = earlier {
            text.push_str("<earlier_summary>\n");
            text.push_str(earlier);
            text.push_str("\n</earlier_summary>\n\n");
        }
        text.push_str("<conversation>\n");
        text.push_str(transcript.trim_end());
        text.push_str("\n</conversation>\n\n");
        text.push_str(COMPACT_REQUEST);
        let request = ChatRequest {
            model: self.model.clone(),
            messages: vec![Message::System(self.prompt.clone()), Message::User(text)],
            reasoning_effort: self.reasoning_effort.clone(),
            ..ChatRequest::default()
        };
        let response = self.provider.complete(&request).await?;
        let summary = response.content.unwrap_or_default();
        if summary.trim().is_empty() {
            return Err(LlmError::EmptyResponse);
        }
        Ok(summary.trim().to_string())
    }
}

/// One message as a transcript line; `None` for the system prompt (the summary is not about it).
fn transcript_line(message: &Message) -> Option<String> {
    Some(match message {
        Message::System(_) => return None,
        Message::User(text) => format!("User: {}", quoted(text)),
        Message::UserParts(parts) => {
            let texts: Vec<&str> = parts
                .iter()
                .map(|part| match part {
                    minibot_llm::ContentPart::Text(text) => text.as_str(),
                    minibot_llm::ContentPart::ImageUrl(_) => "[an image]",
                })
                .collect();
            format!("User: {}", quoted(&texts.join(" ")))
        }
        Message::Assistant { content, tool_calls, .. } => {
            let mut line = String::from("Assistant:");
            if let Some(text) = content.as_deref().filter(|t| !t.trim().is_empty()) {
                line.push(' ');
                line.push_str(&quoted(text));
            }
            for call in tool_calls {
                line.push_str(&format!("\n  called {}({})", call.name, quoted(&call.arguments)));
            }
            line
        }
        Message::Tool { name, content, .. } => format!("Tool {name} returned: {}", quoted(content)),
    })
}

/// `text`, or its start and end when it is long: a summary needs what a long output was, not all of it.
fn quoted(text: &str) -> String {
    let count = text.chars().count();
    if count <= MAX_QUOTED_CHARS {
        return text.to_string();
    }
    let head: String = text.chars().take(MAX_QUOTED_CHARS * 3 / 4).collect();
    let tail: String = text.chars().skip(count - MAX_QUOTED_CHARS / 4).collect();
    format!("{head}\n[… {} characters left out …]\n{tail}", count - MAX_QUOTED_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use minibot_llm::{ChatResponse, ToolCall};
    use std::sync::Mutex;

    /// Answers every request with a summary naming how many requests came before, and keeps the requests.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<ChatRequest>>);

    impl ChatProvider for Recorder {
        fn complete<'a>(
            &'a self,
            request: &'a ChatRequest,
        ) -> futures_util::future::BoxFuture<'a, minibot_llm::Result<ChatResponse>> {
            Box::pin(async move {
                let mut requests = self.0.lock().unwrap();
                requests.push(request.clone());
                Ok(ChatResponse { content: Some(format!("summary {}", requests.len())), ..ChatResponse::default() })
            })
        }
    }

    fn user_text(request: &ChatRequest) -> String {
        match &request.messages[1] {
            Message::User(text) => text.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_short_history_is_summarised_in_one_request_with_its_tool_calls_as_text() {
        let recorder = Recorder::default();
        let compactor = Compactor {
            provider: &recorder,
            model: "gpt-4o".into(),
            reasoning_effort: None,
            prompt: "compact!".into(),
            part_tokens: 10_000,
        };
        let call = ToolCall { id: "1".into(), name: "write_file".into(), arguments: r#"{"path":"a.txt"}"#.into() };
        let messages = vec![
            Message::System("system".into()),
            Message::User("write a.txt".into()),
            Message::assistant_calls(None, vec![call]),
            Message::Tool { call_id: "1".into(), name: "write_file".into(), content: "ok".into() },
            Message::assistant_text("Done."),
        ];
        let summary = compactor.summarize(None, &messages).await.unwrap();
        assert_eq!(summary, "summary 1");
        let requests = recorder.0.lock().unwrap();
        assert_eq!(requests.len(), 1);
        assert!(requests[0].tools.is_empty());
        let text = user_text(&requests[0]);
        assert!(text.contains("User: write a.txt"), "{text}");
        assert!(text.contains(r#"called write_file({"path":"a.txt"})"#), "{text}");
        assert!(text.contains("Tool write_file returned: ok"), "{text}");
        assert!(!text.contains("system"), "{text}");
        assert!(text.ends_with(COMPACT_REQUEST));
    }

    #[tokio::test]
    async fn a_long_history_is_summarised_in_parts_each_within_the_budget() {
        let recorder = Recorder::default();
        let compactor = Compactor {
            provider: &recorder,
            model: "gpt-4o".into(),
            reasoning_effort: None,
            prompt: "compact!".into(),
            part_tokens: 500,
        };
        let messages: Vec<Message> = (0..200)
            .map(|i| Message::User(format!("message number {i} about the garden, the roses and the weather")))
            .collect();
        let summary = compactor.summarize(Some("what came before"), &messages).await.unwrap();
        let requests = recorder.0.lock().unwrap();
        assert!(requests.len() > 3, "{}", requests.len());
        assert_eq!(summary, format!("summary {}", requests.len()));
        let encoding = TokenEncoding::for_model("gpt-4o");
        for (i, request) in requests.iter().enumerate() {
            let text = user_text(request);
            // The part plus the carried summary and the fixed wrapping.
            assert!(count_text_tokens(&text, encoding) < 500 + 100, "request {i} too long");
            let expected = if i == 0 { "what came before".to_string() } else { format!("summary {i}") };
            assert!(text.contains(&expected), "request {i} carries the summary so far");
        }
        assert!(user_text(requests.last().unwrap()).contains("message number 199"));
    }

    #[test]
    fn long_outputs_keep_their_start_and_end() {
        let long = format!("{}{}", "a".repeat(10_000), "THE END");
        let quoted = quoted(&long);
        assert!(quoted.len() < 5_000 && quoted.ends_with("THE END") && quoted.contains("characters left out"));
    }
}

/// Compaction inside one run: when the conversation reaches the budget at the start of a step, everything after
/// the task's prompt is replaced by a summary and the model is told to go on (reference 6.5, mid-run). If the
/// summary fails, or the conversation is still over the model's limit, the oldest tool results are shortened
/// to a note (never removed: a call keeps its result), so no request exceeds the context.
pub struct RunCompaction<'a> {
    /// Summarise when the conversation reaches this many tokens.
    pub threshold_tokens: u64,
    /// The most a request may carry (the model's context less room for the answer); `None`: unknown.
    pub hard_limit: Option<u64>,
    pub compactor: Compactor<'a>,
}

/// What a run's compaction did, reported as [`crate::AgentEvent::Compacted`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompactionOutcome {
    /// Messages replaced by a summary.
    Summarised { before_tokens: u64, after_tokens: u64, summary: String },
    /// The summary failed (its error); old tool results were shortened instead where needed.
    Failed { error: String, shortened: usize },
}

/// The note that replaces a tool result shortened to fit the context.
pub const SHORTENED_RESULT: &str = "[This tool result was removed to keep the conversation within the model's \
context. Run the tool again if you need it.]";

impl RunCompaction<'_> {
    /// Fits `messages` (the system prompt first, the run's own prompt at `prompt_at`) within the budget;
    /// `tokens` is their size now. `None` when nothing had to be done.
    pub async fn fit(&self, messages: &mut Vec<Message>, prompt_at: usize, tokens: u64) -> Option<CompactionOutcome> {
        if tokens < self.threshold_tokens || messages.len() <= prompt_at + 2 {
            return None;
        }
        let model = &self.compactor.model;
        match self.compactor.summarize(None, &messages[prompt_at + 1..]).await {
            Ok(summary) => {
                messages.truncate(prompt_at + 1);
                messages.push(Message::assistant_text(format!("Summary of the work so far:\n\n{summary}")));
                messages.push(Message::User(CONTINUE_AFTER_SUMMARY.into()));
                let after_tokens = minibot_llm::count_tokens(messages, &[], model);
                Some(CompactionOutcome::Summarised { before_tokens: tokens, after_tokens, summary })
            }
            Err(error) => {
                let limit = self.hard_limit.unwrap_or(self.threshold_tokens);
                let shortened = shorten_oldest_results(messages, prompt_at, limit, model);
                Some(CompactionOutcome::Failed { error: error.to_string(), shortened })
            }
        }
    }
}

/// Replaces tool results, oldest first, with [`SHORTENED_RESULT`] until the messages fit `limit`; how many.
pub fn shorten_oldest_results(messages: &mut [Message], from: usize, limit: u64, model: &str) -> usize {
    let encoding = TokenEncoding::for_model(model);
    let note_tokens = count_text_tokens(SHORTENED_RESULT, encoding);
    let mut tokens = minibot_llm::count_tokens(messages, &[], model);
    let mut shortened = 0;
    for message in messages.iter_mut().skip(from) {
        if tokens < limit {
            break;
        }
        if let Message::Tool { content, .. } = message
            && content.as_str() != SHORTENED_RESULT
        {
            tokens = tokens.saturating_sub(count_text_tokens(content, encoding)) + note_tokens;
            *content = SHORTENED_RESULT.to_string();
            shortened += 1;
        }
    }
    shortened
}

impl<'a> RunCompaction<'a> {
    /// Compaction for runs of `model` on `endpoint`, from `[memory]` and the compiled model table
    /// ([`minibot_llm::ContextBudget`]); `None` when neither gives the model's size (the run then never
    /// compacts, and a too-long request fails with the provider's context-length error).
    pub fn for_model(
        config: &minibot_config::Config,
        endpoint: &minibot_config::LlmEndpoint,
        model: &crate::ModelSettings,
        provider: &'a dyn ChatProvider,
        prompt: String,
    ) -> Option<Self> {
        let limits = minibot_llm::model_limits(endpoint.api_format, &model.model);
        let memory = &config.memory;
        let budget = minibot_llm::ContextBudget::for_model(
            limits,
            memory.max_history_tokens,
            memory.context_ratio_before_compact,
            model.max_tokens,
        )?;
        let hard_limit = limits.map(|l| {
            let answer = budget.max_new_tokens.unwrap_or(minibot_llm::DEFAULT_ANSWER_TOKENS).min(l.context_tokens / 2);
            l.context_tokens - answer
        });
        Some(Self {
            threshold_tokens: budget.threshold_tokens,
            hard_limit,
            compactor: Compactor::for_model(provider, model, prompt, budget.threshold_tokens),
        })
    }
}

/// The compaction prompt: `compact.md` from the prompts folder, else the built-in one.
pub fn compact_prompt(library: &crate::PromptLibrary) -> String {
    match library.get("compact.md") {
        Ok(Some(text)) => text,
        Ok(None) => include_str!("../../../prompts/compact.md").to_string(),
        Err(error) => {
            tracing::warn!(error = %error, "using the built-in compaction prompt");
            include_str!("../../../prompts/compact.md").to_string()
        }
    }
}
