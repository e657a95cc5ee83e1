//! Which program runs a script. `minibot` and `minibot-worker` run their scripts in a copy of themselves
//! (`/proc/self/exe`, which stays right even when the binary on disk was replaced by an upgrade). Programs that
//! do not call [`crate::serve_if_asked`] (tests, benchmarks) use the newest of the programs that do, next to them
//! or one folder up (a test binary sits in `target/<profile>/deps`): this package's `minibot-codemode`,
//! `minibot` or `minibot-worker`.

use std::path::PathBuf;
use std::time::SystemTime;

/// Programs that carry the script process, for programs that do not.
const CARRIERS: &[&str] = &["minibot-codemode", "minibot", "minibot-worker"];

/// The program to start with [`crate::child::CHILD_ARG`]; `None` when there is none.
pub fn helper() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    if crate::child::carried() {
        let own = PathBuf::from("/proc/self/exe");
        return Some(if own.exists() { own } else { exe });
    }
    let dir = exe.parent()?;
    [Some(dir), dir.parent()]
        .into_iter()
        .flatten()
        .flat_map(|dir| CARRIERS.iter().map(move |name| dir.join(name)))
        .filter_map(|path| {
            let modified = std::fs::metadata(&path).ok().filter(|m| m.is_file())?.modified().ok()?;
            Some((modified, path))
        })
        .max_by_key(|(modified, _): &(SystemTime, PathBuf)| *modified)
        .map(|(_, path)| path)
}
