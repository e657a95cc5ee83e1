//! Prints numbers; not a timed test. Run with `cargo bench -p minibot-tools --bench tools_bench`.
//!
//! - `grep` over a generated ~200 MB tree (set `BENCH_MB` to change the size), next to `rg` when installed;
//! - `bash true` round trip through the tool (process group, env allowlist, capped readers) in sandbox modes
//!   `none`, `basic` and `contain`: p50/p99/max. Target: `contain` adds less than 5 ms at the p50.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use minibot_agent::{ToolContext, dyn_tool};
use minibot_config::SandboxMode;
use minibot_tools::exec::Bash;
use minibot_tools::exec::sandbox::SandboxScope;
use minibot_tools::search::{GrepOptions, search};
use serde_json::json;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

const WORDS: &[&str] = &[
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima",
    "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango", "uniform", "victor", "whiskey",
];

/// Deterministic text: a tiny xorshift picks words; one line in ~5000 carries the needle.
fn generate(dir: &Path, total_mb: usize) -> (usize, u64) {
    let files = total_mb * 10;
    let per_file = 100 * 1024;
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut needles = 0u64;
    for f in 0..files {
        let sub = dir.join(format!("d{:03}", f % 100));
        std::fs::create_dir_all(&sub).unwrap();
        let mut out = std::io::BufWriter::new(std::fs::File::create(sub.join(format!("f{f:05}.txt"))).unwrap());
        let mut written = 0;
        while written < per_file {
            let mut line = String::new();
            for _ in 0..10 {
                line.push_str(WORDS[(next() % WORDS.len() as u64) as usize]);
                line.push(' ');
            }
            if next() % 5000 == 0 {
                line.push_str("ERROR code=42 needle");
                needles += 1;
            }
            line.push('\n');
            written += line.len();
            out.write_all(line.as_bytes()).unwrap();
        }
    }
    (files, needles)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let total_mb: usize = std::env::var("BENCH_MB").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let (files, needles) = generate(dir.path(), total_mb);
    println!("generated {files} files, ~{total_mb} MB, {needles} needle lines in {:.1?}", started.elapsed());

    let options = GrepOptions {
        pattern: r"ERROR code=\d+".into(),
        fixed_string: false,
        ignore_case: false,
        include_hidden: false,
        recursive: true,
        context_before: 0,
        context_after: 0,
        max_matches: usize::MAX,
        max_file_size: u64::MAX,
    };
    let mut ours = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let outcome = search(dir.path(), dir.path(), &options).unwrap();
        ours.push(t.elapsed());
        assert_eq!(outcome.matches.len() as u64, needles);
    }
    let m = median(ours.clone());
    println!(
        "grep tool search (regex, single thread): median {m:.2?} over 3 runs ({:.0} MB/s), runs {ours:.2?}",
        total_mb as f64 / m.as_secs_f64()
    );
    let fixed = GrepOptions { pattern: "needle".into(), fixed_string: true, ..options.clone() };
    let t = Instant::now();
    let found = search(dir.path(), dir.path(), &fixed).unwrap().matches.len();
    println!("grep tool search (fixed string): {:.2?}, {found} matches", t.elapsed());

    match std::process::Command::new("rg").arg("--version").output() {
        Ok(out) if out.status.success() => {
            let version = String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or("").to_string();
            for (label, threads) in [("rg -j1", "1"), ("rg (all cores)", "0")] {
                let mut runs = Vec::new();
                for _ in 0..3 {
                    let t = Instant::now();
                    let out = std::process::Command::new("rg")
                        .args(["-c", "--no-messages", "-j", threads, r"ERROR code=\d+"])
                        .arg(dir.path())
                        .output()
                        .unwrap();
                    runs.push(t.elapsed());
                    assert!(out.status.success());
                }
                println!("{label} ({version}): median {:.2?}, runs {runs:.2?}", median(runs.clone()));
            }
        }
        _ => println!("rg not installed; skipped the comparison"),
    }

    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    for mode in [SandboxMode::None, SandboxMode::Basic, SandboxMode::Contain] {
        bash_round_trip(&runtime, mode);
    }
}

/// `bash true` through the tool in one sandbox mode. `contain` goes through the `minibot-sandbox` helper (build
/// it first: `cargo build -p minibot-sandbox`), hiding a config file and a data folder like a real config does.
fn bash_round_trip(runtime: &tokio::runtime::Runtime, mode: SandboxMode) {
    // In the package folder, not in /tmp: Landlock rules are made for the neighbours of every folder on the way
    // to a hidden path, and a busy /tmp (hundreds of entries) is not where an assistant's config lives.
    let home = tempfile::Builder::new().prefix(".bench-home-").tempdir_in(".").unwrap();
    std::fs::write(home.path().join("config.toml"), "x").unwrap();
    std::fs::create_dir_all(home.path().join("data")).unwrap();
    let scope = SandboxScope {
        read_write: vec![home.path().join("files")],
        hidden: vec![home.path().join("config.toml"), home.path().join("data")],
        temp_root: home.path().join("data/sandbox-tmp"),
        writable_guarded: Vec::new(),
    };
    let section = minibot_config::BashSection { enabled: true, sandbox_mode: mode, ..Default::default() };
    let bash = dyn_tool(Bash::new(&section, scope, None));
    let ctx = ToolContext::default();
    let mut samples = Vec::new();
    runtime.block_on(async {
        for _ in 0..10 {
            bash.call_json(json!({ "command": "true" }), &ctx).await.unwrap();
        }
        for _ in 0..300 {
            let t = Instant::now();
            let out = bash.call_json(json!({ "command": "true" }), &ctx).await.unwrap();
            samples.push(t.elapsed());
            assert_eq!(out["ok"], true);
            assert_eq!(out["sandbox_mode"], mode.as_str());
        }
    });
    samples.sort();
    let pct = |p: usize| samples[(samples.len() * p / 100).min(samples.len() - 1)];
    println!(
        "bash `true` round trip, sandbox_mode {:>7}, over {} calls: p50 {:.2?}, p99 {:.2?}, max {:.2?}",
        mode.as_str(),
        samples.len(),
        pct(50),
        pct(99),
        samples[samples.len() - 1]
    );
}
