//! Red-team report (#26): memory and time were checked only between interpreter steps, so one step could take
//! gigabytes (`['b'*1_000_000]*1000` returned, passed to a tool or `json.dumps`ed) or keep a thread busy after
//! the turn ended (`pow(3, m, m)` with a 400,000-bit `m`). Scripts now run in a child process with an
//! address-space cap, killed at their time limit. These tests watch this process's children, so they run one at
//! a time in a test binary of their own.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use minibot_agent::{ToolContext, ToolRegistry};
use minibot_config::Config;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// One test at a time: each looks at all of this process's children.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const BOMB: &str = "x = ['b' * 1_000_000] * 1000";
const SLOW_POW: &str = "m = (1 << 400000) - 1\npow(3, m, m)";

fn tools() -> (tempfile::TempDir, ToolRegistry) {
    let dir = tempfile::tempdir().unwrap();
    let toml = "[tools.codemode]\nenabled = true\nmax_memory_mb = 64\n";
    let config = Config::from_toml(toml, "test.toml", dir.path(), &|_| None).unwrap();
    let services = minibot_tools::ToolServices::new(Arc::new(config.clone()), None).unwrap();
    let direct = minibot_tools::main_agent_tools(&services);
    (dir, minibot_codemode::with_codemode(&direct, &config.tools.codemode).unwrap())
}

async fn run(tools: &ToolRegistry, code: &str, timeout_seconds: f64) -> Value {
    let tool = tools.get("run_tools_script").unwrap();
    let args = json!({ "code": code, "timeout_seconds": timeout_seconds });
    tool.call_json(args, &ToolContext::default()).await.unwrap()
}

/// The script processes among this process's children now.
fn script_children() -> BTreeSet<u32> {
    let mut pids = BTreeSet::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for pid in children.split_whitespace().filter_map(|pid| pid.parse::<u32>().ok()) {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains("__minibot_codemode") {
                pids.insert(pid);
            }
        }
    }
    pids
}

/// Runs `code`, noting the script processes that appear meanwhile.
async fn run_watched(tools: &ToolRegistry, code: &str, timeout_seconds: f64) -> (Value, BTreeSet<u32>) {
    let stop = AtomicBool::new(false);
    let mut seen = BTreeSet::new();
    let watch = async {
        while !stop.load(Ordering::Relaxed) {
            seen.extend(script_children());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let call = async {
        let out = run(tools, code, timeout_seconds).await;
        stop.store(true, Ordering::Relaxed);
        out
    };
    let (out, ()) = tokio::join!(call, watch);
    (out, seen)
}

/// Whether process `pid` is gone (or a zombie, which no longer runs).
fn stopped(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

/// The peak resident size of this process, in MiB.
fn peak_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|line| line.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() / 1024
}

fn error_code(out: &Value) -> &str {
    assert_eq!(out["ok"], false, "{out}");
    out["error_code"].as_str().unwrap()
}

#[tokio::test]
async fn a_value_that_expands_inside_one_step_ends_only_the_scripts_process() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (_dir, tools) = tools();
    for tail in ["x", "import json\njson.dumps(x)", "await tools.current_datetime(format=x)"] {
        let (out, seen) = run_watched(&tools, &format!("{BOMB}\n{tail}"), 30.0).await;
        assert_eq!(error_code(&out), "codemode:memory_limit", "{tail}: {out}");
        assert!(out["error"].as_str().unwrap().contains("64 MiB"), "{out}");
        assert!(!seen.is_empty() && seen.iter().all(|pid| stopped(*pid)), "{tail}: {seen:?}");
    }
    // Monty builds a `repr` slowly: whichever limit it meets first, its process is gone after.
    let (out, seen) = run_watched(&tools, &format!("{BOMB}\nrepr(x)"), 2.0).await;
    assert!(["codemode:memory_limit", "codemode:timeout"].contains(&error_code(&out)), "{out}");
    assert!(!seen.is_empty() && seen.iter().all(|pid| stopped(*pid)), "{seen:?}");
    // The gigabyte was never built here.
    assert!(peak_mib() < 1024, "this process peaked at {} MiB", peak_mib());
    // A script within its limits still runs afterwards.
    let out = run(&tools, "x = ['b' * 1_000] * 1000\nlen(repr(x))", 30.0).await;
    assert_eq!(out["result"], 1_004_000, "{out}");
}

#[tokio::test]
async fn a_step_that_computes_past_the_time_limit_is_killed() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (_dir, tools) = tools();
    let started = Instant::now();
    let (out, seen) = run_watched(&tools, SLOW_POW, 1.0).await;
    let took = started.elapsed();
    assert_eq!(error_code(&out), "codemode:timeout", "{out}");
    assert!(took < Duration::from_secs(3), "ended after {took:?}");
    assert!(!seen.is_empty(), "the script ran in a child process");
    assert!(seen.iter().all(|pid| stopped(*pid)), "a script process is left: {seen:?}");
    assert!(script_children().is_empty(), "{:?}", script_children());
}

#[tokio::test]
async fn a_cancelled_script_takes_its_process_with_it() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (_dir, tools) = tools();
    let cancelled = tokio::time::timeout(Duration::from_millis(700), run(&tools, SLOW_POW, 60.0)).await;
    assert!(cancelled.is_err(), "the script should still be running");
    let deadline = Instant::now() + Duration::from_secs(2);
    while !script_children().iter().all(|pid| stopped(*pid)) {
        assert!(Instant::now() < deadline, "the cancelled script's process runs on: {:?}", script_children());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Red-team report (#26, isolation round): a daemon killed with SIGKILL left its script process spinning until
/// the script's own time limit. The script process now dies with the process that started it.
#[tokio::test]
async fn a_script_process_dies_with_its_starter() {
    let _one = ONE_AT_A_TIME.lock().await;
    let bin = env!("CARGO_BIN_EXE_minibot-codemode");
    // A shell stands for the daemon: it starts a script process that waits for its script, then is killed.
    let mut shell = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("sleep 20 | '{bin}' __minibot_codemode $$ & echo $!; wait"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let starter = shell.id();
    let mut out = std::io::BufReader::new(shell.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    let script: u32 = line.trim().parse().unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!stopped(script), "the script process waits for its script while its starter lives");
    unsafe_free_kill(starter);
    let _ = shell.wait();
    let deadline = Instant::now() + Duration::from_secs(3);
    while !stopped(script) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(stopped(script), "the script process outlived its starter");
}

/// SIGKILL through `kill(1)`, so the test needs no unsafe code.
fn unsafe_free_kill(pid: u32) {
    std::process::Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap();
}
