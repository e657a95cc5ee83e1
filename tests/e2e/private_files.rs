//! Private files at rest: a run by hand under umask 022 leaves the data, log and managed-file folders 0700 and
//! the databases and the log 0600; logs turn over by size.

use minibot_e2e::{Home, Reply, Script, ScriptedLlm, run, stderr, stdout};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `minibot <args>` for `home` as [`Home::minibot`] runs it, started through `sh` under umask 022.
fn minibot_under_umask_022(home: &Home, args: &[&str]) -> Command {
    let plain = home.minibot(args);
    let mut command = Command::new("sh");
    command.arg("-c").arg("umask 022 && exec \"$0\" \"$@\"").arg(plain.get_program()).args(plain.get_args());
    for (name, value) in plain.get_envs() {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    if let Some(dir) = plain.get_current_dir() {
        command.current_dir(dir);
    }
    command.stdin(std::process::Stdio::null());
    command
}

fn mode(path: &Path) -> String {
    format!("{:o}", std::fs::metadata(path).unwrap().permissions().mode() & 0o7777)
}

/// Every folder and file under `dir`, itself included.
fn tree(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    let mut index = 0;
    while index < out.len() {
        if out[index].is_dir() {
            let mut children: Vec<PathBuf> =
                std::fs::read_dir(&out[index]).unwrap().map(|e| e.unwrap().path()).collect();
            children.sort();
            out.extend(children);
        }
        index += 1;
    }
    out
}

/// `dir` and the `folders` below it 0700, and every file under `dir` 0600. (Other folders below `dir` are behind
/// it, and made by parts this check is not about.)
fn assert_private(dir: &Path, folders: &[&str]) {
    assert_eq!(mode(dir), "700", "{}", dir.display());
    for folder in folders {
        assert_eq!(mode(&dir.join(folder)), "700", "{folder}");
    }
    for path in tree(dir).into_iter().filter(|p| p.is_file()) {
        assert_eq!(mode(&path), "600", "{}", path.display());
    }
}

#[tokio::test]
async fn a_run_under_umask_022_leaves_nothing_for_other_accounts() {
    let llm = ScriptedLlm::start(vec![Script::new("keep this private", vec![Reply::text("kept")])]).await;
    let home = Home::new(&llm.base_url(), "[tools.file_storage]\nenabled = true\n");
    let output = run(minibot_under_umask_022(&home, &["console", "--once", "keep this private"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "kept\n");

    let (data, logs) = (home.path().join("data"), home.path().join("logs"));
    assert!(data.join("minibot.db").is_file(), "the transcript database: {:?}", tree(&data));
    assert!(data.join("files").is_dir(), "the managed-file root: {:?}", tree(&data));
    assert!(logs.join("minibot.log").is_file());
    assert_private(&data, &["files"]);
    assert_private(&logs, &[]);
    let log = std::fs::read_to_string(logs.join("minibot.log")).unwrap();
    assert!(!log.contains("made a log file private") && !log.contains("made a database file private"), "{log}");
}

#[tokio::test]
async fn databases_and_logs_an_older_run_left_readable_are_made_private() {
    let llm = ScriptedLlm::start(vec![]).await;
    let home = Home::new(&llm.base_url(), "");
    let output = run(minibot_under_umask_022(&home, &["console", "--once", "first"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    // As a version before this one, or a run under another umask, left them.
    let (db, log) = (home.path().join("data/minibot.db"), home.path().join("logs/minibot.log"));
    let older = home.path().join("logs/minibot.log.1");
    std::fs::write(&older, "an older log\n").unwrap();
    for file in [&db, &log, &older] {
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    // A folder that exists is the user's: it keeps its mode.
    std::fs::set_permissions(home.path().join("data"), std::fs::Permissions::from_mode(0o750)).unwrap();

    let output = run(minibot_under_umask_022(&home, &["console", "--once", "second"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    for file in [&db, &log, &older] {
        assert_eq!(mode(file), "600", "{}", file.display());
    }
    assert_eq!(mode(&home.path().join("data")), "750");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("made a database file private") && text.contains("minibot.db"), "{text}");
    assert!(text.contains("made a log file private") && text.contains("old_mode=644"), "{text}");
}

#[tokio::test]
async fn the_log_turns_over_by_size_and_stays_bounded() {
    const CAP: u64 = 400;
    let llm = ScriptedLlm::start(vec![]).await;
    // Each run logs one "turn finished" line of about 190 bytes: two fit under the cap, a third turns it over.
    let home = Home::new(&llm.base_url(), &format!("[logging]\nmax_file_bytes = {CAP}\nbackup_count = 2\n"));
    const RUNS: usize = 7;
    for n in 0..RUNS {
        let output = run(minibot_under_umask_022(&home, &["console", "--once", &format!("turn {n}")])).await;
        assert!(output.status.success(), "stderr: {}", stderr(&output));
    }
    let logs = home.path().join("logs");
    let mut names: Vec<String> =
        std::fs::read_dir(&logs).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["minibot.log", "minibot.log.1", "minibot.log.2"], "turned over, two copies kept");
    let mut kept = Vec::new();
    for name in &names {
        let text = std::fs::read_to_string(logs.join(name)).unwrap();
        // One process writes at a time here; only an event larger than the cap on its own may pass it.
        assert!(text.len() as u64 <= CAP || text.lines().count() == 1, "{name} is {} bytes:\n{text}", text.len());
        kept.extend(text.lines().map(str::to_string));
    }
    assert_private(&logs, &[]);
    let finished = kept.iter().filter(|l| l.contains("turn finished")).count();
    assert!((3..RUNS).contains(&finished), "the oldest lines went, the newest stayed: {kept:#?}");
}
