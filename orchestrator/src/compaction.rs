//! Between-turn compaction of a chat's history (reference 6.5). After a turn is stored and answered, if the
//! history the next request will carry reached the model's budget ([`minibot_llm::ContextBudget`]), the chat's
//! model summarises it (the earlier summary included) and the summary stands in for those messages from then on.
//! Nothing is deleted: the messages stay in the store, readable by id with `chat_history_info`, and the summary
//! says which they are.
//!
//! A summary that fails keeps the history as it was; the next request then carries only as many of the latest
//! turns as fit ([`fit_history`]), so no request is sent over the limit, and the chat is told once.

use crate::messages::{Outbound, OutboundRole};
use crate::runtime::{Runtime, SessionModel};
use minibot_agent::compaction::{CompactionOutcome, Compactor};
use minibot_config::NotifyCompaction;
use minibot_llm::{ContextBudget, Message};
use minibot_store::Summary;

/// The chat's notices (`[memory] notify_compaction_updates`), MiniBot's words.
pub const RUNNING_NOTICE: &str = "running compaction...";
pub const DONE_NOTICE: &str = "done compacting";
pub const ERROR_NOTICE: &str = "error compacting: the conversation is kept, and only its latest messages go to \
the model until a summary succeeds";

/// The size limits of a chat's model.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Summarise when the history reaches this many tokens.
    pub threshold: u64,
    /// The most a request may carry (context less room for the answer); a quarter above the threshold when the
    /// context is not known.
    pub hard_limit: u64,
}

impl Limits {
    /// `None` when neither the model table nor `[memory] max_history_tokens` gives a size: such a chat is never
    /// compacted, as in MiniBot without a catalog entry.
    pub fn for_model(rt: &Runtime, model: &SessionModel) -> Option<Self> {
        let format = rt.config.api_format_of(&model.provider_name).unwrap_or(minibot_config::ApiFormat::OpenAi);
        let limits = minibot_llm::model_limits(format, &model.settings.model);
        let memory = &rt.config.memory;
        let budget = ContextBudget::for_model(
            limits,
            memory.max_history_tokens,
            memory.context_ratio_before_compact,
            model.settings.max_tokens,
        )?;
        // Without the model's context, a request may pass the threshold by a quarter (the next message, one
        // turn's tools) before older turns are left out: compaction after the turn keeps it below.
        let hard_limit = limits.map_or(budget.threshold_tokens + budget.threshold_tokens / 4, |l| {
            let answer = budget.max_new_tokens.unwrap_or(minibot_llm::DEFAULT_ANSWER_TOKENS).min(l.context_tokens / 2);
            (l.context_tokens - answer).max(budget.threshold_tokens)
        });
        Some(Self { threshold: budget.threshold_tokens, hard_limit })
    }
}

/// The two messages a summary becomes at the start of the history: where the summarised messages are, then
/// the summary itself.
pub fn summary_messages(summary: &Summary) -> [Message; 2] {
    let note = format!(
        "(Earlier conversation compacted: {} messages, ids {} to {}, are summarised below. They are still stored; \
         chat_history_info with a message_id shows one in full.)",
        summary.covered, summary.first_id, summary.through_id
    );
    [Message::User(note), Message::assistant_text(summary.text.clone())]
}

/// [`minibot_agent::compaction::rough_upper_tokens`] over several runs of messages, without joining them.
pub fn rough_total(parts: &[&[Message]]) -> u64 {
    parts.iter().map(|part| minibot_agent::compaction::rough_upper_tokens(part)).sum()
}

/// The tokens of several runs of messages (each counted with its own framing: a few tokens over the joined
/// count, never under).
pub fn count_total(parts: &[&[Message]], model: &str) -> u64 {
    parts.iter().map(|part| minibot_llm::count_tokens(part, &[], model)).sum()
}

