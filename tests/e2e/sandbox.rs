//! The `contain` sandbox with the real binary: a config that names no sandbox mode gets it; the model's `bash`
//! cannot read the assistant's environment or its config, nor reach the network; a host that cannot provide the
//! mode stops start-up with one line.

use minibot_e2e::{Home, Reply, Script, ScriptedLlm, run, stderr, stdout, tool_result};
use serde_json::json;

const ENV_CANARY: &str = "e2e-env-secret-4711";
const CONFIG_CANARY: &str = "config-canary-4711";

#[tokio::test]
async fn the_model_cannot_read_the_assistants_environment_or_config_nor_reach_the_network() {
    let placeholder = ScriptedLlm::start(vec![]).await;
    let home = Home::new(&placeholder.base_url(), &format!("# {CONFIG_CANARY}\n[tools.bash]\nenabled = true\n"));
    let after_colon = placeholder.base_url().rsplit(':').next().unwrap().to_string();
    let port: u16 = after_colon.chars().take_while(char::is_ascii_digit).collect::<String>().parse().unwrap();
    let command = format!(
        "tr '\\0' '\\n' </proc/$PPID/environ; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' <\"$f\"; done; \
         cat {config}; exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected",
        config = home.config().display()
    );
    let llm = ScriptedLlm::start(vec![Script::new(
        "probe",
        vec![Reply::tool("bash", json!({ "command": command })), Reply::text("probed")],
    )])
    .await;
    let config = std::fs::read_to_string(home.config()).unwrap().replace(&placeholder.base_url(), &llm.base_url());
    std::fs::write(home.config(), config).unwrap();
    let mut command = home.minibot(&["console", "--once", "probe"]);
    command.env("MINIBOT_TEST_SECRET", ENV_CANARY);
    let output = run(command).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "probed\n");
    let result = tool_result(&llm);
    assert_eq!(result["sandbox_mode"], "contain", "{result}");
    let seen =
        format!("{}{}", result["stdout"].as_str().unwrap_or_default(), result["stderr"].as_str().unwrap_or_default());
    assert!(!seen.contains(ENV_CANARY), "the assistant's environment was read: {seen}");
    assert!(!seen.contains(CONFIG_CANARY), "the config was read: {seen}");
    assert!(!seen.contains("connected"), "the command reached the network: {seen}");
}

#[tokio::test]
async fn a_sandbox_this_host_cannot_provide_stops_start_up_with_one_line() {
    let llm = ScriptedLlm::start(vec![Script::new("hello", vec![Reply::text("hi")])]).await;
    let home = Home::new(&llm.base_url(), "");
    let missing = "/nonexistent/minibot-sandbox";
    let mut command = home.minibot(&["console", "--once", "hello"]);
    command.env("MINIBOT_SANDBOX_HELPER", missing);
    let output = run(command).await;
    assert!(!output.status.success(), "start-up went on: {}", stdout(&output));
    let message = stderr(&output);
    assert_eq!(message.lines().count(), 1, "one line: {message}");
    assert!(message.contains("[tools.python_exec] sandbox_mode = \"contain\" cannot run here"), "{message}");
    assert!(message.contains(missing), "{message}");
    assert!(llm.requests().is_empty(), "a turn ran without its sandbox");

    // Naming a mode this host has (MiniBot's names still work) starts it.
    let home = Home::new(&llm.base_url(), "[tools.python_exec]\nsandbox_mode = \"basic\"\n");
    let mut command = home.minibot(&["console", "--once", "hello"]);
    command.env("MINIBOT_SANDBOX_HELPER", missing);
    let output = run(command).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "hi\n");
}

/// Red-team report (#22, finding 1): `minibot init` keeps the user's main config, vault and generated vault
/// password in `~/.config/minibot`, and the history in `~/.local/share/minibot`. A project's own config (here,
/// one in another folder) must not leave them to its model's `bash`, nor its file tools.
#[tokio::test]
async fn a_project_config_does_not_open_the_users_main_vault_or_history() {
    let user_home = tempfile::tempdir().unwrap();
    let main_config = user_home.path().join(".config/minibot");
    let main_data = user_home.path().join(".local/share/minibot");
    std::fs::create_dir_all(&main_config).unwrap();
    std::fs::create_dir_all(&main_data).unwrap();
    std::fs::write(main_config.join("vault.password"), "main-vault-password-4711\n").unwrap();
    std::fs::write(main_config.join("secrets.vault.yml"), "main-vault-4711\n").unwrap();
    std::fs::write(main_config.join("config.toml"), "# main-config-4711\n").unwrap();
    std::fs::write(main_data.join("minibot.db"), "my bank PIN is 4711\n").unwrap();
    let command = format!(
        "cat {c}/vault.password {c}/secrets.vault.yml {c}/config.toml {d}/minibot.db; ls {d}",
        c = main_config.display(),
        d = main_data.display()
    );
    let llm = ScriptedLlm::start(vec![Script::new(
        "probe",
        vec![Reply::tool("bash", json!({ "command": command })), Reply::text("probed")],
    )])
    .await;
    let project = Home::new(&llm.base_url(), "[tools.bash]\nenabled = true\n");
    let mut command = project.minibot(&["console", "--once", "probe"]);
    command.env("HOME", user_home.path()).env_remove("XDG_CONFIG_HOME").env_remove("XDG_DATA_HOME");
    let output = run(command).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let result = tool_result(&llm);
    let seen =
        format!("{}{}", result["stdout"].as_str().unwrap_or_default(), result["stderr"].as_str().unwrap_or_default());
    for secret in ["main-vault-password-4711", "main-vault-4711", "main-config-4711", "bank PIN"] {
        assert!(!seen.contains(secret), "{secret} was read: {seen}");
    }
}
