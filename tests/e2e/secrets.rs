//! The vault end to end: a vault in MiniBot's format (written here by Python from the documented envelope) feeds
//! `${secret:NAME}`, the secret reaches the provider and nothing else, the three ways start-up refuses, and the
//! `minibot vault` commands.

use minibot_e2e::{Home, Reply, Script, ScriptedLlm, binary, kill_hard, requests_for, run, stderr, stdout};
use serde_json::json;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

const SECRET: &str = "sk-vault-e2e-5f3a9c1d7b";
const PASSWORD: &str = "e2e vault password";

/// MiniBot 0.36's vault format, from the reference: scrypt(n=32768, r=8, p=1, 16-byte salt) → AES-256-GCM with a
/// 12-byte nonce and the tag appended, in a JSON envelope of base64 fields.
const WRITE_VAULT: &str = r#"
import base64, hashlib, json, os, sys
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
path, password = sys.argv[1], sys.argv[2]
plaintext = "".join(f"{k}: {v}\n" for k, v in json.loads(sys.stdin.read()).items())
salt, nonce = os.urandom(16), os.urandom(12)
key = hashlib.scrypt(password.encode(), salt=salt, n=32768, r=8, p=1, maxmem=64 * 1024 * 1024, dklen=32)
ct = AESGCM(key).encrypt(nonce, plaintext.encode(), None)
b64 = lambda b: base64.b64encode(b).decode()
with open(path, "w") as f:
    json.dump({"version": 1, "kdf": "scrypt", "n": 32768, "r": 8, "p": 1,
               "salt": b64(salt), "nonce": b64(nonce), "ciphertext": b64(ct)}, f)
"#;

fn write_vault(path: &Path, entries: serde_json::Value) {
    let mut child = Command::new("python3")
        .args(["-c", WRITE_VAULT])
        .arg(path)
        .arg(PASSWORD)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    child.stdin.take().unwrap().write_all(entries.to_string().as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "writing the vault failed (scripts/setup-mcp-peers.sh installs `cryptography`): {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A home whose OpenAI key is `${secret:OPENAI_KEY}` from an enabled vault.
fn vault_home(llm: &ScriptedLlm, vault: &str, reference: &str, extra: &str) -> Home {
    let home = Home::new(
        &llm.base_url(),
        &format!(
            "{vault}[providers.openai]\napi_key = \"${{secret:{reference}}}\"\nbase_url = \"{}\"\n{extra}",
            llm.base_url()
        ),
    );
    write_vault(&home.path().join("secrets.vault.yml"), json!({ "OPENAI_KEY": SECRET, "OTHER": "other-value" }));
    home
}

const VAULT_ON: &str = "[vault]\nenabled = true\n";

/// Every file under `dir`, recursively, that contains `needle`.
fn files_containing(dir: &Path, needle: &str) -> Vec<String> {
    let mut hits = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return hits };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            hits.extend(files_containing(&path, needle));
        } else if let Ok(bytes) = std::fs::read(&path)
            && bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
        {
            hits.push(path.display().to_string());
        }
    }
    hits
}

