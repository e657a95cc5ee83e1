use super::Env;
use serde_json::json;
use std::time::{Duration, Instant};

/// Whether a process is gone (or a zombie nobody has reaped yet, which runs no code either).
fn is_dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/status")) {
        Err(_) => true,
        Ok(status) => status.lines().any(|l| l.starts_with("State:") && l.contains('Z')),
    }
}

async fn wait_dead(pid: u32) -> bool {
    for _ in 0..50 {
        if is_dead(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test]
async fn bash_reports_output_exit_code_and_cwd() {
    let env = Env::new("");
    let out = env.ok("bash", json!({ "command": "echo hello; echo oops >&2; exit 3", "cwd": env.root() })).await;
    assert_eq!(out["stdout"], "hello\n");
    assert_eq!(out["stderr"], "oops\n");
    assert_eq!(out["exit_code"], 3);
    assert_eq!(out["ok"], false);
    assert_eq!(out["timed_out"], false);
    assert_eq!(out["sandbox_mode"], "contain", "a config that names no mode gets the one that contains");
    let pwd = env.ok("bash", json!({ "command": "pwd", "cwd": env.root() })).await;
    assert_eq!(pwd["stdout"].as_str().unwrap().trim(), env.root().display().to_string());
    let (code, _) = env.err("bash", json!({ "command": "true", "cwd": "/definitely/not/here" })).await;
    assert_eq!(code, "invalid_cwd");
}

#[tokio::test]
async fn bash_environment_is_the_allowlist_plus_caller_env() {
    let env = Env::new("");
    let out = env.ok("bash", json!({ "command": "env", "env": { "MY_VAR": "42" } })).await;
    let allowed =
        ["PATH", "HOME", "USER", "LANG", "LC_ALL", "SHELL", "MY_VAR", "PWD", "SHLVL", "_", "OLDPWD", "TMPDIR"];
    let stdout = out["stdout"].as_str().unwrap();
    for line in stdout.lines() {
        let name = line.split('=').next().unwrap();
        assert!(allowed.contains(&name), "unexpected variable {name} in the child environment");
    }
    assert!(stdout.contains("MY_VAR=42"));
}

#[tokio::test]
async fn timeout_kills_the_whole_group_including_grandchildren() {
    // Basic mode's guarantee, seen from outside by pid (`contain` has its own pid namespace: sandbox.rs).
    let env = Env::new("[tools.bash]\nenabled = true\nsandbox_mode = \"basic\"\n");
    let pidfile = env.dir.path().join("grandchild.pid");
    let command = format!("sleep 100 & echo $! > {}; sleep 100", pidfile.display());
    let started = Instant::now();
    let out = env.ok("bash", json!({ "command": command, "timeout_seconds": 1 })).await;
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
    assert_eq!(out["timed_out"], true);
    assert_eq!(out["ok"], false);
    let pid: u32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
    assert!(wait_dead(pid).await, "grandchild {pid} survived the timeout");
}

#[tokio::test]
async fn a_cancelled_call_still_kills_the_group() {
    // Basic mode's guarantee, seen from outside by pid (`contain` has its own pid namespace: sandbox.rs).
    let env = Env::new("[tools.bash]\nenabled = true\nsandbox_mode = \"basic\"\n");
    let pidfile = env.dir.path().join("orphan.pid");
    let command = format!("sleep 100 & echo $! > {}; sleep 100", pidfile.display());
    // The agent drops the tool future when the turn times out; nothing may keep running after that.
    let call = env.call("bash", json!({ "command": command, "timeout_seconds": 60 }));
    assert!(tokio::time::timeout(Duration::from_millis(700), call).await.is_err());
    let pid: u32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
    assert!(wait_dead(pid).await, "grandchild {pid} outlived the cancelled call");
}

#[tokio::test]
async fn background_jobs_do_not_outlive_or_stall_the_call() {
    // Basic mode's guarantee, seen from outside by pid (`contain` has its own pid namespace: sandbox.rs).
    let env = Env::new("[tools.bash]\nenabled = true\nsandbox_mode = \"basic\"\n");
    let started = Instant::now();
    let out = env.ok("bash", json!({ "command": "sleep 100 & echo $!", "timeout_seconds": 30 })).await;
    assert!(started.elapsed() < Duration::from_secs(5), "a background job held the call for {:?}", started.elapsed());
    assert_eq!(out["ok"], true);
    let pid: u32 = out["stdout"].as_str().unwrap().trim().parse().unwrap();
    assert!(wait_dead(pid).await, "background job {pid} kept running");
}

#[tokio::test]
async fn timeout_is_clamped_to_the_configured_maximum() {
    let env = Env::new("[tools.bash]\nenabled = true\nmax_timeout_seconds = 1\n");
    let started = Instant::now();
    let out = env.ok("bash", json!({ "command": "sleep 30", "timeout_seconds": 600 })).await;
    assert_eq!(out["timed_out"], true);
    assert!(started.elapsed() < Duration::from_secs(6));
}

#[tokio::test]
async fn output_is_capped_and_flagged() {
    let env = Env::new("[tools.bash]\nenabled = true\nmax_output_bytes = 1000\n");
    let out = env.ok("bash", json!({ "command": "head -c 5000000 /dev/zero | tr '\\0' a" })).await;
    assert_eq!(out["truncated"], true);
    assert_eq!(out["stdout"].as_str().unwrap().len(), 1000);
    assert_eq!(out["ok"], true, "the command itself succeeded");
    let both = env
        .ok("bash", json!({ "command": "head -c 900 /dev/zero | tr '\\0' o; head -c 300 /dev/zero | tr '\\0' e >&2" }))
        .await;
    assert_eq!(both["stderr"].as_str().unwrap().len(), 300, "stderr is kept before stdout");
    assert_eq!(both["stdout"].as_str().unwrap().len(), 700);
}

#[tokio::test]
async fn bash_spills_long_output_to_a_managed_file() {
    let env = Env::new(
        "[tools.bash]\nenabled = true\nspill_to_managed_file = true\nspill_after_chars = 100\nspill_preview_chars = 10\n",
    );
    let out = env.ok("bash", json!({ "command": "seq 1 500" })).await;
    assert_eq!(out["stdout_storage"], "managed_file");
    assert_eq!(out["stdout_preview"], "1\n2\n3\n4\n5\n");
    let path = out["stdout_file_absolute_path"].as_str().unwrap();
    assert!(path.starts_with(&env.root().join("bash_output/tmp").display().to_string()));
    let saved = std::fs::read_to_string(path).unwrap();
    assert_eq!(saved.lines().count(), 500);
    // The worker set keeps bash output inline.
    let worker = minibot_tools::worker_generic_tools(&env.services);
    let inline =
        worker.get("bash").unwrap().call_json(json!({ "command": "seq 1 500" }), &Default::default()).await.unwrap();
    assert!(inline.get("stdout_storage").is_none());
}

#[tokio::test]
async fn bash_rlimit_sandbox_applies_limits() {
    let env = Env::new(
        "[tools.bash]\nenabled = true\nsandbox_mode = \"rlimit\"\n[tools.bash.rlimit]\nenabled = true\ncpu_seconds = 3\nnofile = 64\n",
    );
    let out = env.ok("bash", json!({ "command": "ulimit -t; ulimit -n; ulimit -c" })).await;
    assert_eq!(out["sandbox_mode"], "rlimit");
    assert_eq!(out["stdout"], "3\n64\n0\n");
}

#[tokio::test]
async fn sandbox_modes_that_cannot_apply_refuse_to_run_and_stop_start_up() {
    let env = Env::new("[tools.bash]\nenabled = true\nsandbox_mode = \"rlimit\"\n");
    let (code, message) = env.err("bash", json!({ "command": "touch ran" })).await;
    assert_eq!(code, "sandbox_unavailable");
    assert!(message.contains("[tools.bash.rlimit] enabled = false"), "{message}");
    assert!(!env.root().join("ran").exists(), "ran weaker in silence");
    let startup = minibot_tools::exec::sandbox::check(&env.services.config, env.services.files.as_deref()).await;
    assert!(startup.unwrap_err().to_string().starts_with("[tools.bash] sandbox_mode = \"rlimit\" cannot run here"));

    let env = Env::new(
        "[tools.bash]\nenabled = true\nsandbox_mode = \"jail\"\n[tools.bash.jail]\nenabled = true\ncommand_prefix = [\"no-such-jail-binary\"]\n",
    );
    let (code, message) = env.err("bash", json!({ "command": "true" })).await;
    assert_eq!(code, "sandbox_unavailable");
    assert!(message.contains("no-such-jail-binary"), "{message}");

    let env =
        Env::new("[tools.bash]\nenabled = true\nsandbox_mode = \"cgroup\"\n[tools.bash.cgroup]\nenabled = true\n");
    match env.call("bash", json!({ "command": "echo in" })).await {
        Ok(out) => assert_eq!((out["sandbox_mode"].as_str(), out["stdout"].as_str()), (Some("cgroup"), Some("in\n"))),
        Err(minibot_agent::ToolError::RespondToModel { code, message }) => {
            assert_eq!(code, "sandbox_unavailable");
            assert!(message.contains("systemd"), "{message}");
        }
        Err(other) => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn jail_prefix_wraps_the_command() {
    // `env -u HOME` stands in for a jail: it is on every PATH and visibly changes the child.
    let env = Env::new(
        "[tools.bash]\nenabled = true\nsandbox_mode = \"jail\"\n[tools.bash.jail]\nenabled = true\ncommand_prefix = [\"env\", \"-u\", \"HOME\"]\n",
    );
    let out = env.ok("bash", json!({ "command": "echo \"home=${HOME:-unset}\"" })).await;
    assert_eq!(out["sandbox_mode"], "jail");
    assert_eq!(out["stdout"], "home=unset\n");
}

#[tokio::test]
async fn python_runs_isolated_with_stdin() {
    let env = Env::new("");
    let out = env
        .ok("python_execute", json!({ "code": "import os, sys\nprint(input().upper())\nprint(os.getcwd())\nprint(sys.flags.isolated)", "stdin": "hi\n" }))
        .await;
    let stdout = out["stdout"].as_str().unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "HI");
    assert!(lines[1].contains("minibot_pyexec_"), "runs in a fresh temp folder: {}", lines[1]);
    assert_eq!(lines[2], "1");
    assert!(!std::path::Path::new(lines[1]).exists(), "the run folder is removed afterwards");
    assert_eq!(out["ok"], true);
    let failed = env.ok("python_execute", json!({ "code": "raise SystemExit(4)" })).await;
    assert_eq!((failed["exit_code"].as_i64(), failed["ok"].as_bool()), (Some(4), Some(false)));
    let (code, _) = env.err("python_execute", json!({ "code": "x" .repeat(40_000) })).await;
    assert_eq!(code, "code_too_large");
}

#[tokio::test]
async fn python_timeout_kills_children() {
    let env = Env::new("[tools.python_exec]\nsandbox_mode = \"basic\"\n");
    let code =
        "import subprocess, time\np = subprocess.Popen(['sleep', '100'])\nprint(p.pid, flush=True)\ntime.sleep(100)";
    let out = env.ok("python_execute", json!({ "code": code, "timeout_seconds": 1 })).await;
    assert_eq!(out["timed_out"], true);
    let pid: u32 = out["stdout"].as_str().unwrap().trim().parse().unwrap();
    assert!(wait_dead(pid).await, "python's child {pid} survived");
}

#[tokio::test]
async fn python_rlimit_caps_memory() {
    let env = Env::new(
        "[tools.python_exec]\nsandbox_mode = \"rlimit\"\n[tools.python_exec.rlimit]\nenabled = true\nmemory_mb = 200\n",
    );
    let out =
        env.ok("python_execute", json!({ "code": "x = bytearray(1024 * 1024 * 1024)\nprint('allocated')" })).await;
    assert_eq!(out["sandbox_mode"], "rlimit");
    assert_eq!(out["ok"], false);
    assert!(out["stderr"].as_str().unwrap().contains("MemoryError"), "{}", out["stderr"]);
}

#[tokio::test]
async fn python_artifacts_are_copied_into_managed_files() {
    let env = Env::new("");
    let code = "import os\nopen('table.csv','w').write('a,b\\n1,2\\n')\nopen('notes.exe','w').write('x')\nos.symlink('/etc/passwd', 'stolen.txt')";
    let out = env.ok("python_execute", json!({ "code": code, "save_artifacts": true, "artifact_globs": ["*"] })).await;
    let saved = out["artifacts_saved"].as_array().unwrap();
    assert_eq!(saved.len(), 1, "{out}");
    assert_eq!(saved[0]["path"], "generated/table.csv");
    assert_eq!(saved[0]["mime"], "text/csv");
    assert_eq!(std::fs::read_to_string(env.root().join("generated/table.csv")).unwrap(), "a,b\n1,2\n");
    let skipped = out["artifacts_skipped"].as_array().unwrap();
    assert!(skipped.iter().any(|s| s["name"] == "notes.exe" && s["reason"] == "extension_not_allowed"));
    assert!(!env.root().join("generated/stolen.txt").exists(), "a symlink must never be exported");
    let again =
        env.ok("python_execute", json!({ "code": "open('table.csv','w').write('2')", "save_artifacts": true })).await;
    assert_eq!(again["artifacts_saved"][0]["path"], "generated/table-1.csv");
    let (code, _) =
        env.err("python_execute", json!({ "code": "1", "save_artifacts": true, "artifact_subdir": "../x" })).await;
    assert_eq!(code, "path_outside_root");
}

#[tokio::test]
async fn python_environment_info_reports_the_interpreter() {
    let env = Env::new("");
    let out = env.ok("python_environment_info", json!({ "limit": 3 })).await;
    assert!(out["python_version"].as_str().unwrap().starts_with('3'));
    assert!(out["packages"].as_array().unwrap().len() <= 3);
    assert_eq!(out["sandbox_mode"], "contain");
    let none = env.ok("python_environment_info", json!({ "include_packages": false })).await;
    assert_eq!(none["packages"], json!([]));
}

#[tokio::test]
async fn python_artifacts_in_a_jail_need_a_shared_folder() {
    let jail = "[tools.python_exec.jail]\nenabled = true\ncommand_prefix = [\"env\"]\n";
    let env = Env::new(&format!("[tools.python_exec]\nsandbox_mode = \"jail\"\n{jail}"));
    let (code, _) = env.err("python_execute", json!({ "code": "print(1)", "save_artifacts": true })).await;
    assert_eq!(code, "artifacts_not_supported_in_jail");
    let plain = env.ok("python_execute", json!({ "code": "print(1)" })).await;
    assert_eq!((plain["sandbox_mode"].as_str(), plain["stdout"].as_str()), (Some("jail"), Some("1\n")));

    let env = Env::new(&format!(
        "[tools.python_exec]\nsandbox_mode = \"jail\"\nartifacts_allow_in_jail = true\n\
         artifacts_jail_shared_dir = \"jailshare\"\n{jail}"
    ));
    let code = "import os\nprint(os.getcwd())\nopen('out.json','w').write('{}')";
    let out = env.ok("python_execute", json!({ "code": code, "save_artifacts": true })).await;
    let cwd = out["stdout"].as_str().unwrap().trim().to_string();
    assert!(cwd.starts_with(&env.dir.path().join("jailshare").canonicalize().unwrap().display().to_string()), "{cwd}");
    assert_eq!(out["artifacts_saved"][0]["path"], "generated/out.json");
}
