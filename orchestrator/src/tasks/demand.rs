//! What the task service and the local worker slots share: the service announces submitted tasks and learns
//! whether worker processes are about to start; the slots wait for submissions and count their live workers.
//! Its own module so that the hub and the slots depend on it, not on each other.

use std::sync::atomic::{AtomicU32, Ordering};
use tokio::sync::watch;

/// What the task service and the worker slots tell each other: a submitted task wakes the slots that have no
/// worker, and the service learns whether workers are about to start (an empty roster is then no verdict).
pub struct Demand {
    /// Counts submitted tasks; a slot without a worker waits for it to change.
    submitted: watch::Sender<u64>,
    /// Slots this process supervises, and how many of them have a worker process now.
    slots: AtomicU32,
    running: AtomicU32,
}

impl Default for Demand {
    fn default() -> Self {
        Self { submitted: watch::Sender::new(0), slots: AtomicU32::new(0), running: AtomicU32::new(0) }
    }
}

impl Demand {
    /// Notes a submitted task; true when it starts local worker processes (a slot has none now).
    pub fn task_submitted(&self) -> bool {
        self.submitted.send_modify(|count| *count = count.wrapping_add(1));
        let slots = self.slots.load(Ordering::SeqCst);
        slots > 0 && self.running.load(Ordering::SeqCst) < slots
    }
}

impl Demand {
    /// How many slots this process supervises (none: no local workers).
    pub(super) fn set_slots(&self, slots: u32) {
        self.slots.store(slots, Ordering::SeqCst);
    }

    /// Wakes on every submitted task.
    pub(super) fn subscribe(&self) -> watch::Receiver<u64> {
        self.submitted.subscribe()
    }
}

/// Counts a live worker process for as long as it is held.
pub(super) struct Running<'a>(&'a Demand);

impl<'a> Running<'a> {
    pub(super) fn count(demand: &'a Demand) -> Self {
        demand.running.fetch_add(1, Ordering::SeqCst);
        Self(demand)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::SeqCst);
    }
}
