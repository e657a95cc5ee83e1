//! The `contain` sandbox for commands the model runs (`bash`, `python_execute`): what a command may see and
//! do ([`Policy`]), what this host can enforce ([`Capabilities`], found by [`probe`]), and the
//! `minibot-sandbox` helper that runs one command inside it.
//!
//! The helper, not the assistant, is the command's parent. It starts with an empty environment and a fixed
//! command line; the command's own (model-chosen) program, arguments, environment and folder come as a
//! [`Request`] on its standard input and apply only to the final exec, inside the confinement. The command
//! runs in a session of its own, with no controlling terminal. It puts the command in new user, pid and mount
//! namespaces where the kernel allows them, so nothing the command starts outlives
//! it; where it does not, the helper is a child subreaper that ends every descendant. The command itself runs
//! under Landlock (read-only file system, read-write managed root and private temp folder, the assistant's
//! config, vault, data and logs not readable at all, of `/dev` only the harmless devices) and a seccomp
//! filter (no new namespaces, no mounts, no ptrace, no terminal input injection, no named or datagram Unix
//! sockets at all, and no other sockets when the network is off).
//!
//! It also owns [`open_without_links`], with which a file a tool checked is opened again later without a link
//! swapped onto its path taking the open elsewhere.

pub mod locate;
#[cfg(target_os = "linux")]
pub mod open;
pub mod policy;
pub mod probe;

#[cfg(target_os = "linux")]
mod disk;
#[cfg(target_os = "linux")]
mod landlock_rules;
pub mod mounts;
#[cfg(target_os = "linux")]
mod namespaces;
#[cfg(target_os = "linux")]
mod seccomp_filter;
#[cfg(target_os = "linux")]
pub mod supervise;

pub use locate::{Helper, helper, serve_if_asked};
#[cfg(target_os = "linux")]
pub use open::open_without_links;
pub use policy::{
    DiskBound, Limits, MAX_REQUEST_BYTES, Policy, Request, SETUP_FAILED_EXIT, SETUP_FAILED_PREFIX, TempSpace,
};

/// Report lines (after [`SETUP_FAILED_PREFIX`]): the capped temp folder filled up; the disk bound was passed.
pub const LIMIT_TEMP: &str = "limit: temp";
pub const LIMIT_DISK: &str = "limit: disk";
pub const LIMIT_FILES: &str = "limit: files";

/// The helper's argument that makes it read a [`Request`] from standard input and run it.
pub const RUN_ARG: &str = "--run";
pub use probe::{Capabilities, probe};

/// The helper's entry: `--probe`, or `--run` with a [`Request`] on standard input. Never returns.
pub fn helper_main(args: Vec<std::ffi::OsString>) -> ! {
    #[cfg(target_os = "linux")]
    {
        if args.first().is_some_and(|a| a == "--probe") {
            let capabilities = supervise::probe_here();
            match serde_json::to_string(&capabilities) {
                Ok(text) => println!("{text}"),
                Err(e) => fail(&e),
            }
            std::process::exit(0);
        }
        if args.len() != 1 || args[0] != RUN_ARG {
            fail(&"usage: minibot-sandbox --probe | minibot-sandbox --run (the request on standard input)");
        }
        // Read straight from descriptor 0, never through a buffer: what follows the request is the command's.
        let mut stdin = std::mem::ManuallyDrop::new(unsafe_stdin());
        let request = match Request::read_from(&mut *stdin) {
            Ok(request) => request,
            Err(e) => fail(&e),
        };
        status::set_tag(request.report_tag.clone());
        supervise::run(&request)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = args;
        fail(&"the contain sandbox needs Linux")
    }
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn unsafe_stdin() -> std::fs::File {
    use std::os::fd::FromRawFd as _;
    // SAFETY: descriptor 0 stays open for the helper's life; the File is never dropped (ManuallyDrop), so it
    // is never closed twice.
    unsafe { std::fs::File::from_raw_fd(0) }
}

/// The helper's own failure: one line after [`SETUP_FAILED_PREFIX`] on the status channel and exit
/// [`SETUP_FAILED_EXIT`].
pub(crate) fn fail(error: &dyn std::fmt::Display) -> ! {
    status::report(&error.to_string());
    std::process::exit(SETUP_FAILED_EXIT)
}

/// How the helper's reports reach the tool: lines on the command's stderr that start with the request's
/// `report_tag`, a random word the tool chose for this call. The command never sees the request (the helper
/// read it off the pipe before the command started, and cannot read the helper's memory), so nothing it prints
/// can speak for the helper. Without a tag (the helper run by hand) the lines are plain.
pub(crate) mod status {
    use std::io::Write as _;
    use std::sync::OnceLock;

    static TAG: OnceLock<String> = OnceLock::new();

    pub fn set_tag(tag: Option<String>) {
        if let Some(tag) = tag {
            let _ = TAG.set(tag);
        }
    }

    /// Writes one report line (the prefix is added) in one write, so it is not split by the command's output.
    pub fn report(line: &str) {
        let text = match TAG.get() {
            Some(tag) => format!("{tag} {}{line}\n", super::SETUP_FAILED_PREFIX),
            None => format!("{}{line}\n", super::SETUP_FAILED_PREFIX),
        };
        let _ = std::io::stderr().write_all(text.as_bytes());
    }
}
/// Why the sandbox could not be set up. The helper prints it after [`SETUP_FAILED_PREFIX`] and exits with
/// [`SETUP_FAILED_EXIT`], so the tool reports a failure instead of a command result.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("Landlock: {0}")]
    Landlock(String),
    #[error("seccomp: {0}")]
    Seccomp(String),
    #[error("namespaces: {0}")]
    Namespaces(String),
    #[error("{0}")]
    Setup(String),
}