#[tokio::test]
async fn a_vault_secret_reaches_the_provider_and_nothing_else() {
    // The provider's first answer is an error that echoes the key, as real providers do for a bad key: the
    // retry warning that carries it must reach the log masked.
    let llm = ScriptedLlm::start(vec![
        Script::new(
            "which secrets do I have?",
            vec![Reply::tool("list_secrets", json!({})), Reply::text("You have OPENAI_KEY and OTHER.")],
        )
        .fail_first(vec![Reply::Status(
            500,
            format!("{{\"error\":{{\"message\":\"upstream rejected key {SECRET}\"}}}}"),
        )]),
    ])
    .await;
    let home = vault_home(&llm, VAULT_ON, "OPENAI_KEY", "");
    let mut command = home.minibot(&["console", "--once", "which secrets do I have?", "--verbose"]);
    command.env("MINIBOT_VAULT_PASSWORD", PASSWORD);
    let output = run(command).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "You have OPENAI_KEY and OTHER.\n");

    // Every provider call carried the secret as the bearer token.
    let authorizations = llm.authorizations();
    assert_eq!(authorizations.len(), 3, "the failed call, its retry, and the call after the tool");
    for authorization in &authorizations {
        assert_eq!(authorization, &format!("Bearer {SECRET}"));
    }
    // The model saw names only.
    let requests = llm.requests();
    let tool_result = requests[2]["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(
        tool_result["content"].as_str().map(|c| serde_json::from_str::<serde_json::Value>(c).unwrap()),
        Some(json!({ "names": ["OPENAI_KEY", "OTHER"] }))
    );
    for request in &requests {
        assert!(!request.to_string().contains(SECRET), "a request body holds the secret: {request}");
    }

    // Nowhere else: not in the output, not in the log, not in the databases.
    assert!(!stdout(&output).contains(SECRET));
    assert!(!stderr(&output).contains(SECRET), "stderr: {}", stderr(&output));
    let log = std::fs::read_to_string(home.path().join("logs/minibot.log")).unwrap();
    assert!(log.contains("provider call failed"), "the retry was logged: {log}");
    assert!(log.contains("upstream rejected key ***"), "the echoed key is masked: {log}");
    assert!(stderr(&output).contains("upstream rejected key ***"), "stderr: {}", stderr(&output));
    assert_eq!(files_containing(&home.path().join("logs"), SECRET), Vec::<String>::new());
    assert_eq!(files_containing(&home.path().join("data"), SECRET), Vec::<String>::new());
    assert!(home.path().join("data/minibot.db").exists(), "the transcript database was written");
}

#[tokio::test]
async fn a_local_worker_gets_the_secrets_without_the_password() {
    let llm = ScriptedLlm::start(vec![
        Script::new(
            "start a background job",
            vec![Reply::tool("spawn_task", json!({ "prompt": "background job with a key" })), Reply::text("Started.")],
        )
        .delay(std::time::Duration::from_millis(800)),
        // Slower than the main turn, so the result arrives after the turn that started it.
        Script::new("background job with a key", vec![Reply::text("job done")])
            .delay(std::time::Duration::from_millis(2500)),
    ])
    .await;
    let extra = "[tasks]\nlocal_workers = 1\nprogress_interval_seconds = 0.01\n";
    let home = vault_home(&llm, "[vault]\nenabled = true\npassword_file = \"vault.pw\"\n", "OPENAI_KEY", extra);
    let password_file = home.path().join("vault.pw");
    std::fs::write(&password_file, format!("{PASSWORD}\n")).unwrap();
    let mut command = home.minibot(&["console", "--once", "start a background job"]);
    command.env_remove("MINIBOT_VAULT_PASSWORD");
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = command.spawn().unwrap();
    let pid = child.id();
    let waiter = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap());
    // Once the model is asked, the orchestrator has unlocked the vault; the worker starts only after the (delayed)
    // answer. Without the password file, a worker that tried to open the vault itself could not.
    wait_for(|| !llm.requests().is_empty()).await;
    std::fs::remove_file(&password_file).unwrap();
    let Ok(output) = tokio::time::timeout(std::time::Duration::from_secs(120), waiter).await else {
        kill_hard(pid);
        panic!("the run did not finish within 120 s");
    };
    let output = output.unwrap();
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "Started.\njob done\n");
    assert_eq!(requests_for(&llm, "background job with a key"), 1, "the worker called the model");
    assert!(llm.authorizations().iter().all(|a| a == &format!("Bearer {SECRET}")), "{:?}", llm.authorizations());
    assert_eq!(files_containing(home.path(), SECRET), Vec::<String>::new());
}

