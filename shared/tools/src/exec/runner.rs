//! The process runner shared by `bash`, `python_execute` and `python_environment_info`.
//!
//! Every child starts in a new process group, with an environment built from an allowlist, stdin either a
//! given text or `/dev/null`, and stdout/stderr read incrementally into capped buffers (the rest is drained
//! and dropped so a chatty child never blocks on a full pipe). When the time runs out, or as soon as the
//! command itself returns, the whole group gets SIGKILL: background jobs (`sleep 100 &`) would otherwise
//! outlive the call and keep the pipes open.

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

/// How long pipes may stay open after the group was killed. A process that left the group with `setsid` can
/// hold them forever; past this the call returns without its remaining output.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// Limits applied with `setrlimit` in the child before `exec`. `None` leaves a limit as inherited.
pub type Rlimits = minibot_sandbox::Limits;

/// What to run.
#[derive(Debug, Clone)]
pub struct RunSpec {
    pub program: String,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    /// The complete environment; nothing else is inherited.
    pub env: Vec<(String, String)>,
    pub stdin: Option<Vec<u8>>,
    pub timeout: Duration,
    /// Cap on stdout and stderr together.
    pub max_output_bytes: usize,
    pub rlimits: Option<Rlimits>,
    /// At the timeout, ask the program (the sandbox helper) with SIGTERM to end itself and everything it started
    /// before the group is killed: processes that left the group are reached only that way.
    pub graceful_stop: bool,
    /// The word that starts the sandbox helper's own report lines on stderr: those lines are taken out of
    /// stderr into [`RunOutput::helper_report`], also past the output cap.
    pub report_tag: Option<String>,
}

/// How long a helper asked to stop may take before the group is killed.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// What happened.
#[derive(Debug, Clone)]
pub struct RunOutput {
    /// `None` when the process was killed by a signal.
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
    pub truncated: bool,
    pub duration: Duration,
    /// What the sandbox helper reported (its set-up failures, the bounds the command ran into), one line each,
    /// without the tag; empty without a tag.
    pub helper_report: String,
}

impl RunOutput {
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot start `{program}`: {source}")]
    Spawn { program: String, source: std::io::Error },
    #[error("lost track of the child process: {0}")]
    Wait(std::io::Error),
}

/// Builds the child environment: the allowlisted variables of this process (or all of them), then `extra`.
pub fn build_env(pass_parent_env: bool, allowlist: &[String], extra: &[(String, String)]) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = if pass_parent_env {
        std::env::vars().collect()
    } else {
        allowlist.iter().filter_map(|name| std::env::var(name).ok().map(|value| (name.clone(), value))).collect()
    };
    for (key, value) in extra {
        env.retain(|(k, _)| k != key);
        env.push((key.clone(), value.clone()));
    }
    env
}

pub async fn run(spec: RunSpec) -> Result<RunOutput, RunError> {
    let started = Instant::now();
    let mut command = Command::new(&spec.program);
    command
        .args(&spec.args)
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(if spec.stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        // A helper dropped mid-call is asked to stop (GroupGuard) rather than killed at once: only it can end
        // the command's processes, which live in a session of their own.
        .kill_on_drop(!spec.graceful_stop);
    if let Some(limits) = &spec.rlimits {
        apply_rlimits(&mut command, limits.clone());
    }
    let mut child = command.spawn().map_err(|source| RunError::Spawn { program: spec.program.clone(), source })?;
    let pgid = child.id().and_then(|id| i32::try_from(id).ok()).map(Pid::from_raw);
    // If the caller stops waiting (the turn timed out and this future is dropped), kill_on_drop would reach
    // only the direct child; the guard takes the rest of the group with it.
    let mut guard = GroupGuard { pgid, graceful: spec.graceful_stop };

    if let (Some(input), Some(mut stdin)) = (spec.stdin, child.stdin.take()) {
        // Written from a task: a child that never reads stdin must not block the call.
        tokio::spawn(async move {
            let _ = stdin.write_all(&input).await;
        });
    }
    let cap = spec.max_output_bytes;
    let stdout = child.stdout.take().map(|pipe| tokio::spawn(read_capped(pipe, cap)));
    let stderr = child.stderr.take().map(|pipe| tokio::spawn(read_capped(pipe, cap)));

    let (mut status, timed_out) = match tokio::time::timeout(spec.timeout, child.wait()).await {
        Ok(status) => (Some(status.map_err(RunError::Wait)?), false),
        Err(_) => (None, true),
    };
    if timed_out
        && spec.graceful_stop
        && let Some(pid) = child.id().and_then(|id| i32::try_from(id).ok())
    {
        let _ = nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGTERM);
        if let Ok(waited) = tokio::time::timeout(STOP_GRACE, child.wait()).await {
            status = Some(waited.map_err(RunError::Wait)?);
        }
    }
    if let Some(pgid) = pgid {
        // ESRCH (group already empty) is the normal case for a command that left nothing behind.
        let _ = killpg(pgid, Signal::SIGKILL);
    }
    let status: ExitStatus = match status {
        Some(status) => status,
        None => child.wait().await.map_err(RunError::Wait)?,
    };
    guard.pgid = None;
    let (stdout, stdout_over, _) = collect(stdout).await;
    let (stderr, stderr_over, stderr_tail) = collect(stderr).await;
    let (stderr, helper_report) = match &spec.report_tag {
        Some(tag) => take_reports(stderr, &stderr_tail, tag),
        None => (stderr, String::new()),
    };
    let (stdout, stderr, cut) = fit(stdout, stderr, cap);

    use std::os::unix::process::ExitStatusExt;
    Ok(RunOutput {
        exit_code: status.code(),
        signal: status.signal(),
        stdout,
        stderr,
        timed_out,
        truncated: stdout_over || stderr_over || cut,
        duration: started.elapsed(),
        helper_report,
    })
}

