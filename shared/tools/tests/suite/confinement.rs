//! Race-free confinement: a managed-file tool acts on the root through a directory handle, so another process
//! that swaps a folder for a link to the outside while a call runs, or a hard link from the outside into the
//! root, or a link a script plants for the artifact export, never makes a call read or change anything outside
//! the root.

use super::{Env, tree};
use minibot_agent::ToolError;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Exchanges two names atomically, the way an attacker swaps a folder for a link between a check and a use.
#[allow(unsafe_code)]
fn exchange(a: &CString, b: &CString) -> bool {
    // SAFETY: both pointers are NUL-terminated strings that live across the call; renameat2 only reads them
    // and takes no other memory from us.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    rc == 0
}

fn c_path(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).unwrap()
}

/// A thread swapping `<root>/sub` with a link to the outside folder as fast as it can.
struct Swapper {
    stop: Arc<AtomicBool>,
    swaps: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
    sub: PathBuf,
    link: PathBuf,
}

impl Swapper {
    fn start(sub: &Path, link: &Path) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let swaps = Arc::new(AtomicU64::new(0));
        let (a, b) = (c_path(sub), c_path(link));
        let (flag, count) = (Arc::clone(&stop), Arc::clone(&swaps));
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                if exchange(&a, &b) {
                    count.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        let swapper = Self { stop, swaps, thread: Some(thread), sub: sub.to_path_buf(), link: link.to_path_buf() };
        // Wait until it really swaps: a swapper that never ran would prove nothing.
        while swapper.swaps.load(Ordering::Relaxed) < 100 {
            std::thread::yield_now();
        }
        swapper
    }

    /// Stops swapping and puts the real folder back at `<root>/sub`; returns how many swaps were made.
    fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
        if self.sub.symlink_metadata().unwrap().file_type().is_symlink() {
            assert!(exchange(&c_path(&self.sub), &c_path(&self.link)));
        }
        self.swaps.load(Ordering::Relaxed)
    }
}

/// Calls a tool after a short sleep: on a busy machine the swapper may share this thread's core, and without a
/// pause it would run only between long stretches of calls instead of among them.
async fn raced(env: &Env, tool: &str, args: Value) -> Result<Value, ToolError> {
    std::thread::sleep(Duration::from_micros(50));
    env.call(tool, args).await
}

/// Calls made, calls that succeeded and the error codes of the others, per tool.
#[derive(Default, Debug)]
struct Tally {
    made: u32,
    succeeded: u32,
    refused: BTreeMap<String, u32>,
    /// The first message seen for each error code.
    samples: BTreeMap<String, String>,
}

impl Tally {
    fn record(&mut self, result: &Result<Value, ToolError>) -> Option<Value> {
        self.made += 1;
        match result {
            Ok(value) => {
                self.succeeded += 1;
                Some(value.clone())
            }
            Err(ToolError::RespondToModel { code, message }) => {
                *self.refused.entry(code.clone()).or_default() += 1;
                self.samples.entry(code.clone()).or_insert_with(|| message.clone());
                None
            }
            Err(other) => panic!("a call failed fatally: {other:?}"),
        }
    }
}

/// The swap test makes at least this many write_file calls, and the other tools a share of it, and keeps
/// calling each tool for at least its share of [`BUDGET`]. The old check-then-open code let about one call in a
/// few hundred through, in bursts when the swapper got a core, so fewer calls or less time often proved nothing.
const WRITES: usize = 300;
/// How long the swap test keeps calling, spread over the tools.
const BUDGET: Duration = Duration::from_secs(4);
/// Files prepared for moves and deletes, so those rounds never run out of names.
const PREPARED: usize = 2000;

/// Whether a round that made `done` calls since `started` goes on: at least `min` calls, then until `share` of
/// [`BUDGET`] is spent, never past `max`.
fn keep_going(done: usize, min: usize, max: usize, started: Instant, share: f64) -> bool {
    done < max && (done < min || started.elapsed() < BUDGET.mul_f64(share))
}

