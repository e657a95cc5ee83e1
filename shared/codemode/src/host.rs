//! The parent's side of a script: starts the script's process, runs the tool calls it hands over, all at once as
//! they come, answers it when it waits, and ends it. The process is killed when the script reports its end, at
//! the script's time limit (plus [`GRACE`] for the script to stop itself and keep its output), and when the
//! future is dropped (the turn was cancelled), which also cancels the calls still running.

use crate::catalog::Catalog;
use crate::clock::ScriptClock;
use crate::protocol::{CallOutcome, Ending, FailureCode, Reply, Request, Setup, ToChild, millis};
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use futures_util::stream::FuturesUnordered;
use minibot_agent::{NestedCalls, ToolContext};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// How often a wait looks at the clock again while an approval holds it still.
const STOPPED_CLOCK_POLL: Duration = Duration::from_millis(20);
/// How long past its time limit a script may take to stop itself (and report what it printed) before its process
/// is killed.
const GRACE: Duration = Duration::from_millis(800);
/// How long a process that stopped talking gets to exit before it is killed.
const EXIT_WAIT: Duration = Duration::from_secs(2);
/// The end of the child's stderr kept for the error text.
const STDERR_KEPT: usize = 2_000;
/// What Rust's allocator prints when an allocation fails (here: past the address-space cap) before aborting.
const ALLOCATION_FAILED: &str = "memory allocation of";

/// Everything the calls of one script share.
pub struct Host {
    pub catalog: Arc<Catalog>,
    pub clock: Arc<ScriptClock>,
    pub nested: NestedCalls,
    /// The `run_tools_script` call's context, with the clock-stopping approver.
    pub context: ToolContext,
}

/// How serving the child ended.
enum Served {
    Finished(Ending),
    /// The time limit and its grace passed.
    TimedOut,
    /// The child stopped talking, or said something it must not (a message over the size limit, say).
    Gone {
        why: String,
        memory: bool,
    },
}

/// Runs `setup` in a process of `program` and serves its tool calls until it ends.
pub async fn run(host: Host, program: &Path, setup: &Setup) -> Ending {
    let max_memory = setup.max_memory;
    let mut child = match Command::new(program)
        .arg(crate::child::CHILD_ARG)
        .arg(std::process::id().to_string())
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
    {
        Ok(child) => child,
        Err(error) => {
            return Ending::failed(FailureCode::Sandbox, format!("cannot start the script's process: {error}"));
        }
    };
    let (Some(mut stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Ending::failed(FailureCode::Sandbox, "the script's process has no pipes".into());
    };
    let stderr = tokio::spawn(tail(stderr));
    let served = match send(&mut stdin, setup).await {
        Ok(()) => {
            // A message may carry a tool's arguments, which the script builds within its memory.
            let limit = max_memory.saturating_mul(2).saturating_add(16 * 1024 * 1024);
            serve(&Arc::new(host), &mut stdin, BufReader::new(stdout), limit).await
        }
        Err(error) => Served::Gone { why: format!("cannot hand over the script: {error}"), memory: false },
    };
    match served {
        Served::Finished(ending) => {
            end(&mut child).await;
            ending
        }
        Served::TimedOut => {
            end(&mut child).await;
            Ending::failed(
                FailureCode::Timeout,
                "the script ran out of time and was stopped inside one step; what it printed is lost".into(),
            )
        }
        Served::Gone { why, memory } => {
            drop(stdin);
            let status = match tokio::time::timeout(EXIT_WAIT, child.wait()).await {
                Ok(Ok(status)) => Some(status),
                _ => {
                    end(&mut child).await;
                    None
                }
            };
            let stderr = stderr.await.unwrap_or_default();
            gone(&why, memory, status, &stderr, max_memory)
        }
    }
}

/// Kills the child and reaps it, so no process is left behind.
async fn end(child: &mut Child) {
    let _ = child.start_kill();
    let _ = child.wait().await;
}

/// The ending of a child that stopped without reporting one.
fn gone(why: &str, memory: bool, status: Option<ExitStatus>, stderr: &str, max_memory: usize) -> Ending {
    let signal = status.and_then(|status| status.signal());
    let out_of_memory = memory
        || stderr.contains(ALLOCATION_FAILED)
        // Nobody here sent SIGKILL: the kernel's out-of-memory killer did.
        || signal == Some(libc::SIGKILL);
    if out_of_memory {
        return Ending::failed(
            FailureCode::Memory,
            format!("the script used more than its {} MiB of memory and its process was stopped", max_memory >> 20),
        );
    }
    if signal == Some(libc::SIGXCPU) {
        return Ending::failed(FailureCode::Timeout, "the script used up its CPU time".into());
    }
    let how = match (signal, status.and_then(|status| status.code())) {
        (Some(signal), _) => format!("signal {signal}"),
        (None, Some(code)) => format!("exit code {code}"),
        (None, None) => "still running; killed".into(),
    };
    tracing::warn!(%why, %how, stderr = %stderr, "codemode: the script's process stopped without an end");
    let detail = if stderr.trim().is_empty() { String::new() } else { format!(": {}", stderr.trim()) };
    Ending::failed(FailureCode::Sandbox, format!("the script's interpreter stopped unexpectedly ({how}){detail}"))
}

async fn send<T: serde::Serialize>(stdin: &mut ChildStdin, message: &T) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(message).map_err(std::io::Error::other)?;
    line.push(b'\n');
    stdin.write_all(&line).await?;
    stdin.flush().await
}

