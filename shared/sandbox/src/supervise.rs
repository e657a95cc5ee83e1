//! The helper's process work: enter the namespaces, start the command (through a pid 1 of its own when there
//! is a pid namespace), wait for it, and make sure nothing it started is left when the call ends.
//!
//! With a pid namespace, the end of its pid 1 makes the kernel kill everything in it, whatever session or
//! group a process moved to. Without one, the helper is a child subreaper: orphans of the command become its
//! children, and it kills them until none is left. A SIGTERM, SIGINT or SIGHUP to the helper (the tool's
//! timeout) ends the command and everything it started the same way.

use crate::{Capabilities, Policy, Request, SETUP_FAILED_EXIT, SETUP_FAILED_PREFIX, SandboxError, fail};
use crate::{disk, landlock_rules, namespaces, seccomp_filter};
use nix::sys::prctl;
use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill, sigprocmask};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, fork};
use std::ffi::CString;
use std::io::{Read, Write};

/// How the command ended.
#[derive(Debug, Clone, Copy)]
enum Ending {
    Exited(i32),
    Signaled(i32),
}

impl Ending {
    fn encode(self) -> [u8; 8] {
        let (kind, value) = match self {
            Self::Exited(code) => (0i32, code),
            Self::Signaled(signal) => (1, signal),
        };
        let mut out = [0u8; 8];
        out[..4].copy_from_slice(&kind.to_le_bytes());
        out[4..].copy_from_slice(&value.to_le_bytes());
        out
    }

    fn decode(bytes: [u8; 8]) -> Self {
        let kind = i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        let value = i32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
        if kind == 1 { Self::Signaled(value) } else { Self::Exited(value) }
    }

    fn of(status: WaitStatus) -> Option<Self> {
        match status {
            WaitStatus::Exited(_, code) => Some(Self::Exited(code)),
            WaitStatus::Signaled(_, signal, _) => Some(Self::Signaled(signal as i32)),
            _ => None,
        }
    }
}

fn stop_signals() -> SigSet {
    let mut set = SigSet::empty();
    for signal in [Signal::SIGCHLD, Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        set.add(signal);
    }
    set
}

/// Runs the request's command under its policy and exits the way the command did.
pub fn run(request: &Request) -> ! {
    let policy = &request.policy;
    if request.argv.is_empty() {
        fail(&"no command given");
    }
    let command = match Command::of(request) {
        Ok(command) => command,
        Err(e) => fail(&e),
    };
    if let Some((hidden, folder)) = policy.conflict() {
        fail(&format!("{} must stay unreadable but lies inside writable {}", hidden.display(), folder.display()));
    }
    // The helper's own crash must not leave a core file with the command's data in it.
    let _ = nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_CORE, 1, 1);
    // The assistant going away (killed, crashed) takes the helper, and with it the pid namespace, along.
    if let Err(e) = prctl::set_pdeathsig(Signal::SIGKILL) {
        fail(&format!("cannot tie the sandbox to the assistant: {e}"));
    }
    if policy.namespaces {
        if let Err(e) = namespaces::enter() {
            fail(&e);
        }
    } else if let Err(e) = prctl::set_child_subreaper(true) {
        fail(&format!("cannot become a subreaper: {e}"));
    }
    let signals = stop_signals();
    let mut old_mask = SigSet::empty();
    if let Err(e) = sigprocmask(SigmaskHow::SIG_BLOCK, Some(&signals), Some(&mut old_mask)) {
        fail(&format!("cannot block signals: {e}"));
    }
    let (report_read, report_write) = match nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) {
        Ok(pair) => pair,
        Err(e) => fail(&format!("cannot make a pipe: {e}")),
    };
    let child = match fork_now() {
        ForkResult::Child => {
            drop(report_read);
            let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&old_mask), None);
            if policy.namespaces {
                be_pid_one(policy, &command, std::fs::File::from(report_write));
            }
            drop(report_write);
            exec_command(policy, &command, false);
        }
        ForkResult::Parent { child } => child,
    };
    drop(report_write);
    let temp = policy.temp.as_ref().map(|temp| temp.path.as_path());
    let mut disk = policy.disk.map(|bound| disk::DiskWatch::start(bound, &policy.read_write, temp));
    let (ended, stopped_by) = wait_for(child, &signals, disk.as_mut());
    let ending = if policy.namespaces && stopped_by.is_none() {
        // pid 1 wrote how the command ended; without a word it died itself (a signal from outside).
        let mut bytes = [0u8; 8];
        match std::fs::File::from(report_read).read_exact(&mut bytes) {
            Ok(()) => Ending::decode(bytes),
            Err(_) => ended,
        }
    } else {
        drop(report_read);
        ended
    };
    end_everything(child);
    match stopped_by {
        Some(Stop::Signal(signal)) => exit_like(Ending::Signaled(signal as i32)),
        Some(Stop::Disk(line)) => {
            crate::status::report(line);
            exit_like(Ending::Signaled(Signal::SIGKILL as i32))
        }
        None => exit_like(ending),
    }
}

