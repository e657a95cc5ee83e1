//! The file's JSON envelope, byte-compatible with MiniBot 0.36: `{"version":1,"kdf":"scrypt","n":32768,"r":8,
//! "p":1,"salt","nonce","ciphertext"}`, each blob standard base64. The key is scrypt(password, salt) with the
//! envelope's parameters and 32 bytes of output; the cipher is AES-256-GCM with a 12-byte nonce, no associated
//! data, and the 16-byte tag appended to the ciphertext (what Python's `cryptography` `AESGCM` produces).

use aes_gcm::aead::Aead;
use aes_gcm::{Aes256Gcm, KeyInit, Nonce};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

const VERSION: u32 = 1;
const KDF: &str = "scrypt";
const N: u64 = 32_768;
const R: u32 = 8;
const P: u32 = 1;
const SALT_LEN: usize = 16;
const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;
/// scrypt needs 128·r·n bytes; a file may ask for more than the defaults, but not for unbounded memory.
const MAX_KDF_MEMORY: u64 = 1 << 30;

#[derive(Serialize, Deserialize)]
struct Envelope {
    version: u32,
    kdf: String,
    n: u64,
    r: u32,
    p: u32,
    salt: String,
    nonce: String,
    ciphertext: String,
}

/// Why a file did not open.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Damage {
    /// The tag did not verify: a wrong password, or a changed ciphertext.
    WrongKey,
    /// Not an envelope this version can read.
    Malformed(String),
}

/// Encrypts `plaintext` under a fresh salt and nonce; returns the envelope text (pretty JSON, newline-ended).
pub(crate) fn seal(plaintext: &[u8], password: &str) -> std::io::Result<String> {
    let mut salt = [0u8; SALT_LEN];
    let mut nonce = [0u8; NONCE_LEN];
    let random = |e: getrandom::Error| std::io::Error::other(format!("no random bytes from the system: {e}"));
    getrandom::fill(&mut salt).map_err(random)?;
    getrandom::fill(&mut nonce).map_err(random)?;
    let key = derive_key(password, &salt, N, R, P).map_err(|damage| std::io::Error::other(format!("{damage:?}")))?;
    let cipher = Aes256Gcm::new_from_slice(key.as_slice()).map_err(|e| std::io::Error::other(e.to_string()))?;
    let ciphertext = cipher
        .encrypt(&Nonce::from(nonce), plaintext)
        .map_err(|_| std::io::Error::other("AES-GCM encryption failed"))?;
    let envelope = Envelope {
        version: VERSION,
        kdf: KDF.into(),
        n: N,
        r: R,
        p: P,
        salt: STANDARD.encode(salt),
        nonce: STANDARD.encode(nonce),
        ciphertext: STANDARD.encode(ciphertext),
    };
    let mut text = serde_json::to_string_pretty(&envelope).map_err(std::io::Error::other)?;
    text.push('\n');
    Ok(text)
}

/// Decrypts an envelope.
pub(crate) fn open(text: &str, password: &str) -> Result<Zeroizing<Vec<u8>>, Damage> {
    let envelope: Envelope =
        serde_json::from_str(text).map_err(|e| Damage::Malformed(format!("not the JSON vault envelope ({e})")))?;
    if envelope.version != VERSION {
        return Err(Damage::Malformed(format!("version {} is not supported (expected 1)", envelope.version)));
    }
    if envelope.kdf != KDF {
        return Err(Damage::Malformed(format!("kdf `{}` is not supported (expected scrypt)", envelope.kdf)));
    }
    let salt = decode("salt", &envelope.salt)?;
    let nonce = decode("nonce", &envelope.nonce)?;
    let ciphertext = decode("ciphertext", &envelope.ciphertext)?;
    let nonce: [u8; NONCE_LEN] = nonce
        .as_slice()
        .try_into()
        .map_err(|_| Damage::Malformed(format!("nonce is {} bytes, expected {NONCE_LEN}", nonce.len())))?;
    if ciphertext.len() < TAG_LEN {
        return Err(Damage::Malformed("ciphertext is shorter than the GCM tag".into()));
    }
    if salt.is_empty() {
        return Err(Damage::Malformed("salt is empty".into()));
    }
    let key = derive_key(password, &salt, envelope.n, envelope.r, envelope.p)?;
    let cipher = Aes256Gcm::new_from_slice(key.as_slice()).map_err(|e| Damage::Malformed(e.to_string()))?;
    cipher.decrypt(&Nonce::from(nonce), ciphertext.as_slice()).map(Zeroizing::new).map_err(|_| Damage::WrongKey)
}

fn decode(field: &str, text: &str) -> Result<Vec<u8>, Damage> {
    STANDARD.decode(text.trim()).map_err(|e| Damage::Malformed(format!("{field} is not base64 ({e})")))
}

