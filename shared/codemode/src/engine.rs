//! The script's side, in the script's own process ([`crate::child`]): runs Monty from suspension to suspension.
//! Name lookups, the helpers and refused OS calls are answered here; a tool call is handed to the parent over the
//! [`Pipe`] and the script goes on with a pending future, so calls the script gathers run at the same time.

use crate::catalog::ScriptTools;
use crate::child::Pipe;
use crate::convert::{to_argument, to_python, to_result};
use crate::output::{Printed, cut};
use crate::protocol::{CallOutcome, Ending, Failure, FailureCode, Reply, Request, TOOL_CALL_LIMIT};
use minibot_agent::APPROVAL_DENIED_CODE;
use monty::{FunctionCall, MontyRun, NameLookup, ResolveFutures, RunProgress};
use monty_types::{
    CompileOptions, DictPairs, ExcType, ExtFunctionResult, MontyClassInstance, MontyClassType, MontyException,
    MontyObject, MontyUuid, NameLookupResult, PrintWriter, ResourceLimits, ResourceTracker,
};
use std::collections::HashMap;
use std::time::Duration;

/// How a reference to a tool that was read without being called (`f = tools.x`) is named; calling it names it.
const TOOL_PREFIX: &str = "tools.";
/// What an OS call (a file, the environment, the clock) is answered with.
const NO_OS: &str = "scripts have no file system, network, environment or clock of their own; use the tools";
/// The longest error text (a traceback) a failed script reports.
const MAX_ERROR_CHARS: usize = 4_000;

/// One script to run, and its limits.
pub struct Script {
    pub code: String,
    pub catalog: ScriptTools,
    /// The whole time budget, for the error text; the pipe knows what is left.
    pub budget: Duration,
    pub max_tool_calls: u32,
    pub max_memory: usize,
    pub max_output_chars: usize,
}

/// Runs `script` to its end and reports it with [`Request::Finished`].
pub fn run(script: &Script, pipe: &mut Pipe) {
    let mut printed = Printed::new(script.max_output_chars);
    let mut session = Session { script, pipe, state: State::default() };
    let result = session.execute(&mut printed);
    let State { tool_errors, tool_errors_omitted, unknown, .. } = session.state;
    let output = printed.finish();
    let _ = pipe.send(&Request::Finished(Ending { output, result, tool_errors, tool_errors_omitted, unknown }));
}

/// Failed nested calls listed in the result and logged, at most: a script looping on a refused call must not
/// flood the model's context or rotate the logs away.
const MAX_TOOL_ERRORS: usize = 20;

impl State {
    /// Notes a failed nested call: listed up to [`MAX_TOOL_ERRORS`], counted past it.
    fn note_error(&mut self, tool: String, code: String) {
        if self.tool_errors.len() < MAX_TOOL_ERRORS {
            self.tool_errors.push((tool, code));
        } else {
            self.tool_errors_omitted += 1;
        }
    }
}

#[derive(Default)]
struct State {
    calls: u32,
    /// The tool name of each call in flight, by Monty's call id.
    in_flight: HashMap<u32, String>,
    /// Outcomes received but not yet handed to the script (Monty takes only those it waits for).
    done: HashMap<u32, CallOutcome>,
    tool_errors: Vec<(String, String)>,
    /// Failed nested calls past [`MAX_TOOL_ERRORS`]: counted, neither listed nor logged.
    tool_errors_omitted: usize,
    unknown: Vec<String>,
    /// Denial messages handed to the script as `PermissionError`.
    denials: Vec<String>,
    /// The host said the time is up.
    timed_out: bool,
}

struct Session<'a> {
    script: &'a Script,
    pipe: &'a mut Pipe,
    state: State,
}

