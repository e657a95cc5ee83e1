//! Handing unlocked secrets from a parent process to a child it starts, through the child's stdin pipe: the
//! child never opens the vault, and nothing lands in the environment (readable in `/proc`) or in a file. The text
//! is the vault's own `name: value` plaintext, after one optional `%password: "<JSON string>"` line with the
//! vault password. The child gets the password only to mask it as the parent does (a value the model echoes
//! must be hidden in every process alike); `%` starts no secret name, so the line cannot be mistaken for one.

use crate::plaintext::{format_plaintext, parse_plaintext};
use crate::{Password, Secrets};
use std::io::Read;
use zeroize::Zeroizing;

const PASSWORD_LINE: &str = "%password: ";

/// What a child receives: the secrets, and the password they were unlocked with when the parent had one.
#[derive(Debug, Default)]
pub struct Handover {
    pub secrets: Secrets,
    pub password: Option<Password>,
}

/// The text a parent writes to the child's stdin (then closes it).
pub fn hand_over(secrets: &Secrets, password: Option<&Password>) -> Zeroizing<String> {
    let mut text = Zeroizing::new(String::new());
    if let Some(password) = password {
        text.push_str(PASSWORD_LINE);
        // A JSON string of valid UTF-8 always serialises; quoted, a password may hold any character.
        text.push_str(&Zeroizing::new(serde_json::to_string(password.expose()).unwrap_or_default()));
        text.push('\n');
    }
    text.push_str(&format_plaintext(secrets.iter()));
    text
}

/// Reads what [`hand_over`] wrote, up to end of input.
pub fn receive(mut input: impl Read) -> std::io::Result<Handover> {
    let invalid = |message: String| std::io::Error::new(std::io::ErrorKind::InvalidData, message);
    let mut bytes = Zeroizing::new(Vec::new());
    input.read_to_end(&mut bytes)?;
    let text = std::str::from_utf8(&bytes).map_err(|e| invalid(format!("handed-over secrets: {e}")))?;
    let (password, rest) = match text.strip_prefix(PASSWORD_LINE) {
        Some(line) => {
            let (quoted, rest) = line.split_once('\n').unwrap_or((line, ""));
            let password = serde_json::from_str::<String>(quoted)
                .map_err(|_| invalid("handed-over secrets: the password line is not a JSON string".into()))?;
            (Some(Password::new(Zeroizing::new(password))), rest)
        }
        None => (None, text),
    };
    let entries = parse_plaintext(rest).map_err(|e| invalid(format!("handed-over secrets: {e}")))?;
    Ok(Handover { secrets: Secrets::new(entries), password })
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
        let received = receive(hand_over(&secrets, None).as_bytes()).unwrap();
        assert_eq!(received.secrets, secrets);
        assert!(received.password.is_none());
        assert!(receive(&b""[..]).unwrap().secrets.is_empty());
        let err = receive(&b"no colon\n"[..]).unwrap_err().to_string();
        assert_eq!(err, "handed-over secrets: line 1: expected `name: value`");
    }

    #[test]
    fn the_password_travels_ahead_of_the_secrets_and_never_as_one() {
        let secrets = Secrets::new(BTreeMap::from([("A".to_string(), "sk-1".to_string())]));
        for password in ["pw with: colon\nand a newline", "\"quoted\"", "%password: \"x\""] {
            let given = Password::new(Zeroizing::new(password.to_string()));
            let received = receive(hand_over(&secrets, Some(&given)).as_bytes()).unwrap();
            assert_eq!(received.password.as_ref().map(Password::expose), Some(password));
            assert_eq!(received.secrets, secrets, "the password is not a secret entry");
        }
        let empty =
            receive(hand_over(&Secrets::default(), Some(&Password::new(Zeroizing::new("p".into())))).as_bytes());
        assert!(empty.unwrap().secrets.is_empty());
        let err = receive(&b"%password: unquoted\n"[..]).unwrap_err().to_string();
        assert_eq!(err, "handed-over secrets: the password line is not a JSON string");
    }
}
