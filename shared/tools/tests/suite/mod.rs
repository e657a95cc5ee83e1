mod calculator;
mod confinement;
mod delivery;
mod exec;
mod files;
mod grep;
mod guarded;
mod http;
mod leaks;
mod patch_tool;
mod paths;
mod providers;
mod sandbox;
mod settings;
mod skills;
mod spill;
mod tasks;
mod walks;

use minibot_agent::{ChannelCapabilities, ToolContext, ToolError, ToolRegistry};
use minibot_config::Config;
use minibot_tools::{ToolServices, main_agent_tools};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tempfile::TempDir;

/// A temp folder with a config file base, a managed root at `<dir>/files` and an `outside` folder next to it
/// that no tool may touch.
pub struct Env {
    pub dir: TempDir,
    pub tools: ToolRegistry,
    pub services: ToolServices,
}

impl Env {
    /// `extra` is appended to a config that turns on file storage, grep and bash.
    pub fn new(extra: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("outside")).unwrap();
        std::fs::write(dir.path().join("outside/secret.txt"), "top secret\n").unwrap();
        // Base sections the test does not set itself. Spill is off unless a test turns it on, so results
        // arrive whole.
        let mut toml = String::new();
        for (header, body) in [
            ("[tools.file_storage]", "enabled = true\nroot_dir = \"files\"\n"),
            ("[tools.grep]", "enabled = true\n"),
            ("[tools.bash]", "enabled = true\n"),
            ("[tools.tool_output_spill]", "enabled = false\n"),
        ] {
            if !extra.contains(header) {
                toml.push_str(&format!("{header}\n{body}"));
            }
        }
        toml.push_str(extra);
        let config = Config::from_toml(&toml, "test.toml", dir.path(), &|_| None).unwrap();
        Self::with_config(dir, config)
    }

    /// An environment around a config loaded elsewhere (its folders under `dir`).
    pub fn with_config(dir: TempDir, config: Config) -> Self {
        let services = ToolServices::new(Arc::new(config), None).unwrap();
        let tools = main_agent_tools(&services);
        Self { dir, tools, services }
    }

    pub fn root(&self) -> PathBuf {
        self.dir.path().join("files").canonicalize().unwrap()
    }

    pub fn outside(&self) -> PathBuf {
        self.dir.path().join("outside")
    }

    /// Calls a tool as a turn on a channel that can deliver files would.
    pub async fn call(&self, name: &str, args: Value) -> Result<Value, ToolError> {
        let capabilities = ChannelCapabilities { files: true, ..Default::default() };
        let ctx = ToolContext { channel: "test".into(), chat_id: Some(1), capabilities, ..Default::default() };
        self.call_in(name, args, &ctx).await
    }

    pub async fn call_in(&self, name: &str, args: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let tool = self.tools.get(name).unwrap_or_else(|| panic!("tool {name} not registered: {:?}", self.tools));
        tool.call_json(args, ctx).await
    }

    pub async fn ok(&self, name: &str, args: Value) -> Value {
        match self.call(name, args.clone()).await {
            Ok(value) => value,
            Err(err) => panic!("{name}({args}) failed: {err:?}"),
        }
    }

    /// The error code of a call that must fail.
    pub async fn err(&self, name: &str, args: Value) -> (String, String) {
        match self.call(name, args.clone()).await {
            Ok(value) => panic!("{name}({args}) should fail, got {value}"),
            Err(ToolError::RespondToModel { code, message }) => (code, message),
            Err(other) => panic!("{name}({args}) failed fatally: {other:?}"),
        }
    }

    pub fn write(&self, rel: &str, content: &str) {
        let path = self.root().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
}

/// Every file under `dir` (relative path → content), for comparing trees.
pub fn tree(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    fn walk(base: &Path, dir: &Path, out: &mut std::collections::BTreeMap<String, Vec<u8>>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let kind = entry.file_type().unwrap();
            let rel = path.strip_prefix(base).unwrap().to_string_lossy().into_owned();
            if kind.is_symlink() {
                out.insert(rel, b"<symlink>".to_vec());
            } else if kind.is_dir() {
                walk(base, &path, out);
            } else {
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    walk(dir, dir, &mut out);
    out
}
