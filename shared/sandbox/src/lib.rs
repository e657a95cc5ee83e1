//! The `contain` sandbox for commands the model runs (`bash`, `python_execute`): what a command may see and
//! do ([`Policy`]), what this host can enforce ([`Capabilities`], found by [`probe`]), and the
//! `minibot-sandbox` helper that runs one command inside it.
//!
//! The helper, not the assistant, is the command's parent: its environment holds only what the command gets
//! anyway, so `/proc/$PPID/environ` shows nothing of value. It puts the command in new user, pid and mount
//! namespaces where the kernel allows them, so nothing the command starts outlives
//! it; where it does not, the helper is a child subreaper that ends every descendant. The command itself runs
//! under Landlock (read-only file system, read-write managed root and private temp folder, the assistant's
//! config, vault, data and logs not readable at all) and a seccomp filter (no new namespaces, no mounts, no
//! ptrace, no sockets but Unix ones when the network is off).
//!
//! It also owns [`open_without_links`], with which a file a tool checked is opened again later without a link
//! swapped onto its path taking the open elsewhere.

pub mod locate;
#[cfg(target_os = "linux")]
pub mod open;
pub mod policy;
pub mod probe;

#[cfg(target_os = "linux")]
mod landlock_rules;
#[cfg(target_os = "linux")]
mod namespaces;
#[cfg(target_os = "linux")]
mod seccomp_filter;
#[cfg(target_os = "linux")]
pub mod supervise;

pub use locate::{Helper, helper, serve_if_asked};
#[cfg(target_os = "linux")]
pub use open::open_without_links;
pub use policy::{Limits, Policy, SETUP_FAILED_EXIT, SETUP_FAILED_PREFIX};
pub use probe::{Capabilities, probe};

/// The helper's entry: `--probe`, or `<policy JSON> -- <program> [args…]`. Never returns.
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
        let usage = || fail(&"usage: minibot-sandbox <policy JSON> -- <program> [args…]");
        let (Some(policy), Some(separator)) = (args.first(), args.get(1)) else { usage() };
        if separator != "--" {
            usage();
        }
        let policy: Policy = match serde_json::from_str(&policy.to_string_lossy()) {
            Ok(policy) => policy,
            Err(e) => fail(&format!("unreadable policy: {e}")),
        };
        supervise::run(&policy, &args[2..])
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = args;
        fail(&"the contain sandbox needs Linux")
    }
}

/// The helper's own failure: one line after [`SETUP_FAILED_PREFIX`] and exit [`SETUP_FAILED_EXIT`].
pub(crate) fn fail(error: &dyn std::fmt::Display) -> ! {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{SETUP_FAILED_PREFIX}{error}");
    std::process::exit(SETUP_FAILED_EXIT)
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
