//! Signed frames: every message that crosses the broker is sealed with an HMAC-SHA256 over its kind, the time it
//! was sealed and its body, keyed by the secret the orchestrator and its workers share (`[rabbitmq]
//! message_key`). Anyone may hold broker credentials; only holders of the key can make a message this side acts
//! on.
//!
//! A frame is `MBS1 | kind (1 byte) | sealed at, ms since the epoch (8 bytes, big-endian) | MAC (32 bytes) |
//! body`. The kind is inside the MAC, so a signed event cannot be replayed as a control message; the time is
//! inside it, so a captured message is only good for [`SealKind::max_age`]. So is the broker user that sent it
//! (the AMQP `user_id`, which RabbitMQ checks against the login, and which is not in the frame): a message
//! captured and published again by another broker user does not open, so it cannot speak for its sender.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const MAGIC: &[u8; 4] = b"MBS1";
const MAC_LEN: usize = 32;
const HEADER_LEN: usize = MAGIC.len() + 1 + 8 + MAC_LEN;
/// The shortest key accepted: 128 bits of a generated hex key, or a long passphrase.
pub const MIN_KEY_CHARS: usize = 32;
/// How far ahead of this host's clock a message may claim to be (clocks of hosts differ a little).
const CLOCK_SKEW: Duration = Duration::from_secs(300);

/// What a frame carries; part of what is signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SealKind {
    Task = 1,
    Event = 2,
    Control = 3,
    Status = 4,
}

impl SealKind {
    /// How old a message of this kind may be when it arrives. Tasks and events wait in durable queues while
    /// the other side is down (a week covers a long outage); control messages and heartbeats are transient
    /// and acted on at once, so a captured one is only good for minutes.
    pub fn max_age(self) -> Duration {
        match self {
            Self::Task | Self::Event => Duration::from_secs(7 * 24 * 3600),
            Self::Control | Self::Status => Duration::from_secs(300),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Task => "task",
            Self::Event => "worker event",
            Self::Control => "control message",
            Self::Status => "worker status",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("the message is not signed")]
    Unsigned,
    #[error("the message is signed as a {found}, not a {expected}")]
    WrongKind { expected: &'static str, found: String },
    #[error("the signature does not match (another key, or the message was changed)")]
    BadSignature,
    #[error("the message was signed {age_seconds} s ago, longer than the {limit_seconds} s a {kind} is good for")]
    Stale { kind: &'static str, age_seconds: u64, limit_seconds: u64 },
    #[error("the message claims to be signed {ahead_seconds} s in the future")]
    FromTheFuture { ahead_seconds: u64 },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("is empty")]
    Empty,
    #[error("is {found} characters long; use at least {MIN_KEY_CHARS}")]
    TooShort { found: usize },
    /// Long but guessable: `aaaa…`, `abababab…`.
    #[error("uses only {distinct} different characters; use a random key")]
    Weak { distinct: usize },
}

/// The shared secret. Its `Debug` never shows it.
#[derive(Clone)]
pub struct MessageKey {
    mac: Hmac<Sha256>,
}

impl std::fmt::Debug for MessageKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MessageKey(***)")
    }
}

impl PartialEq for MessageKey {
    fn eq(&self, other: &Self) -> bool {
        // Compared through what they sign, so the key bytes are never kept twice.
        let probe = b"minibot message key comparison";
        self.mac_of(SealKind::Task, 0, probe) == other.mac_of(SealKind::Task, 0, probe)
    }
}
impl Eq for MessageKey {}

/// Fewest different characters in a key: a random hex key has about 16, a passphrase more.
const MIN_DISTINCT: usize = 8;

