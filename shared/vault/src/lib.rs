//! The secrets vault. It owns MiniBot's `secrets.vault.yml` format (a JSON envelope around an AES-256-GCM
//! ciphertext whose key comes from scrypt), the unlocked name → value map that `${secret:NAME}` references
//! read ([`Secrets`]), and the redaction of known secret values from anything the program writes.

mod secrets;

pub use secrets::Secrets;