#[allow(unsafe_code)]
fn fork_now() -> ForkResult {
    // SAFETY: the helper is single-threaded (no runtime, no threads were started), so the child may run any
    // code after the fork, not only async-signal-safe calls.
    match unsafe { fork() } {
        Ok(result) => result,
        Err(e) => fail(&format!("cannot fork: {e}")),
    }
}

/// Why the helper stopped the command before it ended.
enum Stop {
    Signal(Signal),
    /// The disk bound, with its report line.
    Disk(&'static str),
}

/// How often the disk bound is measured.
const DISK_TICK: libc::timespec = libc::timespec { tv_sec: 0, tv_nsec: 250_000_000 };

/// Waits until `child` ended, a stop signal came or the command passed its disk bound: how it ended, and why
/// it was stopped.
fn wait_for(child: Pid, signals: &SigSet, mut disk: Option<&mut disk::DiskWatch>) -> (Ending, Option<Stop>) {
    let stop = |stop: Stop| {
        let _ = kill(child, Signal::SIGKILL);
        end_everything(child);
        (Ending::Signaled(Signal::SIGKILL as i32), Some(stop))
    };
    loop {
        let signal = match disk.as_deref_mut() {
            None => signals.wait().ok(),
            Some(watch) => match timed_wait(signals) {
                Some(signal) => Some(signal),
                None => {
                    if let Some(line) = watch.passed() {
                        return stop(Stop::Disk(line));
                    }
                    continue;
                }
            },
        };
        match signal {
            Some(Signal::SIGCHLD) => {}
            Some(signal) => return stop(Stop::Signal(signal)),
            None => continue,
        }
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) | Err(_) => break,
                Ok(status) if status.pid() == Some(child) => {
                    if let Some(ending) = Ending::of(status) {
                        return (ending, None);
                    }
                }
                Ok(_) => {}
            }
        }
    }
}

/// One of `signals`, or `None` after [`DISK_TICK`].
#[allow(unsafe_code)]
fn timed_wait(signals: &SigSet) -> Option<Signal> {
    // SAFETY: the set and the timeout are valid for the call; no siginfo is asked for.
    let number = unsafe { libc::sigtimedwait(signals.as_ref(), std::ptr::null_mut(), &DISK_TICK) };
    Signal::try_from(number).ok()
}

/// Kills and reaps every process left: with a pid namespace that is only its pid 1 (the kernel ends the
/// rest); as a subreaper, each orphan that came to the helper, until none is left.
fn end_everything(child: Pid) {
    let _ = kill(child, Signal::SIGKILL);
    loop {
        for pid in children() {
            let _ = kill(pid, Signal::SIGKILL);
        }
        match waitpid(None, None) {
            Ok(_) => {}
            Err(_) => return,
        }
    }
}

/// The helper's live children, from `/proc/self/task/<tid>/children`.
fn children() -> Vec<Pid> {
    let me = std::process::id();
    std::fs::read_to_string(format!("/proc/self/task/{me}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|pid| pid.parse::<i32>().ok())
        .map(Pid::from_raw)
        .collect()
}

fn exit_like(ending: Ending) -> ! {
    match ending {
        Ending::Exited(code) => std::process::exit(code),
        Ending::Signaled(number) => {
            if let Ok(signal) = Signal::try_from(number) {
                let mut set = SigSet::empty();
                set.add(signal);
                let _ = sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&set), None);
                let _ = nix::sys::signal::raise(signal);
            }
            std::process::exit(128 + number)
        }
    }
}

