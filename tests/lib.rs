#![allow(clippy::expect_used, clippy::unwrap_used)]
//! End-to-end tests and benchmarks of the real `minibot` and `minibot-worker` binaries. The helpers here write a
//! config into a temp folder and run a binary against it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub use minibot_test_support::{Reply, Script, ScriptedLlm, binary};

pub mod procfs;
mod terminal;
pub mod web;
pub use terminal::{Terminal, capture_screen, in_a_terminal};

/// A temp folder holding a config that points the model at `base_url`.
pub struct Home {
    pub dir: tempfile::TempDir,
}

impl Home {
    pub fn new(base_url: &str, extra: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = format!(
            "[llm]\nbase_url = \"{base_url}\"\napi_key = \"sk-e2e\"\nmodel = \"e2e-model\"\nretry_delay_seconds = 0.01\n{extra}"
        );
        std::fs::write(dir.path().join("config.toml"), config).unwrap();
        Self { dir }
    }

    pub fn config(&self) -> PathBuf {
        self.dir.path().join("config.toml")
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `minibot <args> --config <this config>`, run from an unrelated working directory.
    pub fn minibot(&self, args: &[&str]) -> Command {
        let mut command = Command::new(binary("minibot"));
        command
            .args(args)
            .arg("--config")
            .arg(self.config())
            .current_dir(std::env::temp_dir())
            .env_remove("OPENAI_API_KEY")
            .env_remove("OPENAI_BASE_URL")
            .env_remove("MINIBOT_CONFIG")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null());
        command
    }
}

/// The result of the turn's one tool call as the model read it in its second (and last) request.
pub fn tool_result(llm: &ScriptedLlm) -> serde_json::Value {
    let requests = llm.requests();
    assert_eq!(requests.len(), 2, "the model is asked again after the call: {requests:?}");
    let tool = requests[1]["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").cloned().unwrap();
    serde_json::from_str(tool["content"].as_str().unwrap()).unwrap()
}

/// Runs a command on a blocking thread so the scripted server keeps serving meanwhile. A run that takes more
/// than two minutes is killed and fails the test instead of hanging the suite.
pub async fn run(mut command: Command) -> Output {
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = command.spawn().unwrap();
    let pid = child.id();
    let waiter = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap());
    match tokio::time::timeout(std::time::Duration::from_secs(120), waiter).await {
        Ok(output) => output.unwrap(),
        Err(_) => {
            kill_hard(pid);
            panic!("{command:?} did not finish within 120 s");
        }
    }
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).to_string()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}

/// Processes whose parent is `pid` (from /proc).
pub fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return out };
    for entry in entries.flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else { continue };
        // The command name is in parentheses and may hold spaces; the fields after it are fixed.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else { continue };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(1).and_then(|p| p.parse::<u32>().ok()) == Some(pid) {
            out.push(child);
        }
    }
    out
}

/// SIGKILL, as a crash would.
pub fn kill_hard(pid: u32) {
    let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
}

/// How many model requests had `text` as their last user message (a worker's or a turn's own requests).
pub fn requests_for(llm: &ScriptedLlm, text: &str) -> usize {
    llm.requests()
        .iter()
        .filter(|r| {
            r["messages"]
                .as_array()
                .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
                .and_then(|m| m["content"].as_str())
                == Some(text)
        })
        .count()
}
