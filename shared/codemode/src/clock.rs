//! The script's clock: wall-clock time, nested calls included, that stops while any nested call waits for the
//! owner's approval (the `[tools.approval]` gate or the safety classifier asking), so a slow decision never ends
//! a script; the approval's own timeout bounds that wait.

use minibot_agent::{ApprovalDecision, ApprovalPrompt, ApprovalRequest, Approver};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Time a script has used, against its budget.
#[derive(Debug)]
pub struct ScriptClock {
    budget: Duration,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// Time counted before the current running stretch.
    used: Duration,
    /// When the clock last started running; `None` while stopped.
    since: Option<Instant>,
    /// Approvals pending now.
    waits: u32,
}

impl ScriptClock {
    /// A clock that starts running now.
    pub fn start(budget: Duration) -> Arc<Self> {
        Arc::new(Self {
            budget,
            state: Mutex::new(State { used: Duration::ZERO, since: Some(Instant::now()), waits: 0 }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn elapsed(&self) -> Duration {
        let state = self.lock();
        state.used + state.since.map_or(Duration::ZERO, |since| since.elapsed())
    }

    /// What is left of the budget.
    pub fn remaining(&self) -> Duration {
        self.budget.saturating_sub(self.elapsed())
    }

    pub fn budget(&self) -> Duration {
        self.budget
    }

    /// Whether an approval is pending (the clock stands still).
    pub fn stopped(&self) -> bool {
        self.lock().waits > 0
    }

    /// Stops the clock until the returned guard drops.
    pub fn pause(self: &Arc<Self>) -> Paused {
        let mut state = self.lock();
        state.waits += 1;
        if let Some(since) = state.since.take() {
            state.used += since.elapsed();
        }
        Paused(Arc::clone(self))
    }

    /// `approver` with the clock stopped while it asks.
    pub fn pausing(self: &Arc<Self>, approver: Approver) -> Approver {
        // A little longer than the original's own limit, so its answer ("nobody answered…") is the one given.
        let timeout = approver.timeout() + Duration::from_secs(1);
        Approver::new(Arc::new(PausingPrompt { inner: approver, clock: Arc::clone(self) }), timeout)
    }
}

/// The clock stays stopped while this lives.
pub struct Paused(Arc<ScriptClock>);

impl Drop for Paused {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.waits = state.waits.saturating_sub(1);
        if state.waits == 0 && state.since.is_none() {
            state.since = Some(Instant::now());
        }
    }
}

struct PausingPrompt {
    inner: Approver,
    clock: Arc<ScriptClock>,
}

impl ApprovalPrompt for PausingPrompt {
    fn ask(&self, request: ApprovalRequest) -> futures_util::future::BoxFuture<'_, ApprovalDecision> {
        Box::pin(async move {
            let _paused = self.clock.pause();
            self.inner.ask(request).await
        })
    }
}