/// The size of a turn's tool schemas: a bound that needs no tokenizer, and the count, made once when needed.
pub struct ToolSize {
    specs: Vec<minibot_llm::ToolSpec>,
    /// Half the bytes of the schemas, plus a little per tool.
    pub rough: u64,
    counted: Option<u64>,
}

impl ToolSize {
    pub fn new(specs: Vec<minibot_llm::ToolSpec>) -> Self {
        let bytes: usize = specs.iter().map(|t| t.name.len() + t.description.len() + json_len(&t.parameters)).sum();
        Self { rough: (bytes / 2 + specs.len() * 16) as u64, specs, counted: None }
    }

    pub fn tokens(&mut self, model: &str) -> u64 {
        *self.counted.get_or_insert_with(|| minibot_llm::count_tokens(&[], &self.specs, model))
    }
}

/// The length of `value` as compact JSON, counted without writing it out.
fn json_len(value: &serde_json::Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing into a counter cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// The tokens of `messages` for `model`, or a number below `limit` when they are clearly under it.
pub fn measure(messages: &[Message], model: &str, limit: u64) -> u64 {
    let rough = minibot_agent::compaction::rough_upper_tokens(messages);
    if rough < limit { rough } else { minibot_llm::count_tokens(messages, &[], model) }
}

/// A history cut to fit: the latest whole turns, and what was left out.
pub struct Fit {
    pub kept: Vec<Message>,
    /// How many messages were left out.
    pub dropped: usize,
    /// Their tokens, counted locally.
    pub dropped_tokens: u64,
}

/// The history cut to its latest whole turns so that, with `fixed` tokens of prompt beside it, it stays under
/// `limit`. A turn starts at a user message, so a tool call is never parted from its result. `counted` is the
/// provider's count of the whole request when known: when it is above the local count (another vendor's
/// tokenizer, what the provider adds), the local counts are scaled up to it, so the cut follows the provider's
/// measure.
pub fn fit_history(history: Vec<Message>, fixed: u64, limit: u64, model: &str, counted: Option<u64>) -> Fit {
    // Exact unless clearly under the limit (then it fits whatever the scale, which is only known with a count).
    let whole = fixed
        + match counted {
            Some(_) => minibot_llm::count_tokens(&history, &[], model),
            None => measure(&history, model, limit.saturating_sub(fixed)),
        };
    let scale = counted.map_or(1.0, |counted| (counted as f64 / whole.max(1) as f64).max(1.0));
    let fits = |tokens: u64| (tokens as f64 * scale) < limit as f64;
    if fits(whole) {
        return Fit { kept: history, dropped: 0, dropped_tokens: 0 };
    }
    // Each turn left out takes its own tokens off the whole: one pass, not a count of every suffix. A run of
    // messages counts its messages plus the reply's priming, which an empty run counts alone.
    let priming = minibot_llm::count_tokens(&[], &[], model);
    let starts: Vec<usize> =
        history.iter().enumerate().filter(|(_, m)| matches!(m, Message::User(_))).map(|(i, _)| i).collect();
    let mut rest = whole;
    let mut from = 0;
    for start in starts.into_iter().skip(1) {
        rest = rest.saturating_sub(minibot_llm::count_tokens(&history[from..start], &[], model) - priming);
        from = start;
        if fits(rest) {
            return Fit {
                kept: history.into_iter().skip(start).collect(),
                dropped: start,
                dropped_tokens: whole - rest,
            };
        }
    }
    Fit { dropped: history.len(), kept: Vec::new(), dropped_tokens: whole - fixed }
}

/// What the chat reads when a turn's own work was compacted inside the turn, per
/// `[memory] notify_compaction_updates`; a failure is told whatever the setting.
pub fn in_turn_notice(outcome: &CompactionOutcome, notify: NotifyCompaction) -> Option<String> {
    match (outcome, notify) {
        (CompactionOutcome::Summarised { .. }, NotifyCompaction::Off) => None,
        (CompactionOutcome::Summarised { .. }, NotifyCompaction::Brief) => {
            Some(format!("{DONE_NOTICE} (this turn's work outgrew the model)"))
        }
        (CompactionOutcome::Summarised { summary, .. }, NotifyCompaction::Full) => {
            Some(format!("{DONE_NOTICE} (this turn's work outgrew the model)\n\n{summary}"))
        }
        (CompactionOutcome::Failed { shortened, .. }, _) => Some(format!(
            "error compacting: {shortened} earlier tool results of this turn were shortened to fit the model"
        )),
    }
}

/// A compaction to run after a turn.
pub struct Job {
    pub session: String,
    pub channel: String,
    pub chat_id: i64,
    pub model: SessionModel,
    /// The history's size now, for the log.
    pub tokens: u64,
    pub limits: Limits,
}

/// What a compaction did, for the chat's notices.
pub enum Done {
    Summarised(Summary),
    Failed(String),
}

impl Job {
    /// Summarises the session's history after its latest summary (that summary included) and stores the
    /// result. The reply to the turn was sent before this runs; the chat's next turn waits for it.
    pub async fn run(&self, rt: &Runtime) -> Done {
        match self.summarise(rt).await {
            Ok(summary) => {
                tracing::info!(session = %self.session, tokens = self.tokens, covered = summary.covered,
                    through_id = summary.through_id, "compacted the chat's history");
                Done::Summarised(summary)
            }
            Err(error) => {
                tracing::warn!(session = %self.session, tokens = self.tokens, error = %error,
                    "cannot compact the chat's history; its latest messages go to the model until a summary succeeds");
                Done::Failed(error)
            }
        }
    }

    async fn summarise(&self, rt: &Runtime) -> Result<Summary, String> {
        let earlier = rt.store.latest_summary(&self.session).await.map_err(|e| e.to_string())?;
        let through = earlier.as_ref().map_or(i64::MIN, |s| s.through_id);
        let rows = rt.store.history_after(&self.session, through).await.map_err(|e| e.to_string())?;
        let Some(last) = rows.last().map(|row| row.id) else { return Err("nothing to compact".into()) };
        // Full tool results: the summary model gets what happened, not the previews the chat model gets.
        let messages = crate::transcript::history_messages_whole(rows);
        let compactor = Compactor::for_model(
            self.model.provider.as_ref(),
            &self.model.settings,
            rt.compact_prompt(),
            self.limits.hard_limit,
        );
        let text = compactor
            .summarize(earlier.as_ref().map(|s| s.text.as_str()), &messages)
            .await
            .map_err(|e| e.to_string())?;
        rt.store.add_summary(&self.session, last, &text).await.map_err(|e| e.to_string())
    }

    /// The notice that goes before the summary starts, per `[memory] notify_compaction_updates`.
    pub fn running_notice(&self, notify: NotifyCompaction) -> Option<Outbound> {
        (notify != NotifyCompaction::Off).then(|| self.notice(RUNNING_NOTICE.to_string()))
    }

    /// The notices after it: done (with the summary when `full`), or the error, which is told once per chat
    /// even when notices are off, since the model then sees only the latest messages.
    pub fn done_notices(&self, done: &Done, notify: NotifyCompaction, error_told: bool) -> Vec<Outbound> {
        match (done, notify) {
            (Done::Summarised(_), NotifyCompaction::Off) => Vec::new(),
            (Done::Summarised(_), NotifyCompaction::Brief) => vec![self.notice(DONE_NOTICE.to_string())],
            (Done::Summarised(summary), NotifyCompaction::Full) => {
                vec![self.notice(format!("{DONE_NOTICE}\n\n{}", summary.text))]
            }
            (Done::Failed(_), _) if error_told => Vec::new(),
            (Done::Failed(_), _) => vec![self.notice(ERROR_NOTICE.to_string())],
        }
    }

    fn notice(&self, text: String) -> Outbound {
        Outbound::text(&self.channel, self.chat_id, text, OutboundRole::Progress)
    }
}
