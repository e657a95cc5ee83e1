//! Gemini's thought signatures across the steps of a run. A thinking model signs the parts of its answer
//! (`thoughtSignature` on a `functionCall` part, and on the last text part); the next request of the run must
//! carry each signature back on the same part, or Gemini refuses function-call turns
//! (<https://ai.google.dev/gemini-api/docs/thought-signatures>). They travel in [`ChatResponse::replay`]
//! (api `gemini`) as [`Signatures`], by the position of the call in the answer; the parts themselves are
//! rebuilt from the message's text and tool calls, so what goes back is what the run kept.
//!
//! A signature on a part that is not sent back (a thought, or an empty text part when the answer has no text)
//! is dropped: Gemini checks signatures only on function calls, and the call parts keep theirs.
//!
//! [`ChatResponse::replay`]: crate::ChatResponse::replay

use crate::types::Replay;
use serde::{Deserialize, Serialize};

/// The `api` of a [`Replay`] written by this provider.
pub(crate) const API: &str = "gemini";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Signatures {
    /// The signature of each tool call, by its position in the answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<Option<String>>,
    /// The signature of the answer's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

impl Signatures {
    /// What a replay of this API holds; nothing for another API's replay or one that does not read.
    pub(crate) fn from_replay(replay: Option<&Replay>) -> Self {
        Replay::items_for(replay, API).and_then(|items| serde_json::from_value(items.clone()).ok()).unwrap_or_default()
    }

    /// The replay to keep; `None` when the answer was not signed.
    pub(crate) fn into_replay(self) -> Option<Replay> {
        if self.text.is_none() && self.calls.iter().all(Option::is_none) {
            return None;
        }
        let items = serde_json::to_value(&self).ok()?;
        Some(Replay { api: API.into(), items })
    }

    pub(crate) fn call(&self, index: usize) -> Option<String> {
        self.calls.get(index).cloned().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_survive_the_replay_and_other_apis_are_ignored() {
        let signed = Signatures { calls: vec![None, Some("sig-b".into())], text: Some("sig-t".into()) };
        let replay = signed.clone().into_replay().expect("signed");
        assert_eq!(replay.api, "gemini");
        let back = Signatures::from_replay(Some(&replay));
        assert_eq!(back, signed);
        assert_eq!(back.call(1).as_deref(), Some("sig-b"));
        assert_eq!(back.call(5), None);
        let other = Replay { api: "anthropic".into(), items: replay.items };
        assert_eq!(Signatures::from_replay(Some(&other)), Signatures::default());
        assert_eq!(Signatures::default().into_replay(), None);
    }
}
