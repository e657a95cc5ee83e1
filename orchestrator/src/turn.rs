//! One main-agent turn: load history, run the agent loop, store the turn, produce the reply.
//! Plain async code; the conversation actor owns scheduling, steering and cancellation.

use crate::channels::shown::ShownText;
use crate::compaction;
use crate::guardrail::{GUARDRAIL_REPLY, RETRY_SUFFIX};
use crate::messages::{
    ApprovalDecision, ApprovalRequest, AskApproval, ChannelHandle, Inbound, Outbound, OutboundFile, OutboundRole,
    PendingAnswer, Progress,
};
use crate::runtime::Runtime;
use crate::transcript;
use actix::Recipient;
use futures_util::future::BoxFuture;
use minibot_agent::{
    AgentError, AgentEvent, AgentRun, ApprovalPrompt, Approver, ReplyKind, RequestKeys, Steer, StopReason, ToolContext,
};
use minibot_llm::{LlmError, Message};
use std::sync::Arc;
use tokio::sync::mpsc::UnboundedReceiver;

pub struct TurnReport {
    pub reply: Outbound,
    /// Ids of the steered messages the turn read and answered; the others become the next turns. `None`: the
    /// turn failed, and its error reply answers every message steered into it.
    pub read: Option<Vec<String>>,
    /// The chat's history reached its model's budget: summarise it after the reply is sent.
    pub compaction: Option<crate::compaction::Job>,
}