#[tokio::test]
async fn broker_credentials_come_from_the_vault() {
    let broker =
        std::env::var("MINIBOT_TEST_AMQP_URL").unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into());
    let id = uuid::Uuid::new_v4().simple().to_string();
    let llm = ScriptedLlm::start(vec![
        Script::new(
            "queue a job",
            vec![Reply::tool("spawn_task", json!({ "prompt": "remote job" })), Reply::text("Queued.")],
        ),
        Script::new("remote job", vec![Reply::text("remote job done")]),
    ])
    .await;
    let extra = format!(
        "[tasks]\nbackend = \"rabbitmq\"\nprogress_interval_seconds = 0.01\n[rabbitmq]\n\
         broker_url = \"${{secret:RABBITMQ_URL}}\"\nqueue_name = \"vault-{id}\"\nexchange_name = \"vault-{id}.tasks\"\nmessage_key = \"${{secret:MESSAGE_KEY}}\"\n"
    );
    let home = vault_home(&llm, "[vault]\nenabled = true\npassword_file = \"vault.pw\"\n", "OPENAI_KEY", &extra);
    write_vault(
        &home.path().join("secrets.vault.yml"),
        json!({ "OPENAI_KEY": SECRET, "RABBITMQ_URL": broker, "MESSAGE_KEY": "test-message-key-0123456789abcdef0123456789" }),
    );
    std::fs::write(home.path().join("vault.pw"), format!("{PASSWORD}\n")).unwrap();
    // A remote worker unlocks the same vault with its own password file.
    let mut worker = Command::new(binary("minibot-worker"))
        .arg("--config")
        .arg(home.config())
        .env_remove("MINIBOT_VAULT_PASSWORD")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut command = home.minibot(&["console", "--once", "queue a job"]);
    command.env_remove("MINIBOT_VAULT_PASSWORD");
    let output = run(command).await;
    kill_hard(worker.id());
    let _ = worker.wait();
    let mut settings = minibot_queue::amqp::AmqpSettings::new(
        &broker,
        minibot_protocol::MessageKey::new("test-message-key-0123456789abcdef0123456789").unwrap(),
    );
    settings.queue_name = format!("vault-{id}");
    settings.exchange_name = format!("vault-{id}.tasks");
    if let Ok(queue) = minibot_queue::amqp::AmqpQueue::connect(&settings, "cleanup").await {
        let _ = queue.delete_topology().await;
        queue.close().await;
    }
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "Queued.\nremote job done\n");
}

