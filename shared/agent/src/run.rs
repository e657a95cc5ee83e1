//! The agent loop: ask the model, run the tools it asks for, feed the results back, until it answers or a
//! limit or guard stops it. Plain async code with no actor types, so the orchestrator and the worker share it.

use crate::approval::APPROVAL_DENIED_CODE;
use crate::approval_gate::{ApprovalGate, is_denial};
use crate::compaction::RunCompaction;
use crate::directives::Directives;
use crate::guards::{parse_arguments, sha256_hex, unwrap_legacy_answer};
use crate::outcome::{AgentError, AgentEvent, AgentOutcome, ReplyKind, Steer, StopReason};
use crate::registry::ToolRegistry;
use crate::tool::{ToolContext, ToolError, cap_error_message, excerpt};
use minibot_llm::{ChatProvider, ChatRequest, Message, ToolCall, Usage};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedReceiver;

pub const MAX_STEPS_REPLY: &str = "I reached the maximum execution steps before finishing.";
pub const MAX_TOOL_CALLS_REPLY: &str = "I reached the maximum number of tool calls before finishing.";
pub const EMPTY_ANSWER_REPLY: &str = "I didn't get a response there. Could you try that again?";
pub const TIMEOUT_REPLY: &str = "I ran out of time before finishing this request.";
pub const REPEATED_ITERATION_REPLY: &str =
    "I stopped because I kept repeating the same tool calls with the same results.";
pub const TRUNCATED_REPLY: &str = "I stopped because my tool calls kept arriving incomplete. Please try again.";
const TEXT_TOOL_CALL_NUDGE: &str = "Please use the tool calling interface instead of embedding tool calls in text.";
/// What an answer cut at the answer-token limit is followed by (MiniBot's wording).
pub const CONTINUE_CUT_ANSWER: &str = "Continue exactly where you left off. Do not repeat.";
/// How many times one answer is continued after being cut: an answer that needs more is too long for a chat.
const MAX_ANSWER_CONTINUATIONS: u32 = 3;
/// Ends an answer that was still cut after its last continuation.
pub const STILL_CUT_NOTE: &str = "\n\n(Cut here: the answer reached the model's answer-token limit. Ask me to go on.)";
const MAX_TEXT_TOOL_CALL_NUDGES: u32 = 2;
const MAX_TRUNCATED_IN_A_ROW: u32 = 3;
const MAX_IDENTICAL_ITERATIONS: u32 = 3;

/// Step, call and time limits of one run. `None` is unlimited.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_steps: Option<u32>,
    pub max_tool_calls: Option<u32>,
    pub timeout: Duration,
}

/// The model settings a run sends with every request.
#[derive(Debug, Clone, Default)]
pub struct ModelSettings {
    pub model: String,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
    pub reasoning_effort: Option<String>,
}

/// What ties a run's requests together on the provider's side ([`minibot_llm::ChatRequest::cache_key`] and
/// [`minibot_llm::ChatRequest::chain_key`]).
#[derive(Debug, Clone, Default)]
pub struct RequestKeys {
    pub cache_key: Option<String>,
    pub chain_key: Option<String>,
}

/// Everything one run needs.
pub struct AgentRun<'a> {
    pub provider: &'a dyn ChatProvider,
    pub model: &'a ModelSettings,
    pub tools: &'a ToolRegistry,
    pub system_prompt: String,
    /// Earlier user/assistant messages of the conversation.
    pub history: Vec<Message>,
    pub user_message: String,
    pub limits: Limits,
    pub context: ToolContext,
    /// Which calls need the user's approval (`[tools.approval]`); `None` asks for none. Asking goes through
    /// `context.approver`.
    pub approvals: Option<&'a ApprovalGate>,
    /// Messages for this run that arrive while it works (steering). Read before every provider call.
    pub inbox: Option<&'a mut UnboundedReceiver<Steer>>,
    pub on_event: &'a (dyn Fn(AgentEvent) + Send + Sync),
    pub keys: RequestKeys,
    /// Keeps the conversation within the model's context as the run goes ([`RunCompaction`]); `None`: the run
    /// never compacts.
    pub compaction: Option<RunCompaction<'a>>,
    /// Stream the model's text: each piece is reported as [`AgentEvent::AnswerText`] as it arrives.
    pub stream: bool,
    /// The size of the system prompt, tools and `history` as the provider last counted them (the previous
    /// turn's [`AgentOutcome::context_tokens`]); `None` when unknown. With it the run's first size check adds
    /// only the new message instead of counting the whole history with a tokenizer.
    pub known_tokens: Option<u64>,
}