/// Writes and rounds of reads, listings, patches, moves and deletes under `sub/` while another thread
/// swaps `sub` for a link to the outside folder. Nothing outside changes, no read or listing shows an outside
/// file, and every call that reports success did its work inside the root.
#[tokio::test]
async fn a_folder_swapped_for_a_link_mid_call_never_leads_outside() {
    let env = Env::new("[tools.apply_patch]\nenabled = true\nworkspace_root = \"files\"\n");
    let root = env.root();
    let outside = env.outside();
    env.write("sub/inside.txt", "inside content\n");
    env.write("sub/log.txt", "inside log\n");
    std::fs::write(outside.join("log.txt"), "outside log\n").unwrap();
    // The outside folder holds the names the calls use, so a call that lands there changes or removes a file.
    for i in 0..PREPARED {
        env.write(&format!("sub/m{i}.txt"), "to move\n");
        env.write(&format!("sub/d{i}.txt"), "to delete\n");
        for name in [format!("m{i}.txt"), format!("d{i}.txt"), format!("w{i}.txt")] {
            std::fs::write(outside.join(name), "outside, must stay\n").unwrap();
        }
    }
    let outside_before = tree(&outside);
    let link = env.dir.path().join("swap");
    std::os::unix::fs::symlink(&outside, &link).unwrap();

    let swapper = Swapper::start(&root.join("sub"), &link);
    let mut tallies: BTreeMap<&str, Tally> = BTreeMap::new();
    let mut leaks: Vec<String> = Vec::new();
    let mut written = Vec::new();
    let (mut i, started) = (0, Instant::now());
    while keep_going(i, WRITES, usize::MAX, started, 0.4) {
        i += 1;
        let args =
            json!({ "path": format!("sub/w{i}.txt"), "content": format!("write {i}\n"), "overwrite": i % 2 == 0 });
        if let Some(out) = tallies.entry("write_file").or_default().record(&raced(&env, "write_file", args).await) {
            assert_eq!(out["path_scope"], "inside_root", "{out}");
            written.push(i);
        }
    }
    let (mut i, started) = (0, Instant::now());
    while keep_going(i, WRITES / 3, usize::MAX, started, 0.15) {
        i += 1;
        let path = if i % 2 == 0 { "sub/secret.txt" } else { "sub/inside.txt" };
        let result = raced(&env, "read_file", json!({ "path": path })).await;
        if let Some(out) = tallies.entry("read_file").or_default().record(&result) {
            assert_eq!(out["path_scope"], "inside_root");
            if out["content"] != "inside content\n" {
                leaks.push(format!("read_file returned {}", out["content"]));
            }
        }
    }
    let (mut i, started) = (0, Instant::now());
    while keep_going(i, WRITES / 3, usize::MAX, started, 0.1) {
        i += 1;
        let result = raced(&env, "list_files", json!({ "folder": "sub" })).await;
        if let Some(out) = tallies.entry("list_files").or_default().record(&result) {
            let names: Vec<&str> =
                out["entries"].as_array().unwrap().iter().filter_map(|e| e["name"].as_str()).collect();
            if names.contains(&"secret.txt") {
                leaks.push("list_files listed the outside folder".into());
            }
        }
    }
    let mut patched = Vec::new();
    let (mut i, started) = (0, Instant::now());
    while keep_going(i, WRITES / 3, usize::MAX, started, 0.2) {
        i += 1;
        let patch = format!(
            "*** Begin Patch\n*** Add File: sub/p{i}.txt\n+patch {i}\n*** Update File: sub/log.txt\n@@\n+line {i}\n*** End Patch"
        );
        let result = raced(&env, "apply_patch", json!({ "patch_text": patch })).await;
        if tallies.entry("apply_patch").or_default().record(&result).is_some() {
            patched.push(i);
        }
    }
    let mut moved = Vec::new();
    let mut deleted = Vec::new();
    let (mut i, started) = (0, Instant::now());
    while keep_going(i, WRITES / 6, PREPARED, started, 0.15) {
        let args = json!({ "source_path": format!("sub/m{i}.txt"), "destination_path": format!("sub/n{i}.txt") });
        if let Some(out) = tallies.entry("move_file").or_default().record(&raced(&env, "move_file", args).await) {
            assert_eq!(out["destination_path_scope"], "inside_root");
            moved.push(i);
        }
        let result = raced(&env, "delete_file", json!({ "path": format!("sub/d{i}.txt") })).await;
        if let Some(out) = tallies.entry("delete_file").or_default().record(&result)
            && out["deleted"] == true
        {
            deleted.push(i);
        }
        i += 1;
    }
    let swaps = swapper.finish();

    let outside_after = tree(&outside);
    for (name, bytes) in &outside_after {
        if outside_before.get(name) != Some(bytes) {
            leaks.push(format!("outside/{name} was written: {:?}", String::from_utf8_lossy(bytes)));
        }
    }
    for name in outside_before.keys().filter(|name| !outside_after.contains_key(*name)) {
        leaks.push(format!("outside/{name} was moved or deleted"));
    }
    let made: u32 = tallies.values().map(|t| t.made).sum();
    let succeeded: u32 = tallies.values().map(|t| t.succeeded).sum();
    eprintln!("swaps: {swaps}; calls: {made}, succeeded: {succeeded}, outside effects: {}", leaks.len());
    eprintln!("per tool: {tallies:#?}");
    assert!(leaks.is_empty(), "{} calls reached outside the root: {leaks:#?}", leaks.len());
    assert!(succeeded > 0, "no call succeeded, so the test proved nothing: {tallies:?}");
    // Every success happened inside: what it reported is in the real `sub`.
    for i in written {
        assert_eq!(std::fs::read_to_string(root.join(format!("sub/w{i}.txt"))).unwrap(), format!("write {i}\n"));
    }
    let log = std::fs::read_to_string(root.join("sub/log.txt")).unwrap();
    for i in patched {
        assert_eq!(std::fs::read_to_string(root.join(format!("sub/p{i}.txt"))).unwrap(), format!("patch {i}\n"));
        assert!(log.contains(&format!("line {i}\n")), "patch {i} reported success but is not in the log: {log}");
    }
    for i in moved {
        assert!(root.join(format!("sub/n{i}.txt")).is_file(), "move {i} reported success but did not happen inside");
    }
    for i in deleted {
        assert!(!root.join(format!("sub/d{i}.txt")).exists(), "delete {i} reported success but the file is there");
    }
}