fn distinct(text: &str) -> usize {
    text.chars().collect::<std::collections::HashSet<_>>().len()
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl MessageKey {
    pub fn new(secret: &str) -> Result<Self, KeyError> {
        let secret = secret.trim();
        match secret.chars().count() {
            0 => Err(KeyError::Empty),
            n if n < MIN_KEY_CHARS => Err(KeyError::TooShort { found: n }),
            _ if distinct(secret) < MIN_DISTINCT => Err(KeyError::Weak { distinct: distinct(secret) }),
            _ => Ok(Self { mac: Hmac::<Sha256>::new_from_slice(secret.as_bytes()).map_err(|_| KeyError::Empty)? }),
        }
    }

    fn mac(&self, kind: u8, sealed_at: [u8; 8], sender: &str, body: &[u8]) -> Hmac<Sha256> {
        let mut mac = self.mac.clone();
        mac.update(MAGIC);
        mac.update(&[kind]);
        mac.update(&sealed_at);
        // Length-prefixed, so no sender and body can be shifted into another split of the same bytes.
        mac.update(&u64::try_from(sender.len()).unwrap_or(u64::MAX).to_be_bytes());
        mac.update(sender.as_bytes());
        mac.update(body);
        mac
    }

    fn mac_of(&self, kind: SealKind, sealed_at_ms: u64, body: &[u8]) -> [u8; MAC_LEN] {
        self.mac(kind as u8, sealed_at_ms.to_be_bytes(), "", body).finalize().into_bytes().into()
    }

    /// The frame for `body` from broker user `sender`, sealed now.
    pub fn seal(&self, kind: SealKind, sender: &str, body: &[u8]) -> Vec<u8> {
        self.seal_at(kind, sender, body, now_ms())
    }

    pub fn seal_at(&self, kind: SealKind, sender: &str, body: &[u8], sealed_at_ms: u64) -> Vec<u8> {
        let mut frame = Vec::with_capacity(HEADER_LEN + body.len());
        frame.extend_from_slice(MAGIC);
        frame.push(kind as u8);
        frame.extend_from_slice(&sealed_at_ms.to_be_bytes());
        let mac = self.mac(kind as u8, sealed_at_ms.to_be_bytes(), sender, body).finalize().into_bytes();
        frame.extend_from_slice(&mac);
        frame.extend_from_slice(body);
        frame
    }

    /// The body of a frame of `kind` that broker user `sender` sealed with this key, not too old; checked
    /// before anything decodes it.
    pub fn open<'a>(&self, kind: SealKind, sender: &str, frame: &'a [u8]) -> Result<&'a [u8], SealError> {
        self.open_at(kind, sender, frame, now_ms())
    }

    pub fn open_at<'a>(
        &self,
        kind: SealKind,
        sender: &str,
        frame: &'a [u8],
        now_ms: u64,
    ) -> Result<&'a [u8], SealError> {
        if !is_sealed(frame) {
            return Err(SealError::Unsigned);
        }
        let found = frame[MAGIC.len()];
        if found != kind as u8 {
            let found = [SealKind::Task, SealKind::Event, SealKind::Control, SealKind::Status]
                .into_iter()
                .find(|k| *k as u8 == found)
                .map_or_else(|| format!("kind {found}"), |k| k.name().to_string());
            return Err(SealError::WrongKind { expected: kind.name(), found });
        }
        let mut at = [0u8; 8];
        at.copy_from_slice(&frame[MAGIC.len() + 1..MAGIC.len() + 9]);
        let sealed_at_ms = u64::from_be_bytes(at);
        let (mac, body) = frame[MAGIC.len() + 9..].split_at(MAC_LEN);
        let check = self.mac(found, at, sender, body);
        // Constant time: a timing difference would let a forger find the MAC byte by byte.
        check.verify_slice(mac).map_err(|_| SealError::BadSignature)?;
        if sealed_at_ms > now_ms {
            let ahead = Duration::from_millis(sealed_at_ms - now_ms);
            if ahead > CLOCK_SKEW {
                return Err(SealError::FromTheFuture { ahead_seconds: ahead.as_secs() });
            }
        } else {
            let age = Duration::from_millis(now_ms - sealed_at_ms);
            if age > kind.max_age() {
                return Err(SealError::Stale {
                    kind: kind.name(),
                    age_seconds: age.as_secs(),
                    limit_seconds: kind.max_age().as_secs(),
                });
            }
        }
        Ok(body)
    }
}