async fn wait_for(condition: impl Fn() -> bool) {
    for _ in 0..600 {
        if condition() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("timed out");
}

/// Runs `console --once` and returns its stderr, which must be one line.
async fn refused(home: &Home, password: &str) -> String {
    let mut command = home.minibot(&["console", "--once", "hello"]);
    command.env("MINIBOT_VAULT_PASSWORD", password);
    let output = run(command).await;
    assert!(!output.status.success(), "start-up went on: {}", stdout(&output));
    assert_eq!(stdout(&output), "");
    let message = stderr(&output);
    assert_eq!(message.lines().count(), 1, "one line: {message}");
    assert!(!message.contains(SECRET), "{message}");
    message
}

#[tokio::test]
async fn start_up_stops_with_one_line_naming_the_key() {
    let llm = ScriptedLlm::start(vec![]).await;
    let config_of = |home: &Home| home.config().display().to_string();

    let off = vault_home(&llm, "", "OPENAI_KEY", "");
    let message = refused(&off, PASSWORD).await;
    assert_eq!(
        message.trim_end(),
        format!(
            "minibot: {}: key providers.openai.api_key: ${{secret:OPENAI_KEY}} needs the vault, which is off: set \
             [vault] enabled = true",
            config_of(&off)
        )
    );

    let missing = vault_home(&llm, VAULT_ON, "ANTHROPIC_KEY", "");
    let message = refused(&missing, PASSWORD).await;
    assert_eq!(
        message.trim_end(),
        format!(
            "minibot: {}: key providers.openai.api_key: secret ANTHROPIC_KEY is not in the vault {}",
            config_of(&missing),
            missing.path().join("secrets.vault.yml").display()
        )
    );

    let wrong = vault_home(&llm, VAULT_ON, "OPENAI_KEY", "");
    let message = refused(&wrong, "not the password").await;
    assert_eq!(
        message.trim_end(),
        format!(
            "minibot: {}: key providers.openai.api_key: wrong vault password or damaged file: {}",
            config_of(&wrong),
            wrong.path().join("secrets.vault.yml").display()
        )
    );
    assert!(llm.requests().is_empty(), "no run reached the model");
}

/// `minibot vault ARGS` in `dir`, with `stdin` piped in. In a session of its own (`setsid`), so it has no
/// terminal to prompt on even when the tests run in one.
fn vault(dir: &Path, args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Output {
    let mut child = Command::new("setsid")
        .arg("--wait")
        .arg(binary("minibot"))
        .arg("vault")
        .args(args)
        .current_dir(dir)
        // No config file is named: the one in the platform config folder must be a temp one, not the user's.
        .env("HOME", dir)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("MINIBOT_VAULT_PASSWORD")
        .env_remove("MINIBOT_CONFIG")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A command that refuses its arguments exits without reading stdin: the pipe may then be closed already.
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    child.wait_with_output().unwrap()
}

fn code(output: &Output) -> Option<i32> {
    output.status.code()
}

#[test]
fn vault_commands_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("pw"), format!("{PASSWORD}\n")).unwrap();
    let pw = ["--password-file", "pw"];
    let env = [("MINIBOT_VAULT_PASSWORD", PASSWORD)];

    let init = vault(d, &["init"], "", &env);
    assert_eq!(code(&init), Some(0), "{}", stderr(&init));
    let path = d.join("secrets.vault.yml");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    let again = vault(d, &["init"], "", &env);
    assert_eq!(code(&again), Some(2));
    assert!(stderr(&again).contains("secrets.vault.yml already exists"), "{}", stderr(&again));

    let set = vault(d, &["set", "OPENAI_KEY", "--password-file", "pw"], &format!("{SECRET}\n"), &[]);
    assert_eq!(code(&set), Some(0), "{}", stderr(&set));
    let set = vault(d, &["set", "multi.line"], "a\nb\n", &env);
    assert_eq!(code(&set), Some(0), "{}", stderr(&set));
    let list = vault(d, &["list"], "", &env);
    assert_eq!(stdout(&list), "OPENAI_KEY\nmulti.line\n");
    assert!(!stdout(&list).contains(SECRET) && !stderr(&list).contains(SECRET));
    // What the CLI wrote is what the config loader reads.
    assert_eq!(minibot_vault_read(&path), pairs(&[("OPENAI_KEY", SECRET), ("multi.line", "a\nb")]));

    let bad_name = vault(d, &["set", "9lives"], "x", &env);
    assert_eq!(code(&bad_name), Some(2));
    assert!(stderr(&bad_name).contains("invalid secret name `9lives`"), "{}", stderr(&bad_name));
    let wrong = vault(d, &["list"], "", &[("MINIBOT_VAULT_PASSWORD", "wrong")]);
    assert_eq!(code(&wrong), Some(1));
    assert_eq!(stderr(&wrong), "minibot vault: wrong vault password or damaged file: secrets.vault.yml\n");
    let none = vault(d, &["list"], "", &[]);
    assert_eq!(code(&none), Some(2));
    assert!(stderr(&none).contains("set --password-file, set MINIBOT_VAULT_PASSWORD"), "{}", stderr(&none));

    let rm = vault(d, &["rm", "multi.line", pw[0], pw[1]], "", &[]);
    assert_eq!(code(&rm), Some(0), "{}", stderr(&rm));
    let rm_again = vault(d, &["rm", "multi.line"], "", &env);
    assert_eq!(code(&rm_again), Some(1));
    assert!(stderr(&rm_again).contains("secret multi.line is not in the vault secrets.vault.yml"));
    assert_eq!(stdout(&vault(d, &["list"], "", &env)), "OPENAI_KEY\n");

    // A message key for [rabbitmq]: random, stored, printed only when asked, never overwritten.
    let quiet = vault(d, &["generate", "MESSAGE_KEY"], "", &env);
    assert_eq!(code(&quiet), Some(0), "{}", stderr(&quiet));
    assert_eq!(stdout(&quiet), "");
    let stored = minibot_vault_read(&path);
    let key = stored.iter().find(|(k, _)| k == "MESSAGE_KEY").map(|(_, v)| v.clone()).unwrap_or_default();
    assert!(key.len() == 64 && key.bytes().all(|b| b.is_ascii_hexdigit()), "{key}");
    assert!(!stderr(&quiet).contains(&key));
    let again = vault(d, &["generate", "MESSAGE_KEY"], "", &env);
    assert_eq!(code(&again), Some(2));
    assert!(stderr(&again).contains("already in the vault"), "{}", stderr(&again));
    let printed = vault(d, &["generate", "OTHER_KEY", "--print"], "", &env);
    let other = stdout(&printed).trim().to_string();
    assert!(minibot_vault_read(&path).contains(&("OTHER_KEY".to_string(), other.clone())), "{other}");
    assert_ne!(other, key, "each key is new");
}

