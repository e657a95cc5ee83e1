//! How to start the helper. `minibot` and `minibot-worker` carry it (`serve_if_asked` at the top of their
//! `main`), so `cargo run -p minibot` and a binary copied alone work; other programs (tests, benchmarks) use the
//! `minibot-sandbox` binary next to them or one folder up (a test binary in `target/debug/deps`).
//! `MINIBOT_SANDBOX_HELPER` names another helper program.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

pub const HELPER_NAME: &str = "minibot-sandbox";
pub const HELPER_ENV: &str = "MINIBOT_SANDBOX_HELPER";
/// The first argument that makes `minibot` or `minibot-worker` act as the helper.
pub const HELPER_ARG: &str = "__minibot_sandbox";

static CARRIED: AtomicBool = AtomicBool::new(false);

/// The program to run and the arguments that come before the helper's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Helper {
    pub program: PathBuf,
    pub leading: Vec<String>,
}

/// Called first in `main`: when this process was started as the helper, it becomes the helper and never
/// returns; otherwise it notes that this program can start itself as the helper. Must run before any thread is
/// started (the helper forks).
pub fn serve_if_asked() {
    let mut args = std::env::args_os();
    let _program = args.next();
    if args.next().is_some_and(|first| first == HELPER_ARG) {
        crate::helper_main(args.collect::<Vec<OsString>>());
    }
    CARRIED.store(true, Ordering::Relaxed);
}

pub fn helper() -> Option<Helper> {
    if let Some(path) = std::env::var_os(HELPER_ENV) {
        return Some(Helper { program: PathBuf::from(path), leading: Vec::new() });
    }
    let exe = std::env::current_exe().ok()?;
    if CARRIED.load(Ordering::Relaxed) {
        return Some(Helper { program: exe, leading: vec![HELPER_ARG.to_string()] });
    }
    let dir = exe.parent()?;
    [Some(dir), dir.parent()]
        .into_iter()
        .flatten()
        .map(|d| d.join(HELPER_NAME))
        .find(|p| p.is_file())
        .map(|program| Helper { program, leading: Vec::new() })
}