impl AgentRun<'_> {
    /// Runs to the end. The time limit is applied here; cancellation is the caller dropping the future.
    pub async fn run(self) -> Result<AgentOutcome, AgentError> {
        let started = Instant::now();
        let timeout = self.limits.timeout;
        let mut state = LoopState::default();
        // Outside the timed future, so a run that runs out of time still reports what it did.
        let mut messages = Vec::new();
        let turn_start = 1 + self.history.len();
        let result = tokio::time::timeout(timeout, self.steps(&mut state, &mut messages)).await;
        let (answer, stop_reason) = match result {
            Ok(Ok(done)) => done,
            Ok(Err(error)) => return Err(error),
            Err(_) => (TIMEOUT_REPLY.to_string(), StopReason::Timeout),
        };
        let context_tokens = state.context_tokens(&messages, &answer, stop_reason);
        state.messages = messages.split_off(turn_start.min(messages.len()));
        Ok(state.finish(answer, stop_reason, started, context_tokens))
    }

    async fn steps(
        mut self,
        state: &mut LoopState,
        messages: &mut Vec<Message>,
    ) -> Result<(String, StopReason), AgentError> {
        messages.reserve(self.history.len() + 2);
        messages.push(Message::System(std::mem::take(&mut self.system_prompt)));
        messages.append(&mut self.history);
        messages.push(Message::User(std::mem::take(&mut self.user_message)));
        let prompt_at = messages.len() - 1;
        let specs = self.tools.specs();
        if self.context.agent_tools.is_none() {
            self.context.agent_tools = Some(self.tools.names().into());
        }
        // What the last request carried, per the provider's usage, and how many messages it had: the size now is
        // that plus what was added since (counted locally), or all counted locally before the first usage. The
        // previous turn's count stands for everything before this turn's prompt.
        state.measured = self.known_tokens.filter(|tokens| *tokens > 0).map(|tokens| (tokens, prompt_at));
        loop {
            self.drain_inbox(messages, state);
            if let Some(compaction) = &self.compaction {
                let model = &self.model.model;
                let tokens = match state.measured {
                    Some((tokens, upto)) if upto <= messages.len() => {
                        let added = &messages[upto..];
                        if tokens + crate::compaction::rough_upper_tokens(added) < compaction.threshold_tokens {
                            tokens
                        } else {
                            tokens + minibot_llm::count_tokens(added, &[], model)
                        }
                    }
                    // Building the tokenizer costs a process about 150 ms the first time: not for a conversation
                    // that cannot be near the budget (a token is at least two bytes of text in practice).
                    _ if crate::compaction::rough_upper_tokens(messages) < compaction.threshold_tokens => 0,
                    _ => minibot_llm::count_tokens(messages, &specs, model),
                };
                if let Some(outcome) = compaction.fit(messages, prompt_at, tokens).await {
                    // The messages changed under the count, and what is stored of the turn is no longer what
                    // the model saw.
                    state.measured = None;
                    state.compacted = true;
                    (self.on_event)(AgentEvent::Compacted(outcome));
                }
            }
            if self.limits.max_steps.is_some_and(|max| state.steps >= max) {
                return Ok((MAX_STEPS_REPLY.into(), StopReason::MaxSteps));
            }
            state.steps += 1;
            // A continued answer goes on in the text the channels show: no new step for them.
            if !std::mem::take(&mut state.continuing) {
                (self.on_event)(AgentEvent::StepStarted { step: state.steps });
            }
            let request = ChatRequest {
                model: self.model.model.clone(),
                messages: messages.clone(),
                tools: specs.clone(),
                temperature: self.model.temperature,
                max_tokens: self.model.max_tokens,
                reasoning_effort: self.model.reasoning_effort.clone(),
                cache_key: self.keys.cache_key.clone(),
                chain_key: self.keys.chain_key.clone(),
            };
            let mut response = if self.stream {
                let on_event = self.on_event;
                let step = state.steps;
                let shown = |piece: &str| on_event(AgentEvent::AnswerText { step, text: piece.to_string() });
                self.provider.stream(&request, &shown).await?
            } else {
                self.provider.complete(&request).await?
            };
            unique_call_ids(&mut response.tool_calls, state.steps);
            state.usage += response.usage;
            let reported = response.usage.prompt_tokens + response.usage.completion_tokens;
            // The answer is appended below; counting it from the usage covers it. A count under what the request
            // plainly held is not trusted: the size is then counted locally.
            let plausible = reported > 0 && reported >= crate::compaction::rough_lower_tokens(messages);
            state.measured = plausible.then_some((reported, messages.len() + 1));

            if response.tool_calls.is_empty() {
                let text = unwrap_legacy_answer(response.content.as_deref().unwrap_or_default());
                // Cut at the answer-token limit: ask for the rest, and give the user the answer whole.
                let cut = response.finish_reason.as_deref() == Some("length") && !text.trim().is_empty();
                if cut && state.continuations < MAX_ANSWER_CONTINUATIONS {
                    state.continuations += 1;
                    state.continuing = true;
                    state.answer_so_far.push_str(&text);
                    messages.push(Message::assistant_text(text));
                    messages.push(Message::User(CONTINUE_CUT_ANSWER.into()));
                    continue;
                }
                if text.contains("<tool_call>") && state.text_tool_nudges < MAX_TEXT_TOOL_CALL_NUDGES {
                    state.text_tool_nudges += 1;
                    messages.push(Message::assistant_text(text));
                    messages.push(Message::User(TEXT_TOOL_CALL_NUDGE.into()));
                    continue;
                }
                let steps_left = self.limits.max_steps.is_none_or(|max| state.steps < max);
                if self.inbox_has_messages() && steps_left {
                    // The user added something while the model was writing: let it answer both.
                    messages.push(Message::assistant_text(text));
                    continue;
                }
                // The parts of a continued answer, then this one: the answer the channels streamed.
                let mut answer = std::mem::take(&mut state.answer_so_far) + &text;
                if answer.trim().is_empty() {
                    return Ok((EMPTY_ANSWER_REPLY.into(), StopReason::Completed));
                }
                if cut {
                    // Still cut after the last continuation: the user should know the end is missing. Shown
                    // where the text streamed too, so the channel sees the answer it streamed.
                    answer.push_str(STILL_CUT_NOTE);
                    if self.stream {
                        (self.on_event)(AgentEvent::AnswerText { step: state.steps, text: STILL_CUT_NOTE.into() });
                    }
                }
                return Ok((answer, StopReason::Completed));
            }

            messages.push(Message::Assistant {
                content: response.content.clone().filter(|c| !c.is_empty()),
                tool_calls: response.tool_calls.clone(),
                reasoning: response.reasoning.clone(),
                replay: response.replay.clone(),
            });
            let mut all_invalid = true;
            let mut fingerprint_parts: Vec<String> = Vec::new();
            let mut repeated_failure: Option<String> = None;
            // After a call the user did not approve, the rest of the response is not run: the calls were
            // planned together, and running them without the denied one could do what the user refused.
            let mut denied: Option<String> = None;
            for call in &response.tool_calls {
                if self.inbox_has_messages() {
                    let skipped = json!({ "ok": false, "skipped": true, "tool": call.name,
                        "reason": "A new message from the user arrived before this call ran; read it first." });
                    messages.push(tool_message(call, &skipped));
                    continue;
                }
                if let Some(denied) = &denied {
                    messages.push(tool_message(call, &skipped_after_denial(&call.name, denied)));
                    continue;
                }
                if self.limits.max_tool_calls.is_some_and(|max| state.tool_calls >= max) {
                    return Ok((MAX_TOOL_CALLS_REPLY.into(), StopReason::MaxToolCalls));
                }
                state.tool_calls += 1;
                let (result, parsed) = self.call_tool(call, state).await?;
                if parsed {
                    all_invalid = false;
                }
                if let Some(signature) = result.get("failure_signature").and_then(Value::as_str) {
                    let seen = state.failures.entry(signature.to_string()).or_insert(0);
                    *seen += 1;
                    if *seen >= 2 {
                        repeated_failure = Some(call.name.clone());
                    }
                }
                let result = state.directives.apply(&call.name, result, self.on_event).await;
                fingerprint_parts.push(format!("{}\u{1}{}\u{1}{}", call.name, call.arguments, result));
                if is_denial(&result) {
                    denied = Some(call.name.clone());
                }
                messages.push(tool_message(call, &result));
            }
            // After every tool result of the step: a user message in between would break the tool-call sequence.
            messages.append(&mut state.directives.take_inserts());
            if let Some(tool) = repeated_failure {
                messages.push(Message::User(format!(
                    "The tool `{tool}` just failed again with the same arguments. Do not repeat that call: \
                     change the arguments, use another tool, or tell the user what went wrong."
                )));
            }
            if all_invalid {
                state.truncated_in_a_row += 1;
                if state.truncated_in_a_row >= MAX_TRUNCATED_IN_A_ROW {
                    return Ok((TRUNCATED_REPLY.into(), StopReason::TruncatedToolCall));
                }
            } else {
                state.truncated_in_a_row = 0;
            }
            let parts: Vec<&str> = fingerprint_parts.iter().map(String::as_str).collect();
            let fingerprint = sha256_hex(&parts);
            if state.last_fingerprint.as_deref() == Some(fingerprint.as_str()) {
                state.identical_iterations += 1;
                if state.identical_iterations >= MAX_IDENTICAL_ITERATIONS {
                    return Ok((REPEATED_ITERATION_REPLY.into(), StopReason::RepeatedIteration));
                }
            } else {
                state.last_fingerprint = Some(fingerprint);
                state.identical_iterations = 1;
            }
        }
    }

    /// Runs one call; returns the result for the model and whether the arguments parsed.
    async fn call_tool(&self, call: &ToolCall, state: &mut LoopState) -> Result<(Value, bool), AgentError> {
        let args = match parse_arguments(&call.arguments) {
            Ok(args) => args,
            Err(reason) => {
                count_call(self.tools, &call.name, "error");
                let message = format!(
                    "{reason}. Your tool call was probably cut off; resend the complete call with all required arguments."
                );
                return Ok((error_result(&call.name, &call.arguments, "invalid_arguments", &message), false));
            }
        };
        let Some(tool) = self.tools.get(&call.name) else {
            count_call(self.tools, &call.name, "error");
            let message = format!(
                "tool {name} is not registered. If '{name}' is a shell/CLI command, run it with the `bash` tool \
                 instead; otherwise use one of the tools offered to you.",
                name = call.name
            );
            return Ok((error_result(&call.name, &call.arguments, "unknown_tool", &message), true));
        };
        // A tool that runs other tools (run_tools_script) reports their events through `nested`; they are passed
        // on while it runs, so a channel shows them as they happen.
        let (events, mut nested_events) = tokio::sync::mpsc::unbounded_channel();
        let nested = crate::nested::NestedCalls::new(self.approvals.cloned(), events);
        let context = ToolContext { call_id: call.id.clone(), nested: Some(nested), ..self.context.clone() };
        if let Some(gate) = self.approvals
            && let Err(denial) = gate.check(&call.name, &args, &context).await
        {
            count_call(self.tools, &call.name, "denied");
            let message = denial.to_string();
            return Ok((error_result(&call.name, &call.arguments, APPROVAL_DENIED_CODE, &message), true));
        }
        (self.on_event)(AgentEvent::ToolStarted {
            call_id: call.id.clone(),
            name: call.name.clone(),
            parent_call_id: None,
        });
        let started = Instant::now();
        let outcome = {
            let running = tool.call_json(args, &context);
            tokio::pin!(running);
            loop {
                tokio::select! {
                    outcome = &mut running => break outcome,
                    Some(event) = nested_events.recv() => (self.on_event)(event),
                }
            }
        };
        drop(context);
        while let Ok(event) = nested_events.try_recv() {
            (self.on_event)(event);
        }
        let ok = match &outcome {
            Ok(value) => value.get("ok") != Some(&Value::Bool(false)),
            Err(_) => false,
        };
        count_call(self.tools, &call.name, if ok { "ok" } else { "error" });
        (self.on_event)(AgentEvent::ToolFinished {
            call_id: call.id.clone(),
            name: call.name.clone(),
            ok,
            duration: started.elapsed(),
            parent_call_id: None,
        });
        state.tools_used.push(call.name.clone());
        match outcome {
            Ok(value) => {
                if call.name == "pre_response" {
                    state.note_pre_response(&value);
                }
                Ok((value, true))
            }
            Err(ToolError::RespondToModel { code, message }) => {
                Ok((error_result(&call.name, &call.arguments, &code, &message), true))
            }
            Err(ToolError::Fatal(message)) => Err(AgentError::FatalTool { tool: call.name.clone(), message }),
        }
    }

    fn inbox_has_messages(&self) -> bool {
        self.inbox.as_ref().is_some_and(|inbox| !inbox.is_empty())
    }

    fn drain_inbox(&mut self, messages: &mut Vec<Message>, state: &mut LoopState) {
        if let Some(inbox) = self.inbox.as_mut() {
            while let Ok(steer) = inbox.try_recv() {
                messages.push(Message::User(steer.text.clone()));
                state.steered.push(steer);
            }
        }
    }
}

