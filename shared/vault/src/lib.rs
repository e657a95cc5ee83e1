//! The secrets vault. It owns MiniBot's `secrets.vault.yml` format (a JSON envelope around an AES-256-GCM
//! ciphertext whose key comes from scrypt), the unlocked name → value map that `${secret:NAME}` references
//! read ([`Secrets`]), where the password comes from ([`PasswordSources`]), and the redaction of known secret
//! values from anything the program writes ([`Redactor`]).
//!
//! - [`read`] / [`write`] open and save a vault file (written atomically, mode 0600);
//! - [`parse_plaintext`] / [`format_plaintext`] are the decrypted `name: value` lines (what `vault edit` shows,
//!   and what a local worker receives from its parent on stdin);
//! - [`hand_over`] / [`receive`] pass unlocked secrets (and the password, to mask) to a child process through
//!   its stdin;
//! - [`is_valid_name`] is the rule for secret names.

mod envelope;
mod error;
mod file;
mod handover;
mod name;
mod password;
mod plaintext;
mod redact;
mod secrets;

pub use error::VaultError;
pub use file::{read, write, write_private};
pub use handover::{Handover, hand_over, receive};
pub use name::is_valid_name;
pub use password::{NoPrompt, PasswordPrompt, PasswordSources, TtyPrompt};
pub use plaintext::{PlaintextError, format_plaintext, parse_plaintext};
pub use redact::{RedactingWriter, Redactor};
pub use secrets::{Password, Secrets};
pub use zeroize::{Zeroize, Zeroizing};

/// The environment variable that holds the vault password (the second password source).
pub const PASSWORD_ENV: &str = "MINIBOT_VAULT_PASSWORD";
