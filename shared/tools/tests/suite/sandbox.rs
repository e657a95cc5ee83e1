//! The `contain` sandbox, probed the way a hostile model would: with `bash` and `python_execute` in the mode a
//! config gets when it names none.

use super::Env;
use serde_json::{Value, json};
use std::time::Duration;

fn stdout(out: &Value) -> String {
    format!("{}{}", out["stdout"].as_str().unwrap_or_default(), out["stderr"].as_str().unwrap_or_default())
}

#[tokio::test]
async fn ordinary_commands_and_code_work_and_write_in_the_root_and_their_temp_folder() {
    let env = Env::new("");
    let root = env.root();
    let out = env
        .ok(
            "bash",
            json!({ "command": "echo hi > note.txt && cat note.txt && echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && ls /usr/bin | head -1", "cwd": root }),
        )
        .await;
    assert_eq!(out["exit_code"], 0, "{out}");
    assert!(stdout(&out).starts_with("hi\nt\n"), "{out}");
    assert_eq!(std::fs::read_to_string(root.join("note.txt")).unwrap(), "hi\n");
    assert_eq!(out["sandbox_mode"], "contain");
    let layers: Vec<&str> = out["sandbox_layers"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(layers.starts_with(&["landlock", "seccomp"]), "{layers:?}");

    // multiprocessing needs POSIX semaphores: a private /dev/shm.
    let code = format!(
        "import json, multiprocessing\nopen({:?}, 'w').write(json.dumps([1]))\n\
         with multiprocessing.Pool(2) as pool:\n    print(sum(pool.map(abs, range(4))))",
        root.join("py.json")
    );
    let out = env.ok("python_execute", json!({ "code": code })).await;
    assert_eq!(out["stdout"], "6\n", "{out}");
    assert_eq!(std::fs::read_to_string(root.join("py.json")).unwrap(), "[1]");
}

#[tokio::test]
async fn the_rest_of_the_file_system_is_read_only() {
    let env = Env::new("");
    let outside = env.outside();
    let command = format!(
        "cat {0}/secret.txt; echo changed > {0}/secret.txt; touch {0}/new; echo x > /tmp/loose",
        outside.display()
    );
    let out = env.ok("bash", json!({ "command": command })).await;
    assert!(stdout(&out).contains("top secret"), "reading outside the root is allowed: {out}");
    assert_eq!(std::fs::read_to_string(outside.join("secret.txt")).unwrap(), "top secret\n");
    assert!(!outside.join("new").exists());
    // Landlock refuses with "Permission denied"; with namespaces the mounts are read-only too, which says so.
    let refused =
        stdout(&out).matches("Permission denied").count() + stdout(&out).matches("Read-only file system").count();
    assert!(refused >= 3, "{out}");
}

#[tokio::test]
async fn the_config_vault_data_and_logs_cannot_be_read() {
    let env = Env::new("");
    let base = env.dir.path();
    let files = [
        ("config.toml", "api_key = \"sk-config-secret\"\n"),
        ("secrets.vault.yml", "vault-secret\n"),
        ("data/minibot.db", "db-secret\n"),
        ("logs/minibot.log", "log-secret\n"),
    ];
    for (name, text) in files {
        std::fs::create_dir_all(base.join(name).parent().unwrap()).unwrap();
        std::fs::write(base.join(name), text).unwrap();
    }
    std::os::unix::fs::symlink(base.join("config.toml"), env.root().join("config-link.toml")).unwrap();
    let command = format!(
        "cd {0}; cat config.toml secrets.vault.yml data/minibot.db logs/minibot.log; ls data logs; \
         cat files/config-link.toml; grep -r secret . 2>/dev/null",
        base.display()
    );
    let out = env.ok("bash", json!({ "command": command })).await;
    let seen = stdout(&out);
    for secret in ["sk-config-secret", "vault-secret", "db-secret", "log-secret"] {
        assert!(!seen.contains(secret), "{secret} was read: {seen}");
    }
    assert!(seen.contains("Permission denied"), "{seen}");

    let code = format!("print(open({:?}).read())", base.join("config.toml"));
    let (out, _) = (env.ok("python_execute", json!({ "code": code })).await, ());
    assert!(!stdout(&out).contains("sk-config-secret"), "{out}");
    assert!(stdout(&out).contains("PermissionError"), "{out}");
}

/// Without a config file the state lives in the platform data folder (`~/.local/share/minibot`), which is not
/// under the config's folder: it is hidden whole all the same, not just the database files.
#[tokio::test]
async fn without_a_config_file_the_platform_data_folder_cannot_be_read() {
    let dir = tempfile::tempdir().unwrap();
    let (home, cwd) = (dir.path().join("home"), dir.path().join("work"));
    std::fs::create_dir_all(&cwd).unwrap();
    let vars: minibot_config::Vars = [
        ("HOME", home.to_str().unwrap()),
        ("MINIBOT__TOOLS__FILE_STORAGE__ENABLED", "true"),
        ("MINIBOT__TOOLS__BASH__ENABLED", "true"),
    ]
    .into_iter()
    .collect();
    let config = minibot_config::Config::load_from(
        None,
        &cwd,
        &vars,
        minibot_config::Unlock::Password(&minibot_vault::NoPrompt),
    )
    .unwrap();
    let data = config.data_dir();
    assert!(data.starts_with(&home) && !data.starts_with(&config.base_dir), "{data:?} {:?}", config.base_dir);
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("minibot.db"), "db-secret\n").unwrap();
    std::fs::write(data.join("notes.txt"), "kept-next-to-the-db\n").unwrap();
    let env = super::Env::with_config(dir, config);
    let command = format!("cat {0}/minibot.db {0}/notes.txt; ls {0}", data.display());
    let seen = stdout(&env.ok("bash", json!({ "command": command })).await);
    for secret in ["db-secret", "kept-next-to-the-db"] {
        assert!(!seen.contains(secret), "{secret} was read: {seen}");
    }
    assert!(seen.contains(&format!("cannot open directory '{}'", data.display())), "{seen}");
}