struct GroupGuard {
    pgid: Option<Pid>,
    /// SIGTERM first, SIGKILL after [`STOP_GRACE`]: the sandbox helper ends what the command started.
    graceful: bool,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        let Some(pgid) = self.pgid else { return };
        if !self.graceful {
            let _ = killpg(pgid, Signal::SIGKILL);
            return;
        }
        let _ = killpg(pgid, Signal::SIGTERM);
        // Not from the runtime: this runs while a future is dropped, perhaps as the runtime shuts down.
        let _ = std::thread::Builder::new().name("sandbox-stop".into()).spawn(move || {
            std::thread::sleep(STOP_GRACE);
            let _ = killpg(pgid, Signal::SIGKILL);
        });
    }
}

type Captured = (Vec<u8>, bool, Vec<u8>);

async fn collect(task: Option<tokio::task::JoinHandle<Captured>>) -> Captured {
    let Some(task) = task else {
        return (Vec::new(), false, Vec::new());
    };
    match tokio::time::timeout(DRAIN_GRACE, task).await {
        Ok(Ok(out)) => out,
        // A reader still blocked after the grace period belongs to an escaped process; its output is lost.
        _ => (Vec::new(), true, Vec::new()),
    }
}

/// How much of the dropped output is kept from its end: the sandbox helper's last report lines.
const TAIL: usize = 4096;

/// Keeps the first `cap` bytes and the last [`TAIL`] of what came after them, drains the rest; the flag says
/// whether anything was dropped.
async fn read_capped(mut pipe: impl AsyncRead + Unpin, cap: usize) -> Captured {
    let mut kept = Vec::new();
    let mut tail: Vec<u8> = Vec::new();
    let mut over = false;
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                if n > room {
                    over = true;
                    tail.extend_from_slice(&buf[room..n]);
                    if tail.len() > TAIL {
                        tail.drain(..tail.len() - TAIL);
                    }
                }
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    (kept, over, tail)
}

/// Takes the lines that start with `tag` out of `stderr` (and finds them in `tail`, what came after the cap):
/// the rest of stderr, and those lines without the tag.
fn take_reports(stderr: Vec<u8>, tail: &[u8], tag: &str) -> (Vec<u8>, String) {
    let marker = format!("{tag} ");
    let mut rest = Vec::with_capacity(stderr.len());
    let mut reports = String::new();
    for line in stderr.split_inclusive(|b| *b == b'\n') {
        match line.strip_prefix(marker.as_bytes()) {
            Some(report) => reports.push_str(&String::from_utf8_lossy(report)),
            None => rest.extend_from_slice(line),
        }
    }
    for line in tail.split_inclusive(|b| *b == b'\n') {
        if let Some(report) = line.strip_prefix(marker.as_bytes()) {
            reports.push_str(&String::from_utf8_lossy(report));
        }
    }
    (rest, reports)
}

/// Applies the combined cap, cutting stdout before stderr (errors explain failures), and decodes both.
fn fit(stdout: Vec<u8>, stderr: Vec<u8>, cap: usize) -> (String, String, bool) {
    let stderr_keep = stderr.len().min(cap);
    let stdout_keep = stdout.len().min(cap - stderr_keep);
    let cut = stdout_keep < stdout.len() || stderr_keep < stderr.len();
    (decode(&stdout[..stdout_keep]), decode(&stderr[..stderr_keep]), cut)
}

/// Lossy UTF-8, without a replacement character for a multi-byte sequence the cap split at the very end.
fn decode(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.to_string(),
        Err(err) if err.error_len().is_none() => String::from_utf8_lossy(&bytes[..err.valid_up_to()]).into_owned(),
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    }
}

#[allow(unsafe_code)]
fn apply_rlimits(command: &mut Command, limits: Rlimits) {
    // SAFETY: the closure runs in the forked child before exec, where only async-signal-safe calls are allowed.
    // It only calls setrlimit(2), which is async-signal-safe, on values captured before the fork; it does not
    // allocate, lock or touch the parent's state.
    unsafe {
        command.pre_exec(move || limits.apply().map_err(std::io::Error::from));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_cuts_stdout_before_stderr() {
        assert_eq!(fit(b"aaaa".to_vec(), b"ee".to_vec(), 10), ("aaaa".into(), "ee".into(), false));
        assert_eq!(fit(b"aaaa".to_vec(), b"ee".to_vec(), 4), ("aa".into(), "ee".into(), true));
        assert_eq!(fit(b"aaaa".to_vec(), b"eeeeee".to_vec(), 4), ("".into(), "eeee".into(), true));
    }

    #[test]
    fn a_character_split_by_the_cap_is_dropped_not_garbled() {
        assert_eq!(decode("aé".as_bytes().get(..2).unwrap_or_default()), "a");
        assert_eq!(decode(b"a\xffb"), "a\u{FFFD}b");
    }
}