/// Serves the child until it reports its end, stops, or runs out of time.
async fn serve(host: &Arc<Host>, stdin: &mut ChildStdin, mut stdout: BufReader<ChildStdout>, limit: usize) -> Served {
    let mut running: FuturesUnordered<BoxFuture<'static, (u32, CallOutcome)>> = FuturesUnordered::new();
    let mut done: Vec<(u32, CallOutcome)> = Vec::new();
    let mut held = Held::new(limit);
    let mut waiting = false;
    let mut expired: Option<Instant> = None;
    let mut line = Vec::new();
    loop {
        let pause = match expired {
            Some(at) => GRACE.saturating_sub(at.elapsed()),
            None if host.clock.stopped() => STOPPED_CLOCK_POLL,
            None => host.clock.remaining(),
        };
        tokio::select! {
            read = read_line(&mut stdout, &mut line, limit) => {
                let size = line.len();
                let request = match read {
                    Ok(true) => serde_json::from_slice::<Request>(&std::mem::take(&mut line)),
                    Ok(false) => return Served::Gone { why: "it closed its output".into(), memory: false },
                    Err(error) => return Served::Gone { why: error.to_string(), memory: error.kind() == LARGE },
                };
                match request {
                    Ok(Request::Start { id, entry, args }) => match held.admit(id, size) {
                        Err(refused) => done.push((id, Err(refused))),
                        Ok(()) if running.len() < MAX_RUNNING => running.push(call(Arc::clone(host), id, entry, args)),
                        Ok(()) => held.queue.push_back((id, entry, args)),
                    },
                    Ok(Request::Wait) => waiting = true,
                    Ok(Request::Finished(ending)) => {
                        log_failed_calls(&ending);
                        return Served::Finished(ending);
                    }
                    Err(error) => return Served::Gone { why: format!("unreadable message: {error}"), memory: false },
                }
            },
            Some(outcome) = running.next(), if !running.is_empty() => {
                held.release(outcome.0);
                if let Some((id, entry, args)) = held.queue.pop_front() {
                    running.push(call(Arc::clone(host), id, entry, args));
                }
                done.push(outcome);
            }
            () = tokio::time::sleep(pause) => {}
        }
        if expired.is_none() && host.clock.remaining().is_zero() && !host.clock.stopped() {
            expired = Some(Instant::now());
        }
        if expired.is_some_and(|at| at.elapsed() >= GRACE) {
            return Served::TimedOut;
        }
        if !waiting {
            continue;
        }
        let reply = if !done.is_empty() {
            // Whatever else finished meanwhile goes along.
            while let Some(Some(outcome)) = futures_util::FutureExt::now_or_never(running.next()) {
                held.release(outcome.0);
                if let Some((id, entry, args)) = held.queue.pop_front() {
                    running.push(call(Arc::clone(host), id, entry, args));
                }
                done.push(outcome);
            }
            Reply::Resolved(std::mem::take(&mut done))
        } else if running.is_empty() {
            Reply::Idle
        } else if expired.is_some() {
            Reply::Timeout
        } else {
            continue;
        };
        waiting = false;
        let message = ToChild { remaining_ms: millis(host.clock.remaining()), reply };
        if let Err(error) = send(stdin, &message).await {
            return Served::Gone { why: format!("cannot answer it: {error}"), memory: false };
        }
    }
}