/// grep over a folder that another thread keeps swapping for a link to the outside folder never returns the
/// outside secret.
#[tokio::test]
async fn grep_never_searches_a_folder_swapped_for_a_link() {
    let env = Env::new("");
    let root = env.root();
    for i in 0..20 {
        env.write(&format!("sub/f{i}.txt"), "nothing here\n");
    }
    env.write("sub/deeper/x.txt", "nothing here\n");
    std::fs::create_dir_all(env.outside().join("deeper")).unwrap();
    std::fs::write(env.outside().join("deeper/x.txt"), "top secret\n").unwrap();
    let link = env.dir.path().join("swap");
    std::os::unix::fs::symlink(env.outside(), &link).unwrap();

    let swapper = Swapper::start(&root.join("sub"), &link);
    let mut tally = Tally::default();
    let mut leaked = Vec::new();
    for i in 0..200 {
        let args = match i % 3 {
            0 => json!({ "pattern": "secret" }),
            1 => json!({ "pattern": "secret", "path": "sub" }),
            _ => json!({ "pattern": "secret", "path": "sub/deeper/x.txt" }),
        };
        if let Some(out) = tally.record(&raced(&env, "grep", args).await)
            && out["count"] != 0
        {
            leaked.push(out);
        }
    }
    let swaps = swapper.finish();
    eprintln!(
        "swaps: {swaps}; grep calls: {}, succeeded: {}, refused: {:?}",
        tally.made, tally.succeeded, tally.refused
    );
    assert!(
        leaked.is_empty(),
        "{} of {} grep calls returned the outside secret: {:?}",
        leaked.len(),
        tally.made,
        leaked[0]
    );
    assert!(tally.succeeded > 0);
}

/// An outside file hard-linked into the root keeps its content when `write_file` overwrites the root's name.
#[tokio::test]
async fn write_file_does_not_change_an_outside_hard_link() {
    let env = Env::new("");
    let outside_file = env.outside().join("linked.txt");
    std::fs::write(&outside_file, "outside original\n").unwrap();
    std::fs::hard_link(&outside_file, env.root().join("linked.txt")).unwrap();
    let out =
        env.ok("write_file", json!({ "path": "linked.txt", "content": "from the model\n", "overwrite": true })).await;
    assert_eq!(out["path_scope"], "inside_root");
    assert_eq!(std::fs::read_to_string(&outside_file).unwrap(), "outside original\n", "the outside link changed");
    assert_eq!(std::fs::read_to_string(env.root().join("linked.txt")).unwrap(), "from the model\n");
}

