//! Bounded bookkeeping in memory: task ids remembered as cancelled, settled or finished, and the control
//! messages received on a connection, buffered per task until the worker asks for them.

use minibot_protocol::{ControlKind, ControlMessage};
use std::collections::{HashMap, HashSet, VecDeque};

/// Task ids remembered as cancelled, settled or finished.
const REMEMBERED_IDS: usize = 65_536;
/// Tasks whose control messages are buffered, and messages per task.
const BUFFERED_TASKS: usize = 4_096;
const BUFFERED_PER_TASK: usize = 64;

/// A set of ids that forgets the oldest beyond its capacity.
#[derive(Debug, Default)]
pub(super) struct Remembered {
    set: HashSet<String>,
    order: VecDeque<String>,
}

impl Remembered {
    pub(super) fn insert(&mut self, id: &str) {
        if self.set.insert(id.to_string()) {
            self.order.push_back(id.to_string());
            if self.order.len() > REMEMBERED_IDS
                && let Some(old) = self.order.pop_front()
            {
                self.set.remove(&old);
            }
        }
    }

    pub(super) fn contains(&self, id: &str) -> bool {
        self.set.contains(id)
    }
}

/// Control messages received on this connection, waiting for [`WorkQueue::controls`].
///
/// [`WorkQueue::controls`]: crate::WorkQueue::controls
#[derive(Debug, Default)]
pub(super) struct ControlBuffer {
    by_task: HashMap<String, VecDeque<ControlMessage>>,
    order: VecDeque<String>,
    pub(super) cancelled: Remembered,
}

impl ControlBuffer {
    pub(super) fn push(&mut self, message: ControlMessage) {
        if message.kind == ControlKind::Cancel {
            self.cancelled.insert(&message.task_id);
        }
        let task_id = message.task_id.clone();
        let queue = self.by_task.entry(task_id.clone()).or_insert_with(|| {
            self.order.push_back(task_id);
            VecDeque::new()
        });
        queue.push_back(message);
        if queue.len() > BUFFERED_PER_TASK {
            queue.pop_front();
        }
        while self.order.len() > BUFFERED_TASKS {
            if let Some(old) = self.order.pop_front() {
                self.by_task.remove(&old);
            }
        }
    }

    pub(super) fn take(&mut self, task_id: &str) -> Vec<ControlMessage> {
        match self.by_task.remove(task_id) {
            Some(queue) => {
                self.order.retain(|id| id != task_id);
                queue.into()
            }
            None => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_buffer_remembers_cancels_and_stays_bounded() {
        let mut buffer = ControlBuffer::default();
        buffer.push(ControlMessage::new("t0", ControlKind::Cancel));
        for i in 0..BUFFERED_TASKS + 10 {
            buffer.push(ControlMessage::new(&format!("s{i}"), ControlKind::Steer { text: "x".into() }));
        }
        for _ in 0..BUFFERED_PER_TASK + 5 {
            buffer.push(ControlMessage::new("busy", ControlKind::Steer { text: "y".into() }));
        }
        assert!(buffer.by_task.len() <= BUFFERED_TASKS);
        assert!(buffer.take("t0").is_empty(), "the oldest buffer was evicted");
        assert!(buffer.cancelled.contains("t0"), "but the cancel is remembered");
        assert_eq!(buffer.take("busy").len(), BUFFERED_PER_TASK);
        assert!(buffer.take("busy").is_empty());
    }
}
