//! The async side of a script: runs the tool calls the script's thread hands over, all at once as they come, and
//! answers the thread when it waits, or tells it the time is up. Dropping [`serve`]'s future cancels the calls
//! still running.

use crate::catalog::Catalog;
use crate::clock::ScriptClock;
use crate::protocol::{CallOutcome, Ending, Reply, Request};
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use futures_util::stream::FuturesUnordered;
use minibot_agent::{NestedCalls, ToolContext};
use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;

/// How often a wait looks at the clock again while an approval holds it still.
const STOPPED_CLOCK_POLL: Duration = Duration::from_millis(20);

/// Everything the calls of one script share.
pub struct Host {
    pub catalog: Arc<Catalog>,
    pub clock: Arc<ScriptClock>,
    pub nested: NestedCalls,
    /// The `run_tools_script` call's context, with the clock-stopping approver.
    pub context: ToolContext,
}

/// Serves the script's thread until it reports its end; `None` when the thread stopped without one.
pub async fn serve(host: Host, mut requests: UnboundedReceiver<Request>, replies: Sender<Reply>) -> Option<Ending> {
    let host = Arc::new(host);
    let mut running: FuturesUnordered<BoxFuture<'static, (u32, CallOutcome)>> = FuturesUnordered::new();
    let mut done: Vec<(u32, CallOutcome)> = Vec::new();
    let mut waiting = false;
    loop {
        let pause = if host.clock.stopped() { STOPPED_CLOCK_POLL } else { host.clock.remaining() };
        tokio::select! {
            request = requests.recv() => match request? {
                Request::Start { id, entry, args } => running.push(call(Arc::clone(&host), id, entry, args)),
                Request::Wait => waiting = true,
                Request::Finished(ending) => return Some(ending),
            },
            Some(outcome) = running.next(), if !running.is_empty() => done.push(outcome),
            () = tokio::time::sleep(pause), if waiting && !running.is_empty() => {}
        }
        if !waiting {
            continue;
        }
        let reply = if !done.is_empty() {
            // Whatever else finished meanwhile goes along.
            while let Some(Some(outcome)) = futures_util::FutureExt::now_or_never(running.next()) {
                done.push(outcome);
            }
            Reply::Resolved(std::mem::take(&mut done))
        } else if running.is_empty() {
            Reply::Idle
        } else if host.clock.remaining().is_zero() && !host.clock.stopped() {
            Reply::Timeout
        } else {
            continue;
        };
        waiting = false;
        if replies.send(reply).is_err() {
            return None;
        }
    }
}

fn call(host: Arc<Host>, id: u32, entry: usize, args: serde_json::Value) -> BoxFuture<'static, (u32, CallOutcome)> {
    Box::pin(async move {
        let Some(entry) = host.catalog.entries().get(entry) else {
            return (id, Err(minibot_agent::ToolError::Fatal("unknown tool".into())));
        };
        let call_id = format!("{}:{id}", host.context.call_id);
        let outcome = host.nested.call(entry.tool.as_ref(), args, call_id, &host.context).await;
        (id, outcome)
    })
}