#[test]
fn vault_edit_goes_through_the_editor_and_leaves_no_plaintext() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let scratch = d.join("tmp");
    std::fs::create_dir(&scratch).unwrap();
    // With --config, the vault is the config's [vault] path, relative to the config folder.
    std::fs::write(d.join("config.toml"), "[vault]\npath = \"private/v.yml\"\n").unwrap();
    std::fs::create_dir(d.join("private")).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let config = d.join("config.toml");
    let config = config.to_str().unwrap();
    let tmp = scratch.to_str().unwrap();
    let env = |editor: &'static str| [("MINIBOT_VAULT_PASSWORD", PASSWORD), ("EDITOR", editor), ("TMPDIR", tmp)];

    assert_eq!(code(&vault(elsewhere.path(), &["init", "--config", config], "", &env("true"))), Some(0));
    assert!(d.join("private/v.yml").exists());
    // An editor that appends a line: the new secret is saved.
    let added =
        vault(elsewhere.path(), &["edit", "--config", config], "", &env("printf 'TOKEN: \"  padded  \"\\n' >>"));
    assert_eq!(code(&added), Some(0), "{}", stderr(&added));
    assert_eq!(minibot_vault_read(&d.join("private/v.yml")), pairs(&[("TOKEN", "  padded  ")]));
    // An edit that does not parse changes nothing and says which line.
    let broken = vault(elsewhere.path(), &["edit", "--config", config], "", &env("printf 'no colon\\n' >>"));
    assert_eq!(code(&broken), Some(2));
    assert!(stderr(&broken).contains("line 5: expected `name: value`"), "{}", stderr(&broken));
    assert!(stderr(&broken).contains("private/v.yml is unchanged"), "{}", stderr(&broken));
    assert_eq!(minibot_vault_read(&d.join("private/v.yml")), pairs(&[("TOKEN", "  padded  ")]));
    // The plaintext did not outlive the editor.
    assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0, "temp files left behind");
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Opens a vault with the crate the config loader uses, as (name, value) pairs.
fn minibot_vault_read(path: &Path) -> Vec<(String, String)> {
    let toml = format!("[vault]\nenabled = true\npath = \"{}\"\n", path.display());
    let lookup = |name: &str| (name == "MINIBOT_VAULT_PASSWORD").then(|| PASSWORD.to_string());
    let config = minibot_config::Config::from_toml(&toml, "t.toml", std::env::temp_dir(), &lookup).unwrap();
    config.secrets.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[tokio::test]
async fn a_secret_in_a_tool_result_or_a_message_is_masked_before_the_model_and_the_database() {
    // The user quotes the secret, and a file the model reads holds it: the model must get neither, and the
    // transcript must not keep it.
    let question = format!("read leak.txt, it holds {SECRET}");
    // The model sees the question masked, so the script answers to its unmasked start.
    let llm = ScriptedLlm::start(vec![Script::containing(
        "read leak.txt, it holds ***",
        vec![Reply::tool("read_file", json!({ "path": "leak.txt" })), Reply::text("I read it.")],
    )])
    .await;
    let home = vault_home(&llm, VAULT_ON, "OPENAI_KEY", "[tools.file_storage]\nenabled = true\nroot_dir = \"files\"\n");
    std::fs::create_dir_all(home.path().join("files")).unwrap();
    std::fs::write(home.path().join("files/leak.txt"), format!("token={SECRET}\n")).unwrap();
    let mut command = home.minibot(&["console", "--once", &question]);
    command.env("MINIBOT_VAULT_PASSWORD", PASSWORD);
    let output = run(command).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "I read it.\n");

    let requests = llm.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert!(!request.to_string().contains(SECRET), "a request body holds the secret: {request}");
    }
    let tool_result = requests[1]["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").unwrap();
    assert!(tool_result["content"].as_str().unwrap().contains("token=***"), "masked in the tool result: {tool_result}");
    // The provider still got its key.
    assert!(llm.authorizations().iter().all(|a| a == &format!("Bearer {SECRET}")));
    assert_eq!(files_containing(&home.path().join("data"), SECRET), Vec::<String>::new());
}

