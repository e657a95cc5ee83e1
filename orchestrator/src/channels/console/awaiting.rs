//! The messages this console sent (or resumed) and has not seen answered yet. The input side adds to it, the
//! console actor crosses answers off, and quitting waits for it to empty.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Default)]
struct State {
    open: HashSet<String>,
    /// Every id answered in this run: an answer can arrive before the side that sent the message records it
    /// (a resumed message is sent by the router), and must not leave it open for good.
    answered: HashSet<String>,
}

/// Event ids sent and not answered yet. Shared by the input side and the actor.
#[derive(Clone, Default)]
pub struct Awaiting(Arc<Mutex<State>>);

impl Awaiting {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Waits for the answer to `event_id` (unless it came already).
    pub fn expect(&self, event_id: &str) {
        let mut state = self.lock();
        if !state.answered.contains(event_id) {
            state.open.insert(event_id.to_string());
        }
    }

    /// Crosses off the messages a reply answers.
    pub fn answered(&self, event_ids: &[String]) {
        let mut state = self.lock();
        for id in event_ids {
            state.open.remove(id);
            state.answered.insert(id.clone());
        }
    }

    pub fn contains(&self, event_id: &str) -> bool {
        self.lock().open.contains(event_id)
    }

    /// How many messages still wait for their answer.
    pub fn len(&self) -> usize {
        self.lock().open.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lock().open.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use crate::channels::console::awaiting::Awaiting;

    #[test]
    fn an_answer_that_came_first_leaves_nothing_open() {
        let awaiting = Awaiting::default();
        awaiting.expect("a");
        awaiting.answered(&["b".to_string()]);
        awaiting.expect("b");
        assert_eq!(awaiting.len(), 1);
        awaiting.answered(&["a".to_string()]);
        assert!(awaiting.is_empty());
    }
}