pub async fn run_turn(
    rt: Arc<Runtime>,
    inbound: Inbound,
    mut inbox: UnboundedReceiver<Steer>,
    channel: ChannelHandle,
    shown: ShownText,
) -> TurnReport {
    let _active = rt.turn_started();
    let mut meter = TurnMeter::new(&inbound.channel);
    let session = inbound.session_id();
    let reply = |text: String, kind: ReplyKind, answers: Vec<String>, is_error: bool| Outbound {
        channel: inbound.channel.clone(),
        chat_id: inbound.chat_id,
        text,
        kind,
        answers,
        is_error,
        role: OutboundRole::Answer,
        task_id: inbound.source.as_ref().map(|s| s.task_id.clone()),
        task_handoff: rt.take_handoffs(&inbound.event_id),
        reply_to: inbound.message_id,
    };
    // The summary stands in for the messages it covers (they stay in the store): only those after it are read.
    let summary = rt.store.latest_summary(&session).await.unwrap_or_else(|error| {
        tracing::warn!(session = %session, error = %error, "cannot read the chat's summary; sending its history");
        None
    });
    let after = summary.as_ref().map_or(i64::MIN, |s| s.through_id);
    let history = match rt.store.history_after(&session, after).await {
        Ok(history) => history,
        Err(error) => {
            tracing::error!(session = %session, error = %error, "cannot read history");
            meter.outcome = "failed";
            let text = format!("Sorry, I couldn't answer right now: the history store failed ({error}).");
            return TurnReport {
                reply: reply(text, ReplyKind::Text, vec![inbound.event_id.clone()], true),
                read: None,
                compaction: None,
            };
        }
    };
    let (channel_name, chat_id, progress) = (inbound.channel.clone(), inbound.chat_id, channel.progress.clone());
    let files = channel.files.clone();
    let reply_to = inbound.message_id;
    let (notices, notify) = (channel.outbound.clone(), rt.config.memory.notify_compaction_updates);
    let on_event = move |event: AgentEvent| match event {
        // Delivered at once: the file reaches the chat while the turn goes on, before the answer that names it.
        AgentEvent::SendFile(file) => {
            if let Some(files) = &files {
                files.do_send(OutboundFile::new(&channel_name, chat_id, file));
            }
        }
        // The turn's own work outgrew the model and was summarised inside the turn.
        AgentEvent::Compacted(outcome) => {
            if let Some(text) = compaction::in_turn_notice(&outcome, notify) {
                notices.do_send(Outbound::text(&channel_name, chat_id, text, OutboundRole::Progress));
            }
        }
        // What is streamed is also kept for the conversation: a stopped turn is stored with what was shown.
        event => {
            shown.follow(&event);
            progress.do_send(Progress { channel: channel_name.clone(), chat_id, reply_to, event });
        }
    };
    let context = ToolContext {
        session_id: session.clone(),
        channel: inbound.channel.clone(),
        chat_id: Some(inbound.chat_id),
        user_id: inbound.user_id,
        owner_id: rt.config.runtime.owner_id.clone(),
        call_id: String::new(),
        turn_id: inbound.event_id.clone(),
        task_depth: inbound.source.as_ref().map_or(0, |s| s.depth),
        capabilities: minibot_agent::ChannelCapabilities {
            files: channel.capabilities.files && channel.files.is_some(),
            ..channel.capabilities
        },
        approver: channel.approvals.clone().map(|recipient| {
            let prompt = ChannelPrompt {
                recipient,
                channel: inbound.channel.clone(),
                chat_id: inbound.chat_id,
                requester: inbound.user_id,
            };
            Approver::new(Arc::new(prompt), rt.approval_timeout)
        }),
        // Filled in by the agent loop from the turn's tools.
        agent_tools: None,
        parent_call_id: None,
        nested: None,
    };
    let tools = rt.tools();
    let system_prompt = rt.system_prompt_for(&inbound.channel, &tools);
    // The chat may have switched models (`/model`); the turn keeps the one it started with.
    let model = rt.model_for(&session);
    let limits = compaction::Limits::for_model(&rt, &model);
    // The tools' schemas go with every request: they count against the budget like the history. Counted with
    // the tokenizer only when a cheap bound says the budget may be near.
    let mut tool_size = compaction::ToolSize::new(if limits.is_some() { tools.specs() } else { Vec::new() });
    // The provider's count of the previous turn's request (summary, history, tools and all), kept on its last row.
    let known = history.last().and_then(|row| row.context_tokens);
    let mut messages: Vec<Message> =
        summary.as_ref().map(compaction::summary_messages).map(Vec::from).unwrap_or_default();
    messages.extend(transcript::history_messages(history, tools.get(transcript::HISTORY_READER).is_some()));
    let history = messages;
    // Never more than the model takes: a history that a failed compaction left too long goes in part.
    let (history, dropped, dropped_tokens) = match limits {
        Some(limits) => {
            let prompt = [Message::System(system_prompt.clone()), Message::User(inbound.text.clone())];
            let model_name = &model.settings.model;
            let question = minibot_agent::compaction::rough_upper_tokens(&prompt[1..]);
            let fits = known.is_some_and(|known| known + question < limits.hard_limit)
                || compaction::rough_total(&[&prompt, &history]) + tool_size.rough < limits.hard_limit;
            let fit = if fits {
                compaction::Fit { kept: history, dropped: 0, dropped_tokens: 0 }
            } else {
                let fixed = minibot_llm::count_tokens(&prompt, &[], model_name) + tool_size.tokens(model_name);
                compaction::fit_history(history, fixed, limits.hard_limit, model_name, known.map(|k| k + question))
            };
            if fit.dropped > 0 {
                tracing::warn!(session = %session, dropped = fit.dropped, "history over the model's limit; sending its latest turns");
            }
            (fit.kept, fit.dropped, fit.dropped_tokens)
        }
        None => (history, 0, 0),
    };
    // A count of the whole history does not describe a part of it.
    let known = known.filter(|_| dropped == 0);
    // MiniBot's Responses cache key: one per user (or chat), so a user's turns share the cached prefix.
    let keys = RequestKeys {
        cache_key: Some(format!("{}:{}", inbound.channel, inbound.user_id.unwrap_or(inbound.chat_id))),
        chain_key: rt.config.llm.main_chains().then(|| session.clone()),
    };
    let run = AgentRun {
        provider: model.provider.as_ref(),
        model: &model.settings,
        tools: &tools,
        system_prompt: system_prompt.clone(),
        history: history.clone(),
        user_message: inbound.text.clone(),
        limits: rt.limits,
        context: context.clone(),
        approvals: Some(&rt.approvals),
        inbox: Some(&mut inbox),
        on_event: &on_event,
        keys: keys.clone(),
        // The channels show the answer as it is written (console, Telegram draft).
        stream: true,
        compaction: emergency_compaction(&rt, &model, limits),
        known_tokens: known,
    };
    let mut result = run.run().await;
    if let (Some(guard), Ok(first)) = (&rt.guardrail, &result)
        && first.tools_used.is_empty()
        && first.stop_reason == StopReason::Completed
        && !tools.is_empty()
        && guard.requires_tools(&inbound.text, &first.answer, &tools.names()).await
    {
        tracing::info!(session = %session, "answered without tools although tools were needed; running the turn again");
        let steered_first = first.steered.clone();
        let rerun = AgentRun {
            provider: model.provider.as_ref(),
            model: &model.settings,
            tools: &tools,
            system_prompt: format!("{system_prompt}\n\n{RETRY_SUFFIX}"),
            history: history.clone(),
            user_message: inbound.text.clone(),
            limits: rt.limits,
            context,
            approvals: Some(&rt.approvals),
            inbox: None,
            on_event: &on_event,
            keys,
            stream: true,
            compaction: None,
            known_tokens: known,
        };
        result = rerun.run().await.map(|mut again| {
            if again.tools_used.is_empty() {
                again.answer = GUARDRAIL_REPLY.into();
            }
            again.steered = steered_first;
            again
        });
    }
    meter.outcome = match &result {
        Ok(outcome) => TurnMeter::outcome_of(outcome.stop_reason),
        Err(_) => "failed",
    };
    match result {
        Ok(outcome) => {
            let model_name = &model.settings.model;
            // What the next request will carry (this turn's history plus what the turn added), measured here only
            // when the provider's count is missing or covers part of the history: roughly, or exactly.
            let next_tokens = |tool_size: &mut compaction::ToolSize, exact: bool| {
                let (system, answer) =
                    ([Message::System(system_prompt.clone())], [Message::assistant_text(outcome.answer.clone())]);
                let next: [&[Message]; 4] = [&system, &history, &outcome.messages, &answer];
                if exact {
                    compaction::count_total(&next, model_name) + tool_size.tokens(model_name)
                } else {
                    compaction::rough_total(&next) + tool_size.rough
                }
            };
            // The provider's count of the whole history and this turn, which the next turn starts from. When this
            // request left older turns out, they are added, counted locally and scaled as the provider's count of
            // what was sent compares with the local count of it.
            let whole_count = outcome.context_tokens.map(|sent| {
                if dropped == 0 {
                    return sent;
                }
                let local_sent = next_tokens(&mut tool_size, true);
                let scale = (sent as f64 / local_sent.max(1) as f64).max(1.0);
                sent + (dropped_tokens as f64 * scale).ceil() as u64
            });
            let mut entries = transcript::turn_messages(&inbound.text, &outcome);
            if let Some(last) = entries.last_mut() {
                last.context_tokens = whole_count;
            }
            let mut ids: Vec<&str> = vec![inbound.event_id.as_str()];
            ids.extend(outcome.steered.iter().map(|s| s.id.as_str()));
            let answers = ids.iter().map(|id| (*id).to_string()).collect();
            let reply = reply(outcome.answer.clone(), outcome.reply_kind, answers, false);
            // A channel that confirms delivery keeps the answer pending until it reached the user.
            let pending_answer =
                channel.confirms_delivery.then(|| serde_json::to_string(&PendingAnswer::of(&reply)).ok()).flatten();
            let stored = rt.store.store_turn(&session, &entries, &ids, pending_answer.as_deref()).await;
            if let Err(error) = &stored {
                tracing::error!(session = %session, error = %error, "cannot store the turn");
            }
            let compaction = limits.filter(|_| stored.is_ok()).and_then(|limits| {
                // The provider's count when it gave one; a tokenizer only when a cheap bound may reach the budget.
                let tokens = match whole_count {
                    Some(counted) => counted,
                    None => match next_tokens(&mut tool_size, false) {
                        rough if rough < limits.threshold => rough,
                        _ => next_tokens(&mut tool_size, true),
                    },
                };
                (tokens >= limits.threshold).then(|| compaction::Job {
                    session: session.clone(),
                    channel: inbound.channel.clone(),
                    chat_id: inbound.chat_id,
                    model: model.clone(),
                    tokens,
                    limits,
                })
            });
            tracing::info!(
                session = %session,
                stop_reason = outcome.stop_reason.as_str(),
                steps = outcome.steps,
                tool_calls = outcome.tool_calls,
                total_tokens = outcome.usage.total_tokens,
                elapsed_ms = outcome.elapsed.as_millis() as u64,
                "turn finished"
            );
            // `pre_response` attachments go before the answer: the answer is what ends a `--once` run.
            if let Some(files) = &channel.files {
                for file in outcome.attachments.iter().cloned() {
                    files.do_send(OutboundFile::new(&inbound.channel, inbound.chat_id, file));
                }
            }
            let read = outcome.steered.iter().map(|s| s.id.clone()).collect();
            TurnReport { reply, read: Some(read), compaction }
        }
        Err(error) => {
            tracing::error!(session = %session, error = %error, "turn failed");
            if let Err(e) = rt.store.clear_pending(&inbound.event_id).await {
                tracing::error!(error = %e, "cannot clear pending turn");
            }
            let log = rt.config.log_dir().join(crate::logging::LOG_FILE);
            let text = format!("{} Details in {}.", error_reply(&error, rt.verbose_errors), log.display());
            TurnReport {
                reply: reply(text, ReplyKind::Text, vec![inbound.event_id.clone()], true),
                read: None,
                compaction: None,
            }
        }
    }
}