/// The same for `apply_patch`: updating a hard-linked file writes a new file in the workspace.
#[tokio::test]
async fn apply_patch_does_not_change_an_outside_hard_link() {
    let env = Env::new("[tools.apply_patch]\nenabled = true\nworkspace_root = \"ws\"\n");
    let ws = env.dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let outside_file = env.outside().join("app.py");
    std::fs::write(&outside_file, "print('hi')\n").unwrap();
    std::fs::hard_link(&outside_file, ws.join("app.py")).unwrap();
    let patch = "*** Begin Patch\n*** Update File: app.py\n-print('hi')\n+print('hello')\n*** End Patch";
    env.ok("apply_patch", json!({ "patch_text": patch })).await;
    assert_eq!(std::fs::read_to_string(&outside_file).unwrap(), "print('hi')\n", "the outside link changed");
    assert_eq!(std::fs::read_to_string(ws.join("app.py")).unwrap(), "print('hello')\n");
}

const PYTHON_BASIC: &str = "[tools.python_exec]\nsandbox_mode = \"basic\"\n";

/// A script that leaves a process behind swapping `out.txt` in its run folder between a regular file and a
/// link to the outside secret, while the export runs: the secret never lands in the root.
#[tokio::test]
async fn artifact_export_never_follows_a_link_swapped_in_by_the_script() {
    let env = Env::new(PYTHON_BASIC);
    let secret = env.outside().join("secret.txt");
    let code = format!(
        r#"
import os, time
if os.fork() == 0:
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    end = time.time() + 3
    try:
        while time.time() < end:
            os.symlink({secret:?}, 'link.tmp')
            os.rename('link.tmp', 'out.txt')
            with open('file.tmp', 'w') as f:
                f.write('harmless\n')
            os.rename('file.tmp', 'out.txt')
    except OSError:
        pass
    os._exit(0)
with open('out.txt', 'w') as f:
    f.write('harmless\n')
time.sleep(0.05)
"#,
        secret = secret.display().to_string()
    );
    let (mut exported, mut skipped) = (0, BTreeMap::<String, u32>::new());
    for _ in 0..15 {
        let out = env
            .ok("python_execute", json!({ "code": code, "save_artifacts": true, "artifact_globs": ["*.txt"] }))
            .await;
        exported += out["artifacts_saved"].as_array().map_or(0, Vec::len);
        assert_eq!(out["ok"], true, "the script failed, so the test proves nothing: {out}");
        for skip in out["artifacts_skipped"].as_array().unwrap() {
            *skipped.entry(skip["reason"].as_str().unwrap().to_string()).or_default() += 1;
        }
    }
    let leaked: Vec<String> =
        tree(&env.root()).into_iter().filter(|(_, bytes)| bytes == b"top secret\n").map(|(name, _)| name).collect();
    eprintln!("artifacts exported: {exported}, skipped: {skipped:?}; outside secret copies in the root: {leaked:?}");
    assert!(leaked.is_empty(), "the export copied the outside secret into the root: {leaked:?}");
}

/// A script that replaces the artifact folder in the managed root with a link to the outside folder: the
/// export refuses to write through it.
#[tokio::test]
async fn artifact_export_never_writes_through_a_link_planted_in_the_root() {
    let env = Env::new(PYTHON_BASIC);
    let outside_before = tree(&env.outside());
    let code = format!(
        "import os\nos.symlink({outside:?}, {generated:?})\nopen('out.txt', 'w').write('artifact\\n')",
        outside = env.outside().display().to_string(),
        generated = env.root().join("generated").display().to_string()
    );
    let out =
        env.ok("python_execute", json!({ "code": code, "save_artifacts": true, "artifact_globs": ["*.txt"] })).await;
    assert!(env.root().join("generated").symlink_metadata().unwrap().file_type().is_symlink(), "{out}");
    assert_eq!(tree(&env.outside()), outside_before, "the export wrote outside the root: {out}");
    assert_eq!(out["artifacts_saved"], json!([]), "{out}");
    assert!(out["artifacts_skipped"][0]["reason"].as_str().unwrap().starts_with("copy_failed"), "{out}");
}
