//! What this side believes of a delivery: its size, its seal ([`MessageKey`]) and who sent it.
//!
//! Broker credentials are not trusted: anyone holding them can publish anything anywhere they may write. A
//! delivery is acted on only when it is no larger than its kind allows (checked before anything else reads it),
//! carries a seal made with the shared key for that kind of message, and is not stale. Refused deliveries are
//! logged with what the broker says of their sender, once per sender and reason (a flood does not fill the log).
//!
//! Senders: every message this side publishes carries the broker user it connected as in `user_id`, which
//! RabbitMQ checks against the connection's login. A worker id is bound to the broker user it was first heard
//! from, so a worker host with its own broker user cannot speak for a worker of another host.

use super::buffers::Remembered;
use super::{Shared, lock};
use lapin::message::Delivery;
use minibot_protocol::{SealError, SealKind};
use std::collections::{HashMap, VecDeque};

/// Largest delivery of each kind, checked before the seal or the decoder reads it. Tasks carry a prompt and a
/// context the worker caps far lower; events carry a result the worker caps at [`MAX_RESULT_BYTES`].
///
/// [`MAX_RESULT_BYTES`]: minibot_protocol::MAX_RESULT_BYTES
pub(super) fn max_bytes(kind: SealKind) -> usize {
    match kind {
        SealKind::Task => 2 * 1024 * 1024,
        SealKind::Event => minibot_protocol::MAX_RESULT_BYTES + 1024 * 1024,
        SealKind::Control => 256 * 1024,
        SealKind::Status => 64 * 1024,
    }
}

/// Worker ids remembered with their broker user (refusals are remembered as other ids are, [`Remembered`]).
const REMEMBERED: usize = 4_096;
/// Worker ids one broker user may speak for: a host runs a handful of workers, and a host that invented ids
/// by the thousand could otherwise push another host's binding out of memory and take its id.
const IDS_PER_USER: usize = 64;

/// Why a delivery was not acted on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Refusal {
    TooLarge {
        bytes: usize,
        limit: usize,
    },
    Seal(SealError),
    /// The worker id was first heard from another broker user.
    Impersonation {
        worker_id: String,
        bound_to: String,
    },
    /// The broker user already speaks for [`IDS_PER_USER`] worker ids.
    TooManyWorkers {
        worker_id: String,
    },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TooLarge { bytes, limit } => write!(f, "{bytes} bytes, over the {limit} bytes allowed"),
            Self::Seal(error) => error.fmt(f),
            Self::Impersonation { worker_id, bound_to } => {
                write!(f, "it speaks for worker `{worker_id}`, which is broker user `{bound_to}`'s")
            }
            Self::TooManyWorkers { worker_id } => {
                write!(f, "worker `{worker_id}` would be this broker user's {}th worker id", IDS_PER_USER + 1)
            }
        }
    }
}

impl Refusal {
    /// The reason without its numbers, so one sender's stream of refusals is logged once.
    fn class(&self) -> &'static str {
        match self {
            Self::TooLarge { .. } => "too large",
            Self::Seal(SealError::Unsigned) => "unsigned",
            Self::Seal(SealError::WrongKind { .. }) => "wrong kind",
            Self::Seal(SealError::BadSignature) => "bad signature",
            Self::Seal(SealError::Stale { .. }) => "stale",
            Self::Seal(SealError::FromTheFuture { .. }) => "future",
            Self::Impersonation { .. } => "impersonation",
            Self::TooManyWorkers { .. } => "too many workers",
        }
    }
}

/// Bounded memory of who was refused for what, and of which broker user each worker id belongs to.
#[derive(Debug, Default)]
pub(super) struct Trust {
    logged: Remembered,
    workers: HashMap<String, String>,
    workers_order: VecDeque<String>,
    ids_of_user: HashMap<String, usize>,
}

impl Trust {
    /// Whether this refusal is the first of its sender and reason (then it is logged as a warning).
    fn first_refusal(&mut self, key: String) -> bool {
        let first = !self.logged.contains(&key);
        self.logged.insert(&key);
        first
    }