/// Counts the turn in `minibot_turns_total` when it ends, however it ends: a turn the user stops (or shutdown
/// drops) never returns, so the count is taken on drop and starts as `stopped`.
struct TurnMeter {
    channel: String,
    outcome: &'static str,
}

impl TurnMeter {
    fn new(channel: &str) -> Self {
        Self { channel: channel.to_string(), outcome: "stopped" }
    }

    /// `answered` when the model finished its answer, `timed_out` at the turn's time limit, `failed` when the
    /// provider did, `stopped` when a step, tool-call or repetition limit ended it first (the user still gets a
    /// reply saying so).
    fn outcome_of(reason: StopReason) -> &'static str {
        match reason {
            StopReason::Completed => "answered",
            StopReason::Timeout => "timed_out",
            StopReason::ProviderError => "failed",
            StopReason::MaxSteps
            | StopReason::MaxToolCalls
            | StopReason::Cancelled
            | StopReason::RepeatedToolFailure
            | StopReason::RepeatedIteration
            | StopReason::TruncatedToolCall => "stopped",
        }
    }
}

impl Drop for TurnMeter {
    fn drop(&mut self) {
        metrics::counter!("minibot_turns_total", "channel" => std::mem::take(&mut self.channel), "outcome" => self.outcome)
            .increment(1);
    }
}