fn derive_key(password: &str, salt: &[u8], n: u64, r: u32, p: u32) -> Result<Zeroizing<[u8; 32]>, Damage> {
    if n < 2 || !n.is_power_of_two() {
        return Err(Damage::Malformed(format!("scrypt n = {n} is not a power of two")));
    }
    let memory = n.checked_mul(128 * u64::from(r));
    if !(1..=64).contains(&r) || !(1..=16).contains(&p) || memory.is_none_or(|bytes| bytes > MAX_KDF_MEMORY) {
        return Err(Damage::Malformed(format!("scrypt parameters n={n} r={r} p={p} are out of range")));
    }
    let log_n = u8::try_from(n.trailing_zeros()).map_err(|e| Damage::Malformed(e.to_string()))?;
    let params = scrypt::Params::new(log_n, r, p, 32)
        .map_err(|e| Damage::Malformed(format!("scrypt parameters n={n} r={r} p={p}: {e}")))?;
    let mut key = Zeroizing::new([0u8; 32]);
    scrypt::scrypt(password.as_bytes(), salt, &params, key.as_mut_slice())
        .map_err(|e| Damage::Malformed(e.to_string()))?;
    Ok(key)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn sealed_text_opens_with_the_password_only() {
        let text = seal(b"KEY: value\n", "pw").unwrap();
        let envelope: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(envelope["version"], 1);
        assert_eq!(envelope["kdf"], "scrypt");
        assert_eq!(
            (envelope["n"].as_u64(), envelope["r"].as_u64(), envelope["p"].as_u64()),
            (Some(32768), Some(8), Some(1))
        );
        assert_eq!(STANDARD.decode(envelope["salt"].as_str().unwrap()).unwrap().len(), 16);
        assert_eq!(STANDARD.decode(envelope["nonce"].as_str().unwrap()).unwrap().len(), 12);
        assert_eq!(open(&text, "pw").unwrap().as_slice(), b"KEY: value\n");
        assert_eq!(open(&text, "wrong").err(), Some(Damage::WrongKey));
        // Two seals of the same text differ (fresh salt and nonce).
        assert_ne!(seal(b"KEY: value\n", "pw").unwrap(), text);
    }

    #[test]
    fn a_changed_ciphertext_does_not_open() {
        let text = seal(b"A: 1\n", "pw").unwrap();
        let mut envelope: serde_json::Value = serde_json::from_str(&text).unwrap();
        let mut blob = STANDARD.decode(envelope["ciphertext"].as_str().unwrap()).unwrap();
        blob[0] ^= 1;
        envelope["ciphertext"] = STANDARD.encode(blob).into();
        assert_eq!(open(&envelope.to_string(), "pw").err(), Some(Damage::WrongKey));
    }

    #[test]
    fn malformed_envelopes_say_what_is_wrong() {
        let cases = [
            ("not json", "not the JSON vault envelope"),
            (
                r#"{"version":2,"kdf":"scrypt","n":2,"r":1,"p":1,"salt":"AA==","nonce":"AA==","ciphertext":"AA=="}"#,
                "version 2",
            ),
            (
                r#"{"version":1,"kdf":"argon2","n":2,"r":1,"p":1,"salt":"AA==","nonce":"AA==","ciphertext":"AA=="}"#,
                "kdf `argon2`",
            ),
            (
                r#"{"version":1,"kdf":"scrypt","n":2,"r":1,"p":1,"salt":"AA==","nonce":"AA==","ciphertext":"AA=="}"#,
                "nonce is 1 bytes",
            ),
            (
                r#"{"version":1,"kdf":"scrypt","n":3,"r":1,"p":1,"salt":"AA==","nonce":"AAAAAAAAAAAAAAAA","ciphertext":"AAAAAAAAAAAAAAAAAAAAAA=="}"#,
                "power of two",
            ),
            (
                r#"{"version":1,"kdf":"scrypt","n":1073741824,"r":8,"p":1,"salt":"AA==","nonce":"AAAAAAAAAAAAAAAA","ciphertext":"AAAAAAAAAAAAAAAAAAAAAA=="}"#,
                "out of range",
            ),
            (
                r#"{"version":1,"kdf":"scrypt","n":2,"r":1,"p":1,"salt":"!!","nonce":"AA==","ciphertext":"AA=="}"#,
                "salt is not base64",
            ),
        ];
        for (text, expected) in cases {
            match open(text, "pw") {
                Err(Damage::Malformed(reason)) => assert!(reason.contains(expected), "{text}: {reason}"),
                other => panic!("{text}: {other:?}"),
            }
        }
    }
}
