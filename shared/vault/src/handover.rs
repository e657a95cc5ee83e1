//! Handing unlocked secrets from a parent process to a child it starts, through the child's stdin pipe: the
//! child never needs the vault password, and nothing lands in the environment (readable in `/proc`) or in a
//! file. The text is the vault's own `name: value` plaintext.

use crate::Secrets;
use crate::plaintext::{format_plaintext, parse_plaintext};
use std::io::Read;
use zeroize::Zeroizing;

/// The text a parent writes to the child's stdin (then closes it).
pub fn hand_over(secrets: &Secrets) -> Zeroizing<String> {
    format_plaintext(secrets.iter())
}

/// Reads what [`hand_over`] wrote, up to end of input.
pub fn receive(mut input: impl Read) -> std::io::Result<Secrets> {
    let mut bytes = Zeroizing::new(Vec::new());
    input.read_to_end(&mut bytes)?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("handed-over secrets: {e}")))?;
    let entries = parse_plaintext(text)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("handed-over secrets: {e}")))?;
    Ok(Secrets::new(entries))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn what_is_handed_over_is_received() {
        let secrets = Secrets::new(BTreeMap::from([
            ("A".to_string(), "sk-1".to_string()),
            ("multi".to_string(), "x\ny".to_string()),
            ("empty".to_string(), String::new()),
        ]));
        assert_eq!(receive(hand_over(&secrets).as_bytes()).unwrap(), secrets);
        assert!(receive(&b""[..]).unwrap().is_empty());
        let err = receive(&b"no colon\n"[..]).unwrap_err().to_string();
        assert_eq!(err, "handed-over secrets: line 1: expected `name: value`");
    }
}