/// Compaction inside the main agent's turn only as a last resort, at the model's hard limit: between turns
/// the history is kept under the budget, but one turn's own tool work can still outgrow the context.
fn emergency_compaction<'a>(
    rt: &'a Runtime,
    model: &'a crate::runtime::SessionModel,
    limits: Option<compaction::Limits>,
) -> Option<minibot_agent::compaction::RunCompaction<'a>> {
    let limits = limits?;
    Some(minibot_agent::compaction::RunCompaction {
        threshold_tokens: limits.hard_limit,
        hard_limit: Some(limits.hard_limit),
        compactor: minibot_agent::compaction::Compactor::for_model(
            model.provider.as_ref(),
            &model.settings,
            rt.compact_prompt(),
            limits.hard_limit,
        ),
    })
}

/// Asks the user of the turn's chat through its channel. Dropping the question (the turn stopped or the
/// approval timeout passed) withdraws it: the channel sees its answer channel close.
struct ChannelPrompt {
    recipient: Recipient<AskApproval>,
    channel: String,
    chat_id: i64,
    requester: Option<i64>,
}

impl ApprovalPrompt for ChannelPrompt {
    fn ask(&self, request: ApprovalRequest) -> BoxFuture<'_, ApprovalDecision> {
        let ask =
            AskApproval { channel: self.channel.clone(), chat_id: self.chat_id, requester: self.requester, request };
        Box::pin(async move {
            self.recipient.send(ask).await.unwrap_or_else(|_| {
                ApprovalDecision::Unavailable(format!("the {} channel stopped before it answered", self.channel))
            })
        })
    }
}

/// `scheme://host:port` of `url`, without user info, path or query: those can hold a key (Google's `?key=`).
fn origin(url: &str) -> String {
    reqwest::Url::parse(url).map_or_else(|_| "the configured address".into(), |url| url.origin().ascii_serialization())
}

/// What the user reads when a turn fails: what went wrong in a few words, never a key or a raw body unless
/// the log level is DEBUG.
pub fn error_reply(error: &AgentError, verbose: bool) -> String {
    if verbose {
        let detail: String = error.to_string().chars().take(400).collect();
        return format!("Sorry, I couldn't answer right now. {detail}");
    }
    let reason = match error {
        AgentError::Provider(llm) => match llm {
            LlmError::Quota { .. } => {
                return "⚠️ LLM provider out of credits or over its spending limit. Top up the account or switch \
                        provider."
                    .into();
            }
            LlmError::Connect { url, .. } => {
                return format!(
                    "Sorry, I couldn't answer right now: the model provider cannot be reached at {}.",
                    origin(url)
                );
            }
            LlmError::Timeout { .. } => "the model provider did not answer in time",
            LlmError::RateLimited { .. } => "the model provider is rate limiting requests; try again in a minute",
            LlmError::Server { .. } => "the model provider failed",
            LlmError::Unauthorized { key_source, .. } if key_source.starts_with(minibot_config::NO_KEY_SENT) => {
                "the model provider wants an API key, and none is configured"
            }
            LlmError::Unauthorized { .. } => "the model provider rejected the API key",
            LlmError::ContextLength(_) => "the conversation is too long for the model; trim the history",
            LlmError::BadRequest { .. } => "the model provider rejected the request",
            LlmError::ModelNotFound { .. } => "the model provider does not have the configured model",
            LlmError::InvalidResponse(_) | LlmError::EmptyResponse => {
                "the model provider sent a response that is not valid"
            }
            LlmError::Unsupported(_) => "the configured provider is not supported",
        },
        AgentError::FatalTool { .. } => "a tool failed",
    };
    format!("Sorry, I couldn't answer right now: {reason}.")
}