/// Whether `frame` is in the sealed format at all (whatever its key): what `minibot queue migrate` counts.
pub fn is_sealed(frame: &[u8]) -> bool {
    frame.len() >= HEADER_LEN && frame.starts_with(MAGIC)
}

/// A new random key: 64 hex digits (256 bits), for `minibot vault generate`.
pub fn generate_key_hex(random: &[u8; 32]) -> String {
    random.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(text: &str) -> MessageKey {
        MessageKey::new(text).unwrap()
    }

    const NOW: u64 = 1_800_000_000_000;

    #[test]
    fn a_sealed_message_opens_with_the_same_key_and_kind_only() {
        let k = key("key-a-0123456789abcdefghijklmnopqrstuv");
        let frame = k.seal_at(SealKind::Event, "w", b"body", NOW);
        assert_eq!(k.open_at(SealKind::Event, "w", &frame, NOW + 5).unwrap(), b"body");
        assert!(matches!(k.open_at(SealKind::Control, "w", &frame, NOW), Err(SealError::WrongKind { .. })));
        let other = key("key-b-0123456789abcdefghijklmnopqrstuv");
        assert_eq!(other.open_at(SealKind::Event, "w", &frame, NOW), Err(SealError::BadSignature));
        assert_ne!(k, other);
        assert_eq!(k, key("key-a-0123456789abcdefghijklmnopqrstuv"));
        // Published again by another broker user, it does not open: it cannot speak for its sender.
        assert_eq!(k.open_at(SealKind::Event, "guest", &frame, NOW), Err(SealError::BadSignature));
    }

    #[test]
    fn changed_unsigned_stale_and_future_messages_are_refused() {
        let k = key("key-a-0123456789abcdefghijklmnopqrstuv");
        let mut frame = k.seal_at(SealKind::Task, "w", b"run this", NOW);
        let last = frame.len() - 1;
        frame[last] ^= 1;
        assert_eq!(k.open_at(SealKind::Task, "w", &frame, NOW), Err(SealError::BadSignature));
        // A forger who moves the time changes what is signed.
        let mut moved = k.seal_at(SealKind::Task, "w", b"run this", NOW);
        moved[5..13].copy_from_slice(&(NOW + 1).to_be_bytes());
        assert_eq!(k.open_at(SealKind::Task, "w", &moved, NOW), Err(SealError::BadSignature));
        assert_eq!(k.open_at(SealKind::Task, "w", b"\x82\xa7version\x01", NOW), Err(SealError::Unsigned));
        assert_eq!(k.open_at(SealKind::Task, "w", b"", NOW), Err(SealError::Unsigned));
        let control = k.seal_at(SealKind::Control, "w", b"cancel", NOW);
        assert!(matches!(k.open_at(SealKind::Control, "w", &control, NOW + 301_000), Err(SealError::Stale { .. })));
        assert!(k.open_at(SealKind::Control, "w", &control, NOW + 299_000).is_ok());
        assert!(matches!(
            k.open_at(SealKind::Control, "w", &control, NOW - 301_000),
            Err(SealError::FromTheFuture { .. })
        ));
        let task = k.seal_at(SealKind::Task, "w", b"t", NOW);
        assert!(
            k.open_at(SealKind::Task, "w", &task, NOW + 6 * 24 * 3600 * 1000).is_ok(),
            "a task waits out an outage"
        );
        assert!(k.open_at(SealKind::Task, "w", &task, u64::MAX).is_err());
        assert!(k.open_at(SealKind::Task, "w", &k.seal_at(SealKind::Task, "w", b"t", u64::MAX), 0).is_err());
    }

    #[test]
    fn short_keys_are_refused_and_debug_hides_the_key() {
        assert_eq!(MessageKey::new("  "), Err(KeyError::Empty));
        assert_eq!(MessageKey::new("short"), Err(KeyError::TooShort { found: 5 }));
        assert_eq!(MessageKey::new(&"ab".repeat(20)), Err(KeyError::Weak { distinct: 2 }));
        let secret = "s3cret-0123456789abcdefghijklmnop";
        assert!(!format!("{:?}", key(secret)).contains(secret));
        assert_eq!(generate_key_hex(&[0xab; 32]).len(), 64);
    }
}