/// Counts a call the loop answered (run, refused or not approved) for the process's metrics; a no-op without a
/// recorder, as in a worker. The model picks the name: one the registry does not hold counts as `unknown`, so
/// the label stays bounded.
fn count_call(tools: &ToolRegistry, name: &str, outcome: &'static str) {
    let tool = if tools.get(name).is_some() { name.to_string() } else { "unknown".to_string() };
    metrics::counter!("minibot_tool_calls_total", "tool" => tool, "outcome" => outcome).increment(1);
}

fn tool_message(call: &ToolCall, result: &Value) -> Message {
    Message::Tool { call_id: call.id.clone(), name: call.name.clone(), content: result.to_string() }
}

/// The result of a call that was not run because an earlier call of the same response was not approved.
fn skipped_after_denial(tool: &str, denied: &str) -> Value {
    json!({
        "ok": false,
        "skipped": true,
        "tool": tool,
        "error_code": "tool_approval:skipped",
        "reason": format!(
            "Not run: the user did not approve an earlier call of this response ({denied}), so its remaining calls \
             were skipped."
        ),
    })
}

/// The error result the model sees, with a signature so repeated identical failures can be spotted. Every
/// [`ToolError`] and refusal becomes a tool message here, so this is where error text is capped
/// ([`crate::MAX_ERROR_CHARS`]): a tool that quotes a 10 MB argument cannot make a 10 MB message. The signature is
/// taken over the whole text, so different failures stay different.
pub fn error_result(tool: &str, arguments: &str, code: &str, message: &str) -> Value {
    json!({
        "ok": false,
        "tool": excerpt(tool),
        "error_code": excerpt(code),
        "error": cap_error_message(message),
        "failure_signature": sha256_hex(&[tool, arguments, code, message]),
        "is_repeated_failure_candidate": true,
    })
}

