#![allow(clippy::expect_used, clippy::unwrap_used)]
//! Prints numbers; it asserts only that each run works. From nothing to the first answer: `minibot init --yes …`
//! (the key checked against the scripted model, the vault created, the config written), then `minibot console
//! --once` with that config, against a scripted model that answers at once. Each run starts from an empty home.
//!
//! Run: `cargo bench -p minibot-e2e --bench onboarding` (build the binaries first, in the profile you measure).

use minibot_e2e::{Reply, Script, ScriptedLlm, binary};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const RUNS: usize = 7;
const KEY: &str = "sk-bench-onboarding-1234";

fn minibot(home: &std::path::Path, args: &[&str]) -> Command {
    let mut command = Command::new(binary("minibot"));
    command
        .args(args)
        .current_dir(home)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("BENCH_KEY", KEY)
        .env_remove("MINIBOT_CONFIG")
        .env_remove("MINIBOT_VAULT_PASSWORD")
        .env_remove("OPENAI_API_KEY")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    command
}

/// Runs on a blocking thread, so the scripted server keeps serving meanwhile.
async fn timed(mut command: Command) -> (Duration, Output) {
    let started = Instant::now();
    let output = tokio::task::spawn_blocking(move || command.output().unwrap()).await.unwrap();
    (started.elapsed(), output)
}

fn check(what: &str, output: &Output) {
    assert!(output.status.success(), "{what} failed: {}", String::from_utf8_lossy(&output.stderr));
}

fn summary(name: &str, samples: &mut [Duration]) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{name:<28} min {:>7.1} ms   median {:>7.1} ms   max {:>7.1} ms",
        ms(samples[0]),
        ms(samples[samples.len() / 2]),
        ms(samples[samples.len() - 1])
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let llm = ScriptedLlm::start(vec![Script::new("hello", vec![Reply::text("Hi! How can I help?")])]).await;
    llm.set_models(&["bench-model"]);
    llm.require_key(KEY);
    let (mut init, mut first_answer, mut total) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..RUNS {
        let home = tempfile::tempdir().unwrap();
        let base_url = llm.base_url();
        let args = [
            "init",
            "--yes",
            "--provider",
            "openai-compatible",
            "--base-url",
            &base_url,
            "--model",
            "bench-model",
            "--api-key-env",
            "BENCH_KEY",
            "--no-telegram",
        ];
        let (setup, output) = timed(minibot(home.path(), &args)).await;
        check("minibot init", &output);
        let config = home.path().join(".config/minibot/config.toml");
        let once = ["--config", config.to_str().unwrap(), "console", "--once", "hello"];
        let (answer, output) = timed(minibot(home.path(), &once)).await;
        check("console --once", &output);
        assert_eq!(String::from_utf8_lossy(&output.stdout), "Hi! How can I help?\n");
        init.push(setup);
        first_answer.push(answer);
        total.push(setup + answer);
    }
    println!("onboarding, {RUNS} runs from an empty home (scripted model answering at once):");
    summary("minibot init --yes", &mut init);
    summary("first console --once answer", &mut first_answer);
    summary("init to first answer", &mut total);
}