/// The pid namespace's first process: in a session of its own (no controlling terminal for anything in the
/// namespace), mounts its /proc, a private /dev/shm, the capped temp folder and a private devpts, starts the
/// command, reaps whatever is orphaned to it, and reports how the command ended. Its exit ends the namespace.
fn be_pid_one(policy: &Policy, command: &Command, mut report: std::fs::File) -> ! {
    if let Err(e) = prctl::set_pdeathsig(Signal::SIGKILL) {
        fail(&format!("cannot tie the sandbox to the assistant: {e}"));
    }
    if let Err(e) = nix::unistd::setsid() {
        fail(&format!("cannot leave the terminal's session: {e}"));
    }
    let mounted = namespaces::make_read_only(&policy.read_write)
        .and_then(|()| namespaces::mount_proc())
        .and_then(|()| namespaces::mount_private_shm())
        .and_then(|()| policy.temp.as_ref().map_or(Ok(()), namespaces::mount_temp));
    if let Err(e) = mounted {
        fail(&e);
    }
    // A host that refuses a devpts of the namespace's own gets no terminal devices at all (see landlock_rules).
    let private_pts = namespaces::mount_private_pts().is_ok();
    let child = match fork_now() {
        ForkResult::Child => {
            drop(report);
            exec_command(policy, command, private_pts)
        }
        ForkResult::Parent { child } => child,
    };
    loop {
        match waitpid(None, None) {
            Ok(status) if status.pid() == Some(child) => {
                if let Some(ending) = Ending::of(status) {
                    if policy.temp.as_ref().is_some_and(|temp| disk::is_full(&temp.path)) {
                        crate::status::report(crate::LIMIT_TEMP);
                    }
                    let _ = report.write_all(&ending.encode());
                    std::process::exit(0);
                }
            }
            Ok(_) => {}
            Err(_) => std::process::exit(SETUP_FAILED_EXIT),
        }
    }
}

/// The command as it will be exec'd, made ready before anything is confined.
struct Command {
    /// The program paths to try, in order (one for a path; each `PATH` folder for a bare name).
    candidates: Vec<CString>,
    shown: String,
    args: Vec<CString>,
    env: Vec<CString>,
    cwd: CString,
}

impl Command {
    fn of(request: &Request) -> Result<Self, String> {
        let c = |text: &[u8], what: &str| CString::new(text).map_err(|_| format!("{what} contains a NUL byte"));
        let args = request.argv.iter().map(|a| c(a.as_bytes(), "an argument")).collect::<Result<Vec<_>, _>>()?;
        let mut env = Vec::with_capacity(request.env.len());
        for (name, value) in &request.env {
            if name.is_empty() || name.contains('=') {
                return Err(format!("bad environment variable name `{name}`"));
            }
            env.push(c(format!("{name}={value}").as_bytes(), "the environment")?);
        }
        let program = &request.argv[0];
        let candidates = if program.contains('/') {
            vec![c(program.as_bytes(), "the program")?]
        } else {
            // The command's PATH, not the helper's (it has none): execvp would look at the helper's.
            let path = request.env.iter().rev().find(|(k, _)| k == "PATH").map_or(DEFAULT_PATH, |(_, v)| v.as_str());
            path.split(':')
                .map(|dir| if dir.is_empty() { "." } else { dir })
                .map(|dir| c(format!("{dir}/{program}").as_bytes(), "the program"))
                .collect::<Result<Vec<_>, _>>()?
        };
        use std::os::unix::ffi::OsStrExt as _;
        let cwd = c(request.cwd.as_os_str().as_bytes(), "the working folder")?;
        Ok(Self { candidates, shown: program.clone(), args, env, cwd })
    }
}

const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