/// Gives every call of one answer its own id: results are matched to calls by id, so two calls with one id (a
/// provider's bug, or an empty id) would leave a call without its result in the history, which APIs refuse.
fn unique_call_ids(calls: &mut [ToolCall], step: u32) {
    let mut seen = std::collections::HashSet::new();
    for (index, call) in calls.iter_mut().enumerate() {
        if call.id.is_empty() || !seen.insert(call.id.clone()) {
            call.id = format!("call_{step}_{index}_{}", seen.len());
            seen.insert(call.id.clone());
        }
    }
}

#[derive(Default)]
struct LoopState {
    steps: u32,
    tool_calls: u32,
    usage: Usage,
    tools_used: Vec<String>,
    steered: Vec<Steer>,
    failures: HashMap<String, u32>,
    text_tool_nudges: u32,
    truncated_in_a_row: u32,
    last_fingerprint: Option<String>,
    identical_iterations: u32,
    reply_kind: ReplyKind,
    disable_link_preview: bool,
    directives: Directives,
    messages: Vec<Message>,
    /// The provider's count of the last request and its answer, and how many messages that covered.
    measured: Option<(u64, usize)>,
    /// The run's own work was compacted: its messages are not what the model last saw.
    compacted: bool,
    /// An answer cut at the answer-token limit, so far, and how many times it was continued.
    answer_so_far: String,
    continuations: u32,
    /// The next step continues a cut answer.
    continuing: bool,
}