    /// Binds `worker_id` to `user` on first sight; `Err` names the user it is bound to.
    fn bind_worker(&mut self, worker_id: &str, user: &str) -> Result<(), Refusal> {
        if let Some(bound) = self.workers.get(worker_id) {
            return if bound == user {
                Ok(())
            } else {
                Err(Refusal::Impersonation { worker_id: worker_id.to_string(), bound_to: bound.clone() })
            };
        }
        let count = self.ids_of_user.entry(user.to_string()).or_default();
        if *count >= IDS_PER_USER {
            return Err(Refusal::TooManyWorkers { worker_id: worker_id.to_string() });
        }
        *count += 1;
        self.workers.insert(worker_id.to_string(), user.to_string());
        self.workers_order.push_back(worker_id.to_string());
        if self.workers_order.len() > REMEMBERED
            && let Some(old) = self.workers_order.pop_front()
            && let Some(user) = self.workers.remove(&old)
            && let Some(count) = self.ids_of_user.get_mut(&user)
        {
            *count = count.saturating_sub(1);
        }
        Ok(())
    }
}

/// The broker user a delivery came from, as RabbitMQ checked it (`""` when the sender did not say).
fn sender_user(delivery: &Delivery) -> String {
    delivery.properties.user_id().as_ref().map(ToString::to_string).unwrap_or_default()
}

impl Shared {
    /// The body of a delivery of `kind`, if this side should act on it; a refusal is logged and returned.
    pub(super) fn unseal<'a>(&self, kind: SealKind, delivery: &'a Delivery) -> Result<&'a [u8], Refusal> {
        let limit = max_bytes(kind);
        let checked = if delivery.data.len() > limit {
            Err(Refusal::TooLarge { bytes: delivery.data.len(), limit })
        } else {
            self.settings.message_key.open(kind, &sender_user(delivery), &delivery.data).map_err(Refusal::Seal)
        };
        if let Err(refusal) = &checked {
            self.log_refusal(kind, delivery, refusal, None);
        }
        checked
    }

    /// Checks that `worker_id` speaks from the broker user it was first heard from.
    pub(super) fn check_sender(&self, kind: SealKind, delivery: &Delivery, worker_id: &str) -> Result<(), Refusal> {
        let user = sender_user(delivery);
        let bound = lock(&self.trust).bind_worker(worker_id, &user);
        bound.inspect_err(|refusal| self.log_refusal(kind, delivery, refusal, Some(worker_id)))
    }

    fn log_refusal(&self, kind: SealKind, delivery: &Delivery, refusal: &Refusal, claimed: Option<&str>) {
        let user = sender_user(delivery);
        let app = delivery.properties.app_id().as_ref().map(ToString::to_string).unwrap_or_default();
        let message_id = delivery.properties.message_id().as_ref().map(ToString::to_string).unwrap_or_default();
        // Not keyed by anything else the sender chooses (app_id, message id): a flood would be logged in full.
        let key = format!("{}\u{0}{user}\u{0}{}", kind.name(), refusal.class());
        let first = lock(&self.trust).first_refusal(key);
        let (exchange, routing_key) = (delivery.exchange.as_str(), delivery.routing_key.as_str());
        if first {
            tracing::warn!(
                kind = kind.name(), reason = %refusal, broker_user = %user, app_id = %app, message_id = %message_id,
                claimed_worker = claimed.unwrap_or_default(), exchange, routing_key,
                "refused a broker message; not acted on (further ones like it are logged at debug level)"
            );
        } else {
            tracing::debug!(
                kind = kind.name(), reason = %refusal, broker_user = %user, message_id = %message_id,
                "refused a broker message; not acted on"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_id_belongs_to_the_first_broker_user_heard() {
        let mut trust = Trust::default();
        assert_eq!(trust.bind_worker("w1", "host-a"), Ok(()));
        assert_eq!(trust.bind_worker("w1", "host-a"), Ok(()));
        let taken = Err(Refusal::Impersonation { worker_id: "w1".into(), bound_to: "host-a".into() });
        assert_eq!(trust.bind_worker("w1", "host-b"), taken);
        assert!(trust.bind_worker("w1", "").is_err(), "leaving user_id out does not help");
        // A host cannot invent ids until host-a's binding is forgotten.
        for n in 0..IDS_PER_USER {
            assert_eq!(trust.bind_worker(&format!("ghost-{n}"), "host-b"), Ok(()));
        }
        assert!(matches!(trust.bind_worker("ghost-x", "host-b"), Err(Refusal::TooManyWorkers { .. })));
        assert_eq!(trust.bind_worker("w1", "host-b"), taken);
        assert!(trust.first_refusal("x".into()));
        assert!(!trust.first_refusal("x".into()));
    }
}