impl Session<'_> {
    fn execute(&mut self, printed: &mut Printed) -> Result<serde_json::Value, Failure> {
        let runner =
            MontyRun::new(self.script.code.clone(), "script.py", vec!["tools".into()], CompileOptions::default())
                .map_err(|exc| Failure { code: FailureCode::Syntax, error: shorten(&exc.to_string()) })?;
        let limits = ResourceLimits::default()
            .max_duration(self.pipe.remaining().max(Duration::from_millis(1)))
            .max_memory(self.script.max_memory);
        let mut progress =
            runner.start(vec![tools_object()], ResourceTracker::new(limits), PrintWriter::Callback(printed));
        loop {
            let step = match progress {
                Ok(step) => step,
                Err(exc) => return Err(self.failure(exc)),
            };
            progress = match step {
                RunProgress::Complete(value) => return Ok(self.final_value(value)),
                RunProgress::NameLookup(lookup) => self.lookup(lookup, printed),
                RunProgress::FunctionCall(call) => self.function_call(call, printed),
                RunProgress::OsCall(call) => call.resume(
                    MontyException::new(ExcType::PermissionError, Some(NO_OS.into())),
                    PrintWriter::Callback(printed),
                ),
                RunProgress::ResolveFutures(waiting) => self.resolve(waiting, printed),
            };
        }
    }

    /// `tools.x` read without a call, or a global name the script did not define.
    fn lookup(&mut self, lookup: NameLookup, printed: &mut Printed) -> Result<RunProgress, MontyException> {
        let name = lookup.name.clone();
        let answer = if lookup.object_id().is_some() {
            match self.script.catalog.find(&name) {
                Some(entry) => NameLookupResult::Value(MontyObject::Function {
                    name: format!("{TOOL_PREFIX}{}", entry.ident),
                    docstring: Some(entry.summary()),
                }),
                None => {
                    if self.state.unknown.len() < MAX_TOOL_ERRORS {
                        self.state.unknown.push(name);
                    }
                    NameLookupResult::Undefined
                }
            }
        } else if crate::helpers::HELPERS.contains(&name.as_str()) {
            NameLookupResult::Value(MontyObject::Function { name, docstring: None })
        } else {
            self.note_bare_tool(&name);
            NameLookupResult::Undefined
        };
        lookup.resume(answer, PrintWriter::Callback(printed))
    }

    fn function_call(&mut self, mut call: FunctionCall, printed: &mut Printed) -> Result<RunProgress, MontyException> {
        // The interpreter's own clock counts only its computing; this gives it what is left of the script's time,
        // tool calls included, so a loop after a long call still ends in time.
        call.tracker_mut().set_max_duration(self.pipe.remaining().max(Duration::from_millis(1)));
        let tool = match (&call.object_id, call.function_name.strip_prefix(TOOL_PREFIX)) {
            (Some(_), _) => Some(call.function_name.clone()),
            (None, Some(ident)) => Some(ident.to_string()),
            (None, None) => None,
        };
        if let Some(ident) = tool {
            return self.tool_call(call, &ident, printed);
        }
        let args = std::mem::take(&mut call.args);
        let kwargs = std::mem::take(&mut call.kwargs);
        match crate::helpers::call(&self.script.catalog, &call.function_name, args, kwargs) {
            Some(Ok(value)) => call.resume(value, PrintWriter::Callback(printed)),
            Some(Err(exc)) => call.resume(exc, PrintWriter::Callback(printed)),
            None => {
                self.note_bare_tool(&call.function_name);
                let name = call.function_name.clone();
                call.resume(ExtFunctionResult::NotFound(name), PrintWriter::Callback(printed))
            }
        }
    }

    fn tool_call(
        &mut self,
        mut call: FunctionCall,
        ident: &str,
        printed: &mut Printed,
    ) -> Result<RunProgress, MontyException> {
        let script = self.script;
        let catalog = &script.catalog;
        let Some(index) = catalog.entries().iter().position(|entry| entry.ident == ident) else {
            if self.state.unknown.len() < MAX_TOOL_ERRORS {
                self.state.unknown.push(ident.to_string());
            }
            let message = format!("'tools' has no tool '{ident}'; list_tools() lists the tools a script can call");
            return call
                .resume(MontyException::new(ExcType::AttributeError, Some(message)), PrintWriter::Callback(printed));
        };
        let entry = &catalog.entries()[index];
        if !call.args.is_empty() {
            let message = format!("tools.{ident}() takes keyword arguments only: tools.{}", entry.signature);
            return call.resume(value_error(message), PrintWriter::Callback(printed));
        }
        let mut args = serde_json::Map::new();
        for (key, value) in std::mem::take(&mut call.kwargs) {
            let MontyObject::String(key) = key else {
                return call.resume(
                    value_error(format!("tools.{ident}(): keywords must be strings")),
                    PrintWriter::Callback(printed),
                );
            };
            match to_argument(value) {
                Ok(value) => {
                    args.insert(key, value);
                }
                Err(what) => {
                    let message = format!("tools.{ident}(): `{key}` is {what}, which a tool cannot take");
                    return call.resume(value_error(message), PrintWriter::Callback(printed));
                }
            }
        }
        self.state.calls += 1;
        if self.state.calls > self.script.max_tool_calls {
            self.state.note_error(entry.name.clone(), TOOL_CALL_LIMIT.into());
            let message = format!(
                "{TOOL_CALL_LIMIT}: this script already made {} tool calls, the most one script may make",
                self.script.max_tool_calls
            );
            return call.resume(value_error(message), PrintWriter::Callback(printed));
        }
        let start = Request::Start { id: call.call_id, entry: index, args: serde_json::Value::Object(args) };
        if !self.pipe.send(&start) {
            return call.abort(stopped(), PrintWriter::Callback(printed));
        }
        self.state.in_flight.insert(call.call_id, entry.name.clone());
        call.resume_pending(PrintWriter::Callback(printed))
    }

    /// Every task waits on tool calls: hands it the outcomes it waits for, waiting for the host when none is in.
    fn resolve(&mut self, waiting: ResolveFutures, printed: &mut Printed) -> Result<RunProgress, MontyException> {
        loop {
            let ready: Vec<u32> =
                waiting.pending_call_ids().iter().copied().filter(|id| self.state.done.contains_key(id)).collect();
            if !ready.is_empty() {
                let results = ready
                    .into_iter()
                    .filter_map(|id| self.state.done.remove(&id).map(|outcome| (id, self.deliver(id, outcome))))
                    .collect();
                return waiting.resume(results, PrintWriter::Callback(printed));
            }
            if !self.pipe.send(&Request::Wait) {
                return waiting.abort(stopped(), PrintWriter::Callback(printed));
            }
            match self.pipe.recv() {
                Some(Reply::Resolved(outcomes)) => self.state.done.extend(outcomes),
                Some(Reply::Idle) => {
                    let message = "the script waits for a call that is not running".to_string();
                    return waiting.abort(
                        MontyException::new(ExcType::RuntimeError, Some(message)),
                        PrintWriter::Callback(printed),
                    );
                }
                Some(Reply::Timeout) | None => {
                    self.state.timed_out = true;
                    return waiting.abort(stopped(), PrintWriter::Callback(printed));
                }
            }
        }
    }

    /// A call's outcome as the script receives it: the result, or the exception its failure raises.
    fn deliver(&mut self, id: u32, outcome: CallOutcome) -> ExtFunctionResult {
        let tool = self.state.in_flight.remove(&id).unwrap_or_default();
        match outcome {
            Ok(value) => ExtFunctionResult::Return(to_python(value)),
            Err(failure) => {
                let (code, message) = (failure.code, failure.message);
                let exc_type = match code.as_str() {
                    "invalid_arguments" => ExcType::ValueError,
                    APPROVAL_DENIED_CODE => {
                        self.state.denials.push(message.clone());
                        ExcType::PermissionError
                    }
                    _ => ExcType::RuntimeError,
                };
                let text = if exc_type == ExcType::PermissionError {
                    message
                } else {
                    format!("{tool} failed ({code}): {message}")
                };
                self.state.note_error(tool, code);
                ExtFunctionResult::Error(MontyException::new(exc_type, Some(text)))
            }
        }
    }

    /// Remembers a bare call of a tool's name (`bash(...)` for `tools.bash(...)`) for the hint.
    fn note_bare_tool(&mut self, name: &str) {
        if self.script.catalog.find(name).is_some() && self.state.unknown.len() < MAX_TOOL_ERRORS {
            self.state.unknown.push(name.to_string());
        }
    }

    /// The script's final value as JSON, cut to `max_output_chars` (as text then): it is cut here, in the
    /// script's process, so a value too large for memory ends this process only and a large one never crosses
    /// the pipe whole.
    fn final_value(&self, value: MontyObject) -> serde_json::Value {
        let value = to_result(value);
        let text = value.to_string();
        match cut(&text, self.script.max_output_chars) {
            Some(cut) => serde_json::Value::String(cut),
            None => value,
        }
    }

    fn failure(&self, exc: MontyException) -> Failure {
        let message = exc.message().unwrap_or_default();
        let code = match exc.exc_type() {
            ExcType::TimeoutError if self.state.timed_out || message.starts_with("time limit exceeded") => {
                FailureCode::Timeout
            }
            ExcType::MemoryError if message.starts_with("memory limit exceeded") => FailureCode::Memory,
            ExcType::PermissionError if self.state.denials.iter().any(|denial| denial == message) => {
                return Failure { code: FailureCode::Denied, error: message.to_string() };
            }
            _ => FailureCode::Script,
        };
        let error = match code {
            FailureCode::Timeout => format!(
                "the script ran out of time ({} s, tool calls included); calls still running were cancelled",
                self.script.budget.as_secs_f64()
            ),
            FailureCode::Memory => {
                format!("the script used more than its {} MiB of memory", self.script.max_memory / (1024 * 1024))
            }
            _ => shorten(&exc.to_string()),
        };
        Failure { code, error }
    }
}

/// The `tools` object: a host instance, so `tools.x(...)` comes to the host as a method call named `x`.
fn tools_object() -> MontyObject {
    MontyObject::ClassInstance(Box::new(MontyClassInstance {
        class_type: MontyClassType {
            name: "Tools".into(),
            id: MontyUuid::from_u128(0x6d69_6e69_626f_7400_0000_0000_0000_0001),
            host_defined: true,
            is_dataclass: false,
            attrs: DictPairs::default(),
        },
        instance_id: MontyUuid::from_u128(0x6d69_6e69_626f_7400_0000_0000_0000_0002),
        attrs: DictPairs::default(),
    }))
}

fn value_error(message: String) -> MontyException {
    MontyException::new(ExcType::ValueError, Some(message))
}

/// Ends the script where it waits: the time is up, or nobody waits for its answer any more.
fn stopped() -> MontyException {
    MontyException::new(ExcType::TimeoutError, Some("codemode:timeout".into()))
}

fn shorten(text: &str) -> String {
    cut(text, MAX_ERROR_CHARS).unwrap_or_else(|| text.to_string())
}