impl LoopState {
    fn note_pre_response(&mut self, value: &Value) {
        self.reply_kind = match value.get("kind").and_then(Value::as_str) {
            Some("text") => ReplyKind::Text,
            Some("html") => ReplyKind::Html,
            _ => ReplyKind::Markdown,
        };
        self.disable_link_preview =
            value.pointer("/meta/disable_link_preview").and_then(Value::as_bool).unwrap_or(false);
    }

    /// What the next turn starts from: the provider's count of the last request and its answer, plus a bound
    /// on what came after it (tool results of a run stopped mid-step, a canned reply). `None` without a count,
    /// or when the run compacted its own work.
    fn context_tokens(&self, messages: &[Message], answer: &str, stop_reason: StopReason) -> Option<u64> {
        let (tokens, upto) = self.measured.filter(|_| !self.compacted)?;
        let after = crate::compaction::rough_upper_tokens(messages.get(upto.min(messages.len())..).unwrap_or_default());
        // A completed run's answer is the last response, counted in the usage.
        let reply = match stop_reason {
            StopReason::Completed => 0,
            _ => crate::compaction::rough_upper_tokens(&[Message::assistant_text(answer)]),
        };
        Some(tokens + after + reply)
    }

    fn finish(
        &mut self,
        answer: String,
        stop_reason: StopReason,
        started: Instant,
        context_tokens: Option<u64>,
    ) -> AgentOutcome {
        AgentOutcome {
            answer,
            stop_reason,
            reply_kind: self.reply_kind,
            disable_link_preview: self.disable_link_preview,
            usage: self.usage,
            steps: self.steps,
            tool_calls: self.tool_calls,
            tools_used: std::mem::take(&mut self.tools_used),
            steered: std::mem::take(&mut self.steered),
            attachments: self.directives.take_attachments(),
            messages: std::mem::take(&mut self.messages),
            elapsed: started.elapsed(),
            context_tokens,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_results_are_capped_whatever_the_tool_said() {
        let huge = "x".repeat(10_000_000);
        let result = error_result(&huge, "{}", "broken", &huge);
        let text = result.to_string();
        assert!(text.len() < crate::MAX_ERROR_CHARS + 500, "{} bytes", text.len());
        assert!(result["error"].as_str().is_some_and(|e| e.ends_with("(9998000 more characters of this error cut)")));
        assert_ne!(
            result["failure_signature"],
            error_result(&huge, "{}", "broken", &format!("{huge}y"))["failure_signature"],
            "the signature covers the whole message"
        );
    }
}