#[tokio::test]
async fn the_assistants_environment_is_not_readable() {
    // Cargo runs this test with CARGO_MANIFEST_DIR in its environment, as the assistant runs with its API keys.
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    let env = Env::new("");
    let command = "tr '\\0' '\\n' </proc/$PPID/environ; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' <\"$f\"; done";
    let out = env.ok("bash", json!({ "command": command })).await;
    assert!(!stdout(&out).contains("CARGO_MANIFEST_DIR"), "{out}");

    let code = "import os\nfor p in os.listdir('/proc'):\n    try: print(open(f'/proc/{p}/environ','rb').read())\n    except Exception: pass";
    let out = env.ok("python_execute", json!({ "code": code })).await;
    assert!(!stdout(&out).contains("CARGO_MANIFEST_DIR"), "{out}");
}

#[tokio::test]
async fn the_network_is_off_unless_the_config_allows_it() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let bash = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let python = format!("import socket\nsocket.create_connection(('127.0.0.1', {port}), 2)\nprint('connected')");

    let env = Env::new("");
    let out = env.ok("bash", json!({ "command": bash })).await;
    assert!(!stdout(&out).contains("connected\n"), "{out}");
    let out = env.ok("python_execute", json!({ "code": python })).await;
    assert!(!out["stdout"].as_str().unwrap().contains("connected"), "{out}");
    assert!(listener.accept().is_err(), "a sandboxed command reached the listener");
    assert_eq!(out["sandbox_network"], false);

    let env =
        Env::new("[tools.bash]\nenabled = true\nallow_network = true\n[tools.python_exec]\nallow_network = true\n");
    let out = env.ok("bash", json!({ "command": bash })).await;
    assert_eq!(out["stdout"], "connected\n", "{out}");
    let out = env.ok("python_execute", json!({ "code": python })).await;
    assert_eq!(out["stdout"], "connected\n", "{out}");
    assert!(listener.accept().is_ok());
}

#[tokio::test]
async fn nothing_a_command_starts_outlives_the_call() {
    let env = Env::new("");
    let root = env.root();
    let late = |name: &str| format!("sleep 2; echo alive > {}", root.join(name).display());
    let bash = format!(
        "setsid sh -c '{}' & nohup sh -c '{}' >/dev/null 2>&1 & echo started",
        late("bash-setsid"),
        late("bash-nohup")
    );
    let python = format!(
        "import subprocess\nsubprocess.Popen(['/bin/sh', '-c', {:?}], start_new_session=True)\nprint('started')",
        late("python-session")
    );
    let timed = format!("setsid sh -c '{}' & sleep 30", late("bash-timeout"));
    // The agent drops the tool future when the turn times out or is stopped.
    let cancelled = format!("setsid sh -c '{}' & sleep 30", late("bash-cancelled"));
    let cancelled = tokio::time::timeout(Duration::from_millis(700), env.call("bash", json!({ "command": cancelled })));
    let (a, b, c, d) = tokio::join!(
        env.ok("bash", json!({ "command": bash })),
        env.ok("python_execute", json!({ "code": python })),
        env.ok("bash", json!({ "command": timed, "timeout_seconds": 0.5 })),
        cancelled,
    );
    assert!(d.is_err(), "the call to cancel ended by itself");
    assert_eq!((a["stdout"].as_str(), b["stdout"].as_str()), (Some("started\n"), Some("started\n")), "{a} {b}");
    assert_eq!(c["timed_out"], true, "{c}");
    tokio::time::sleep(Duration::from_millis(3500)).await;
    for name in ["bash-setsid", "bash-nohup", "python-session", "bash-timeout", "bash-cancelled"] {
        assert!(!root.join(name).exists(), "a process started by the call ({name}) outlived it");
    }
}

#[tokio::test]
async fn a_secret_inside_the_writable_root_stops_start_up() {
    let env = Env::new("[tools.file_storage]\nenabled = true\nroot_dir = \".\"\n");
    let error =
        minibot_tools::exec::sandbox::check(&env.services.config, env.services.files.as_deref()).await.unwrap_err();
    let text = error.to_string();
    assert!(text.starts_with("[tools.bash] sandbox_mode = \"contain\" cannot run here"), "{text}");
    assert!(text.contains("config.toml"), "{text}");
}