/// A provider key that is no vault value: from `OPENAI_API_KEY` (the fallback when the config names none).
const ENV_KEY: &str = "sk-env-e2e-8c41d07e2a";

/// The requests whose conversation mentions `text`, each as the provider got it.
fn requests_mentioning(llm: &ScriptedLlm, text: &str) -> Vec<serde_json::Value> {
    llm.requests().into_iter().filter(|r| r["messages"].to_string().contains(text)).collect()
}

/// The first tool message of a request.
fn tool_message(request: &serde_json::Value) -> String {
    let messages = request["messages"].as_array().unwrap();
    messages.iter().find(|m| m["role"] == "tool").map(|m| m["content"].to_string()).unwrap_or_default()
}

#[tokio::test]
async fn a_provider_key_from_the_environment_is_masked_like_a_vault_secret() {
    // The key comes from the environment twice over: through the `OPENAI_API_KEY` fallback, and through
    // `${VAR}` in the config. A file the model reads holds it, the model repeats it in a call's arguments and in
    // its answer: the provider must not get it back in a body, and the transcript must not keep it.
    for (key_line, variable) in [("", "OPENAI_API_KEY"), ("api_key = \"${MY_PROVIDER_KEY}\"\n", "MY_PROVIDER_KEY")] {
        let llm = ScriptedLlm::start(vec![Script::new(
            "read leak.txt",
            vec![
                Reply::tool("read_file", json!({ "path": "leak.txt" })),
                Reply::tool("calculate_expression", json!({ "expression": format!("len('{ENV_KEY}')") })),
                Reply::text(&format!("The file holds {ENV_KEY}.")),
            ],
        )])
        .await;
        let home = Home::new(
            &llm.base_url(),
            &format!("[providers.openai]\n{key_line}[tools.file_storage]\nenabled = true\nroot_dir = \"files\"\n"),
        );
        std::fs::create_dir_all(home.path().join("files")).unwrap();
        std::fs::write(home.path().join("files/leak.txt"), format!("OPENAI_API_KEY={ENV_KEY}\n")).unwrap();
        let mut command = home.minibot(&["console", "--once", "read leak.txt", "--verbose"]);
        // OpenAI's variable goes to the address the environment names too (not to one a config file names).
        command.env(variable, ENV_KEY).env("OPENAI_BASE_URL", llm.base_url());
        let output = run(command).await;
        assert!(output.status.success(), "{variable}: stderr: {}", stderr(&output));

        // The provider got the key where it belongs, in the header of every call.
        assert_eq!(llm.authorizations(), vec![format!("Bearer {ENV_KEY}"); 3], "{variable}");
        let requests = llm.requests();
        assert_eq!(requests.len(), 3, "{variable}");
        for request in &requests {
            assert!(!request.to_string().contains(ENV_KEY), "{variable}: a request body holds the key: {request}");
        }
        assert!(tool_message(&requests[1]).contains("OPENAI_API_KEY=***"), "{variable}: {}", requests[1]);
        let echoed = requests[2]["messages"].as_array().unwrap().iter().find_map(|m| {
            m["tool_calls"].as_array().and_then(|calls| {
                calls.iter().find(|c| c["function"]["name"] == "calculate_expression").map(|c| c.to_string())
            })
        });
        assert!(echoed.is_some_and(|call| call.contains("len('***')")), "{variable}: {}", requests[2]);

        // Not in the databases (the answer that repeats the key included), not in the log.
        assert!(home.path().join("data/minibot.db").exists(), "{variable}: the transcript database was written");
        assert_eq!(files_containing(&home.path().join("data"), ENV_KEY), Vec::<String>::new(), "{variable}");
        assert_eq!(files_containing(&home.path().join("logs"), ENV_KEY), Vec::<String>::new(), "{variable}");
        assert!(!stderr(&output).contains(ENV_KEY), "{variable}: stderr: {}", stderr(&output));
    }
}

