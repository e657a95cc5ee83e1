//! What this host can enforce, asked of the helper itself (`minibot-sandbox --probe`), because the answer
//! depends on the kernel and on what the container or service manager around the assistant allows.

use crate::Helper;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    /// The Landlock ABI the kernel offers (0: none).
    pub landlock_abi: u32,
    /// Whether seccomp filters can be installed.
    pub seccomp: bool,
    /// `None` when new user, pid and mount namespaces work here; otherwise why not.
    pub namespaces_refused: Option<String>,
}

impl Capabilities {
    /// Why the `contain` mode cannot run here, if it cannot: Landlock and seccomp are required; namespaces
    /// are used when offered and replaced by a subreaper when not.
    pub fn missing(&self) -> Option<String> {
        if self.landlock_abi == 0 {
            return Some("the kernel offers no Landlock (Linux 5.13 or later with `landlock` in the LSM list)".into());
        }
        if !self.seccomp {
            return Some("the kernel offers no seccomp filters".into());
        }
        if let Some(refused) = &self.namespaces_refused
            && self.landlock_abi < 6
        {
            return Some(format!(
                "namespaces are refused here ({refused}) and Landlock ABI {} cannot keep signals inside the sandbox \
                 without them (ABI 6, Linux 6.12, can)",
                self.landlock_abi
            ));
        }
        None
    }

    /// The layers a command gets, for tool results and `get_settings`.
    pub fn layers(&self) -> Vec<&'static str> {
        let mut layers = vec!["landlock", "seccomp"];
        if self.namespaces_refused.is_none() {
            layers.push("pid-namespace");
        } else {
            layers.push("subreaper");
        }
        layers
    }
}

/// Runs `helper --probe`.
pub fn probe(helper: &Helper) -> Result<Capabilities, String> {
    let shown = helper.program.display().to_string();
    let helper_shown = Path::new(&shown);
    let mut child = std::process::Command::new(&helper.program)
        .args(&helper.leading)
        .arg("--probe")
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", helper_shown.display()))?;
    // The probe forks and mounts; it answers in milliseconds, and a hung one must not hang start-up.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if std::time::Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{} --probe did not answer within 10 s", helper_shown.display()));
            }
            Err(e) => return Err(format!("lost {} --probe: {e}", helper_shown.display())),
        }
    }
    let output =
        child.wait_with_output().map_err(|e| format!("cannot read {} --probe: {e}", helper_shown.display()))?;
    if !output.status.success() {
        return Err(format!(
            "{} --probe failed ({}): {}",
            helper_shown.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("{} --probe answered something unreadable: {e}", helper_shown.display()))
}