/// Nested calls that run at once; the script's later calls wait for one of them to end. Enough for the
/// independent calls of a script to overlap, few enough that one script cannot start fifty sandboxes at once.
const MAX_RUNNING: usize = 8;

/// The arguments of the calls a script started and that have not ended (running or waiting to run), which the
/// assistant holds for it: at most the limit of one message, so the script cannot grow the assistant past what
/// it may hold itself.
struct Held {
    limit: usize,
    total: usize,
    sizes: std::collections::HashMap<u32, usize>,
    queue: std::collections::VecDeque<(u32, usize, serde_json::Value)>,
}

impl Held {
    fn new(limit: usize) -> Self {
        Self { limit, total: 0, sizes: std::collections::HashMap::new(), queue: std::collections::VecDeque::new() }
    }

    fn admit(&mut self, id: u32, size: usize) -> Result<(), crate::protocol::CallFailure> {
        if self.total.saturating_add(size) > self.limit {
            return Err(crate::protocol::CallFailure {
                code: "codemode:too_much_in_flight".into(),
                message: format!(
                    "the tool calls this script started and has not awaited hold more than {} MiB of arguments; \
                     await some before starting more",
                    self.limit >> 20
                ),
            });
        }
        self.total += size;
        self.sizes.insert(id, size);
        Ok(())
    }

    fn release(&mut self, id: u32) {
        self.total = self.total.saturating_sub(self.sizes.remove(&id).unwrap_or(0));
    }
}

/// The error kind of a message over the size limit.
const LARGE: std::io::ErrorKind = std::io::ErrorKind::OutOfMemory;

/// Reads one line into `line` (without its newline); `false` at the end of the output. Safe to cancel: what was
/// read stays in `line` for the next call.
async fn read_line(stdout: &mut BufReader<ChildStdout>, line: &mut Vec<u8>, limit: usize) -> std::io::Result<bool> {
    loop {
        let available = stdout.fill_buf().await?;
        if available.is_empty() {
            return Ok(false);
        }
        let (taken, complete) = match available.iter().position(|&byte| byte == b'\n') {
            Some(at) => (at + 1, true),
            None => (available.len(), false),
        };
        line.extend_from_slice(&available[..taken - usize::from(complete)]);
        stdout.consume(taken);
        if line.len() > limit {
            return Err(std::io::Error::new(LARGE, format!("it sent a message over {} MiB", limit >> 20)));
        }
        if complete {
            return Ok(true);
        }
    }
}

/// The last [`STDERR_KEPT`] characters the child wrote to stderr (read to its end, so the child never blocks).
async fn tail(mut stderr: impl AsyncRead + Unpin) -> String {
    let mut kept = Vec::new();
    let mut buffer = [0u8; 4096];
    while let Ok(read) = stderr.read(&mut buffer).await {
        if read == 0 {
            break;
        }
        kept.extend_from_slice(&buffer[..read]);
        if kept.len() > 2 * STDERR_KEPT {
            kept.drain(..kept.len() - STDERR_KEPT);
        }
    }
    let text = String::from_utf8_lossy(&kept);
    let chars = text.chars().count();
    text.chars().skip(chars.saturating_sub(STDERR_KEPT)).collect()
}

fn log_failed_calls(ending: &Ending) {
    for (tool, code) in &ending.tool_errors {
        tracing::warn!(tool = %tool, error_code = %code, "codemode: nested tool call failed");
    }
    if ending.tool_errors_omitted > 0 {
        tracing::warn!(omitted = ending.tool_errors_omitted, "codemode: more nested tool calls failed");
    }
}

fn call(host: Arc<Host>, id: u32, entry: usize, args: serde_json::Value) -> BoxFuture<'static, (u32, CallOutcome)> {
    Box::pin(async move {
        let Some(entry) = host.catalog.entries().get(entry) else {
            return (id, Err(minibot_agent::ToolError::Fatal("unknown tool".into()).into()));
        };
        let call_id = format!("{}:{id}", host.context.call_id);
        let outcome = host.nested.call(entry.tool.as_ref(), args, call_id, &host.context).await;
        (id, outcome.map_err(Into::into))
    })
}