#[tokio::test]
async fn a_local_worker_masks_what_the_assistant_masks_the_vault_password_included() {
    // The worker gets the secrets from its parent and never opens the vault, yet a file its model reads holds
    // the environment's provider key and the vault password: both are masked before its next request.
    let job = "background job reading leak.txt";
    let llm = ScriptedLlm::start(vec![
        Script::new(
            "start a background job",
            vec![Reply::tool("spawn_task", json!({ "prompt": job })), Reply::text("Started.")],
        )
        .delay(std::time::Duration::from_millis(800)),
        Script::new(job, vec![Reply::tool("read_file", json!({ "path": "leak.txt" })), Reply::text("job done")])
            .delay(std::time::Duration::from_millis(1200)),
    ])
    .await;
    let home = Home::new(
        &llm.base_url(),
        "[vault]\nenabled = true\npassword_file = \"vault.pw\"\n[providers.openai]\n\
         [tasks]\nlocal_workers = 1\nprogress_interval_seconds = 0.01\n\
         [tools.file_storage]\nenabled = true\nroot_dir = \"files\"\n",
    );
    write_vault(&home.path().join("secrets.vault.yml"), json!({ "OTHER": "other-value" }));
    std::fs::write(home.path().join("vault.pw"), format!("{PASSWORD}\n")).unwrap();
    std::fs::create_dir_all(home.path().join("files")).unwrap();
    std::fs::write(home.path().join("files/leak.txt"), format!("key={ENV_KEY} password={PASSWORD}\n")).unwrap();
    let mut command = home.minibot(&["console", "--once", "start a background job"]);
    command.env_remove("MINIBOT_VAULT_PASSWORD").env("OPENAI_API_KEY", ENV_KEY).env("OPENAI_BASE_URL", llm.base_url());
    let output = run(command).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "Started.\njob done\n");

    let worker_requests = requests_mentioning(&llm, job);
    let after_tool = worker_requests.iter().find(|r| !tool_message(r).is_empty() && tool_message(r).contains("key="));
    let after_tool =
        after_tool.unwrap_or_else(|| panic!("the worker's model never read the file: {worker_requests:?}"));
    assert!(tool_message(after_tool).contains("key=*** password=***"), "{after_tool}");
    for request in llm.requests() {
        let body = request.to_string();
        assert!(!body.contains(ENV_KEY) && !body.contains(PASSWORD), "a request body holds a secret: {body}");
    }
    assert!(llm.authorizations().iter().all(|a| a == &format!("Bearer {ENV_KEY}")), "{:?}", llm.authorizations());
    assert_eq!(files_containing(&home.path().join("data"), ENV_KEY), Vec::<String>::new());
}

/// Red-team report (#22, finding 5): a config whose base URL is not OpenAI's (a local server, or someone else's
/// host in a config from elsewhere) does not get the key in `OPENAI_API_KEY`; only OpenAI's own address does.
#[tokio::test]
async fn the_openai_key_in_the_environment_is_not_sent_to_another_base_url() {
    let llm = ScriptedLlm::start(vec![Script::new("hello", vec![Reply::text("hi")])]).await;
    let home = Home::new(&llm.base_url(), "");
    let config = std::fs::read_to_string(home.config()).unwrap().replace("api_key = \"sk-e2e\"\n", "");
    std::fs::write(home.config(), config).unwrap();
    let mut command = home.minibot(&["console", "--once", "hello"]);
    command.env("OPENAI_API_KEY", "sk-env-key-must-stay-home-4711");
    let output = run(command).await;
    assert_eq!(stdout(&output), "hi\n", "{}", stderr(&output));
    let sent = llm.authorizations();
    assert!(!sent.is_empty() && sent.iter().all(|a| !a.contains("sk-env-key")), "{sent:?}");
}
