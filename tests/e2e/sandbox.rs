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
