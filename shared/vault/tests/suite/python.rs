//! Byte compatibility with MiniBot 0.36: Python writes a vault from the documented envelope (hashlib's scrypt,
//! `cryptography`'s AESGCM) and the crate opens it; the crate writes one and Python decrypts it.

use minibot_vault::{Secrets, VaultError};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// MiniBot's envelope and plaintext rules, written out in Python from the reference.
const PYTHON: &str = r#"
import base64, hashlib, json, os, sys
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

def key(password, salt, n, r, p):
    return hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, maxmem=128 * 1024 * 1024, dklen=32)

def needs_quotes(v):
    return v == "" or v != v.strip() or "\n" in v or v[0] in "\"'#-"

def dump(entries):
    return "".join(f"{k}: {json.dumps(v) if needs_quotes(v) else v}\n" for k, v in sorted(entries.items()))

def load(text):
    out = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        k, v = line.split(":", 1)
        v = v.strip()
        out[k.strip()] = json.loads(v) if v.startswith('"') else v
    return out

mode, path, password = sys.argv[1], sys.argv[2], sys.argv[3]
if mode == "write":
    entries = json.loads(sys.stdin.read())
    salt, nonce = os.urandom(16), os.urandom(12)
    ct = AESGCM(key(password, salt, 32768, 8, 1)).encrypt(nonce, dump(entries).encode(), None)
    env = {"version": 1, "kdf": "scrypt", "n": 32768, "r": 8, "p": 1,
           "salt": base64.b64encode(salt).decode(), "nonce": base64.b64encode(nonce).decode(),
           "ciphertext": base64.b64encode(ct).decode()}
    with open(path, "w") as f:
        json.dump(env, f)
    os.chmod(path, 0o600)
else:
    env = json.load(open(path))
    assert env["version"] == 1 and env["kdf"] == "scrypt", env
    k = key(password, base64.b64decode(env["salt"]), env["n"], env["r"], env["p"])
    plain = AESGCM(k).decrypt(base64.b64decode(env["nonce"]), base64.b64decode(env["ciphertext"]), None).decode()
    print(json.dumps({"plaintext": plain, "entries": load(plain)}))
"#;

fn python(args: &[&str], stdin: &str) -> String {
    use std::io::Write;
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(PYTHON)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "python3 failed (the `cryptography` package comes from scripts/setup-mcp-peers.sh): {stderr}"
    );
    String::from_utf8(output.stdout).unwrap()
}

fn entries() -> BTreeMap<String, String> {
    [
        ("OPENAI_KEY", "sk-proj-abc123"),
        ("empty", ""),
        ("padded", "  spaced  "),
        ("multi.line", "first\nsecond"),
        ("quote-start", "\"quoted\""),
        ("hash_start", "#not a comment"),
        ("dash", "-leading"),
        ("unicode", "пароль ✓"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

#[test]
fn a_vault_written_by_python_opens_here() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("secrets.vault.yml");
    let path_text = path.to_str().unwrap();
    python(&["write", path_text, "correct horse"], &serde_json::to_string(&entries()).unwrap());

    let secrets = minibot_vault::read(&path, "correct horse").unwrap();
    assert_eq!(secrets, Secrets::new(entries()));
    match minibot_vault::read(&path, "wrong") {
        Err(VaultError::WrongPassword { path: named }) => assert_eq!(named, path),
        other => panic!("expected a wrong-password error, got {other:?}"),
    }
}

#[test]
fn a_vault_written_here_opens_in_python() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("secrets.vault.yml");
    minibot_vault::write(&path, "correct horse", &Secrets::new(entries())).unwrap();
    let out: serde_json::Value =
        serde_json::from_str(&python(&["read", path.to_str().unwrap(), "correct horse"], "")).unwrap();
    let decrypted: BTreeMap<String, String> = serde_json::from_value(out["entries"].clone()).unwrap();
    assert_eq!(decrypted, entries());
    // The lines are MiniBot's: plain where plain is safe, JSON-quoted otherwise.
    let plaintext = out["plaintext"].as_str().unwrap();
    assert!(plaintext.contains("OPENAI_KEY: sk-proj-abc123\n"), "{plaintext}");
    assert!(plaintext.contains("empty: \"\"\n") && plaintext.contains("multi.line: \"first\\nsecond\"\n"));
    assert!(plaintext.contains("unicode: пароль ✓\n"), "{plaintext}");
    assert_file_is_private(&path);
}

fn assert_file_is_private(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(path).unwrap().permissions().mode() & 0o777, 0o600);
}