fn exec_command(policy: &Policy, command: &Command, private_pts: bool) -> ! {
    // Without a pid namespace the helper's death must still end the command (its orphans stay the helper's
    // problem only while it lives).
    if !policy.namespaces {
        let _ = prctl::set_pdeathsig(Signal::SIGKILL);
        // No controlling terminal: nothing the command starts can push keystrokes into the user's terminal.
        if let Err(e) = nix::unistd::setsid() {
            fail(&format!("cannot leave the terminal's session: {e}"));
        }
    }
    close_inherited_descriptors();
    if !command.cwd.as_bytes().is_empty()
        && let Err(e) = nix::unistd::chdir(command.cwd.as_c_str())
    {
        fail(&format!("cannot enter the working folder {}: {e}", command.cwd.to_string_lossy()));
    }
    if let Err(e) = confine(policy, private_pts) {
        fail(&e);
    }
    let mut error = nix::errno::Errno::ENOENT;
    for candidate in &command.candidates {
        match nix::unistd::execve(candidate, &command.args, &command.env) {
            Err(nix::errno::Errno::ENOENT | nix::errno::Errno::ENOTDIR) => {}
            Err(e) => error = e,
            Ok(never) => match never {},
        }
    }
    let _ = writeln!(std::io::stderr(), "{SETUP_FAILED_PREFIX}cannot run `{}`: {error}", command.shown);
    std::process::exit(127)
}

fn confine(policy: &Policy, private_pts: bool) -> Result<(), SandboxError> {
    set_limits(policy)?;
    drop_capabilities();
    landlock_rules::restrict(policy, private_pts)?;
    seccomp_filter::install(policy.network, policy.namespaces)
}

/// A descriptor the assistant leaked without close-on-exec (a library's, a database's) would hand the command a
/// file Landlock never sees it open: all but stdin, stdout and stderr close at the exec.
#[allow(unsafe_code)]
fn close_inherited_descriptors() {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 4;
    // SAFETY: close_range takes plain integers and only sets flags on this process's descriptors.
    unsafe {
        libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, CLOSE_RANGE_CLOEXEC);
    }
}

/// No capabilities survive the exec: a root assistant's command (root in its user namespace, or root outright
/// without one) would otherwise keep the rights to set file capabilities on a copy of a program, clone a mount
/// without its read-only flag, watch the assistant's files with fanotify, or read any process's memory. The
/// bounding set is emptied, so the exec leaves root with none; a non-root command without namespaces has none
/// to drop and gets EPERM, which is fine (no_new_privs keeps file capabilities from adding any).
#[allow(unsafe_code)]
fn drop_capabilities() {
    const LAST_CAPABILITY: libc::c_ulong = 63;
    for capability in 0..=LAST_CAPABILITY {
        // SAFETY: PR_CAPBSET_READ and PR_CAPBSET_DROP take the capability number by value and touch no memory of
        // ours; a number past the kernel's last capability answers EINVAL, where the loop ends.
        unsafe {
            if libc::prctl(libc::PR_CAPBSET_READ, capability, 0, 0, 0) < 0 {
                break;
            }
            libc::prctl(libc::PR_CAPBSET_DROP, capability, 0, 0, 0);
        }
    }
    // SAFETY: clears the ambient set; no memory is passed.
    unsafe {
        libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    }
}

fn set_limits(policy: &Policy) -> Result<(), SandboxError> {
    policy.limits.clone().unwrap_or_default().apply().map_err(|e| SandboxError::Setup(format!("setrlimit: {e}")))
}

/// `minibot-sandbox --probe`: what this host offers. Runs in a helper process of its own, which it may leave
/// in new namespaces: it exits right after.
pub fn probe_here() -> Capabilities {
    let landlock_abi = landlock_rules::kernel_abi();
    let seccomp = seccomp_filter::available();
    let namespaces_refused = match namespaces::enter() {
        Err(e) => Some(e.to_string()),
        Ok(()) => match fork_now() {
            ForkResult::Child => {
                let code = if namespaces::make_read_only(&[]).is_err() {
                    2
                } else if namespaces::mount_proc().is_err() {
                    1
                } else {
                    0
                };
                std::process::exit(code)
            }
            ForkResult::Parent { child } => match waitpid(child, None) {
                Ok(WaitStatus::Exited(_, 0)) => None,
                Ok(WaitStatus::Exited(_, 2)) => {
                    Some("cannot make the file system read-only in a new mount namespace (mount_setattr)".into())
                }
                _ => Some("cannot mount /proc in a new pid namespace".into()),
            },
        },
    };
    Capabilities { landlock_abi, seccomp, namespaces_refused }
}
