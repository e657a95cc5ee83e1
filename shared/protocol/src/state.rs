//! Where a task stands and where its result goes, as the task records store them and the task tools show them.
//! Each value has one spelling (`as_str`, `FromStr`, serde and the database all use it), so databases written
//! before these types existed load unchanged.

use crate::TaskOutcome;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A name that is not one of the values of a [`TaskStatus`] or a [`Delivery`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} `{value}`")]
pub struct UnknownName {
    /// What was being read: `"task status"` or `"delivery"`.
    pub kind: &'static str,
    pub value: String,
}

/// A string enum with one spelling per value.
macro_rules! named {
    ($(#[$meta:meta])* pub enum $name:ident ($kind:literal) {
        $( $(#[$variant_meta:meta])* $variant:ident = $text:literal ),+ $(,)?
    }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name { $( $(#[$variant_meta])* #[serde(rename = $text)] $variant ),+ }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [Self] = &[$( Self::$variant ),+];

            /// The stored and displayed name.
            pub fn as_str(self) -> &'static str {
                match self { $( Self::$variant => $text ),+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = UnknownName;

            fn from_str(text: &str) -> Result<Self, UnknownName> {
                Self::ALL
                    .iter()
                    .copied()
                    .find(|value| value.as_str() == text)
                    .ok_or_else(|| UnknownName { kind: $kind, value: text.to_string() })
            }
        }
    };
}

named! {
    /// Where a task stands. A task is `pending` until a worker starts it, `running` while one works on it, and
    /// then ends in one of the four terminal statuses; the first terminal status is final.
    pub enum TaskStatus ("task status") {
        Pending = "pending",
        Running = "running",
        Done = "done",
        Failed = "failed",
        Cancelled = "cancelled",
        TimedOut = "timed_out",
    }
}

impl TaskStatus {
    /// The statuses a task never leaves.
    pub fn is_terminal(self) -> bool {
        match self {
            Self::Pending | Self::Running => false,
            Self::Done | Self::Failed | Self::Cancelled | Self::TimedOut => true,
        }
    }
}

impl From<TaskOutcome> for TaskStatus {
    fn from(outcome: TaskOutcome) -> Self {
        match outcome {
            TaskOutcome::Done => Self::Done,
            TaskOutcome::Failed => Self::Failed,
            TaskOutcome::TimedOut => Self::TimedOut,
            TaskOutcome::Cancelled => Self::Cancelled,
        }
    }
}

named! {
    /// Where a task's result goes.
    pub enum Delivery ("delivery") {
        /// Straight to the chat (`spawn_task`).
        Spawn = "spawn",
        /// Back to the main agent as a new turn (`delegate`).
        Delegate = "delegate",
    }
}

/// What a finished attempt used, as its worker counted it: agent steps (provider calls), tool calls and
/// tokens. A run that stopped without an outcome (cancelled, provider error) counts what it saw before.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskUsage {
    pub steps: u32,
    pub tool_calls: u32,
    pub total_tokens: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_match_serde() {
        for status in TaskStatus::ALL {
            assert_eq!(status.as_str().parse::<TaskStatus>(), Ok(*status));
            assert_eq!(rmp_serde::from_slice::<TaskStatus>(&rmp_serde::to_vec(status).unwrap()).unwrap(), *status);
        }
        let names: Vec<&str> = TaskStatus::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(names, ["pending", "running", "done", "failed", "cancelled", "timed_out"]);
        assert_eq!("delegate".parse::<Delivery>(), Ok(Delivery::Delegate));
        assert_eq!(Delivery::Spawn.to_string(), "spawn");
        let error = "leased".parse::<TaskStatus>().unwrap_err();
        assert_eq!(error.to_string(), "unknown task status `leased`");
    }

    #[test]
    fn usage_shows_as_get_task_answers_it() {
        let usage = TaskUsage { steps: 3, tool_calls: 2, total_tokens: 1_500 };
        let shown = serde_json::to_value(usage).unwrap();
        assert_eq!(shown, serde_json::json!({ "steps": 3, "tool_calls": 2, "total_tokens": 1_500 }));
    }

    #[test]
    fn outcomes_are_terminal_statuses() {
        for outcome in [TaskOutcome::Done, TaskOutcome::Failed, TaskOutcome::TimedOut, TaskOutcome::Cancelled] {
            assert!(TaskStatus::from(outcome).is_terminal());
        }
        assert!(!TaskStatus::Pending.is_terminal() && !TaskStatus::Running.is_terminal());
    }
}
