//! The programs as the README's "Install" section installs them (`cargo install --locked --path orchestrator`
//! and `--path worker`) work on their own: run from another folder, with nothing of the build on `PATH`, they
//! answer, start their local workers, run a contained `bash` in a task, and `minibot-worker` takes tasks from
//! the SQLite queue and shows in `minibot queue workers`. `scripts/test` installs them into `<target>/install` before the suite (`--debug`, so the
//! build is reused); installing from inside `cargo test` would wait on the build lock of the run itself.

use minibot_e2e::{Reply, Script, ScriptedLlm, run, stderr, stdout};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// `<target>/install/bin`, where `scripts/test` installs; fails with what to do when it is not there.
fn install_bin() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // <target>/<profile>/deps/<test binary>
    let target = exe.ancestors().nth(3).unwrap().to_path_buf();
    let bin = target.join("install/bin");
    for name in ["minibot", "minibot-worker"] {
        assert!(
            bin.join(name).is_file(),
            "{} is missing: run scripts/test, which installs minibot and minibot-worker there with `cargo install \
             --locked --debug --path orchestrator --root {root}` (and `--path worker`) before it runs the tests",
            bin.join(name).display(),
            root = target.join("install").display()
        );
    }
    bin
}

/// A folder outside the repository and the build, with its own home and the installed programs only on `PATH`.
struct Elsewhere {
    dir: tempfile::TempDir,
    bin: PathBuf,
}

impl Elsewhere {
    fn new(config: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::write(dir.path().join("config.toml"), config).unwrap();
        let place = Self { dir, bin: install_bin() };
        // The user wrote this config.toml: they trust it, as the installed program asks before it uses one it
        // finds in the working folder.
        let trusted = place.command("minibot").arg("trust").output().unwrap();
        assert!(trusted.status.success(), "trust: {}", String::from_utf8_lossy(&trusted.stderr));
        place
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn command(&self, program: &str) -> Command {
        let home = self.path().join("home");
        let mut command = Command::new(self.bin.join(program));
        command
            .current_dir(self.path())
            .env_clear()
            .env("PATH", format!("{}:/usr/bin:/bin", self.bin.display()))
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_DATA_HOME", home.join(".local/share"))
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .stdin(Stdio::null());
        command
    }
}

/// A process this test started, killed when the test ends however it ends.
struct Started(Child);

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn config(base_url: &str, tasks: &str) -> String {
    format!(
        "[llm]\nbase_url = \"{base_url}\"\nmodel = \"e2e-model\"\nretry_delay_seconds = 0.01\n\n[tools.bash]\n\
         enabled = true\n\n[tasks]\nprogress_interval_seconds = 0.01\n{tasks}"
    )
}

/// A turn that hands a task off, and a task that runs `bash` in the sandbox before it answers.
async fn scripted_task() -> ScriptedLlm {
    ScriptedLlm::start(vec![
        Script::new(
            "count the files in the background",
            vec![
                Reply::tool("spawn_task", json!({ "prompt": "count the files" })),
                Reply::text("I started a background task."),
            ],
        ),
        Script::new(
            "count the files",
            vec![Reply::tool("bash", json!({ "command": "echo contained" })), Reply::text("There are 3 files.")],
        ),
    ])
    .await
}

/// The worker's `bash` result as its model read it: it ran, in the `contain` sandbox.
fn bash_ran_contained(llm: &ScriptedLlm) {
    let request = llm
        .requests()
        .into_iter()
        .find(|r| {
            let messages = r["messages"].as_array().unwrap();
            messages.iter().any(|m| m["role"] == "user" && m["content"] == "count the files")
                && messages.iter().any(|m| m["role"] == "tool")
        })
        .expect("the worker's model read its bash result");
    let tool = request["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").cloned().unwrap();
    let result: serde_json::Value = serde_json::from_str(tool["content"].as_str().unwrap()).unwrap();
    assert_eq!(result["sandbox_mode"], "contain", "{result}");
    assert_eq!(result["stdout"].as_str().map(str::trim), Some("contained"), "{result}");
}

#[tokio::test]
async fn the_installed_programs_report_their_version() {
    let place = Elsewhere::new("");
    for name in ["minibot", "minibot-worker"] {
        let mut command = place.command(name);
        command.arg("--version");
        let output = run(command).await;
        assert!(output.status.success(), "{name} --version: {}", stderr(&output));
        assert_eq!(stdout(&output), format!("{name} {}\n", env!("CARGO_PKG_VERSION")));
    }
    // Only the two programs the README installs, nothing else of the build (no separate sandbox helper).
    let mut names: Vec<String> =
        std::fs::read_dir(install_bin()).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into()).collect();
    names.sort();
    assert_eq!(names, ["minibot", "minibot-worker"]);
}

#[tokio::test]
async fn the_installed_assistant_answers_and_runs_a_task_on_its_local_worker() {
    let llm = scripted_task().await;
    let place = Elsewhere::new(&config(&llm.base_url(), ""));
    let mut command = place.command("minibot");
    command.args(["console", "--once", "count the files in the background"]);
    let output = run(command).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "I started a background task.\nThere are 3 files.\n");
    bash_ran_contained(&llm);
    assert!(place.path().join("data/tasks.db").is_file(), "the task went through ./data/tasks.db");
}

#[tokio::test]
async fn the_installed_worker_takes_tasks_from_the_sqlite_queue() {
    let llm = scripted_task().await;
    let place = Elsewhere::new(&config(&llm.base_url(), "local_workers = 0\n\n[worker]\nheartbeat_seconds = 1\n"));
    let mut worker = place.command("minibot-worker");
    worker.args(["--config", "config.toml"]).env("MINIBOT_WORKER_ID", "installed-1");
    let _worker = Started(worker.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap());
    let mut command = place.command("minibot");
    command.args(["console", "--once", "count the files in the background"]);
    let output = run(command).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "I started a background task.\nThere are 3 files.\n");
    bash_ran_contained(&llm);
    let url = format!("sqlite://{}", place.path().join("data/tasks.db").display());
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    let workers: Vec<(Option<String>,)> = sqlx::query_as("SELECT worker_id FROM tasks").fetch_all(&pool).await.unwrap();
    pool.close().await;
    assert_eq!(workers, [(Some("installed-1".to_string()),)], "the installed minibot-worker ran it");
    // And the roster command sees it.
    let mut command = place.command("minibot");
    command.args(["queue", "workers"]);
    let output = run(command).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert!(stdout(&output).starts_with("installed-1  host="), "{}", stdout(&output));
}

#[test]
fn scripts_test_installs_what_the_readme_documents() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let script = std::fs::read_to_string(root.join("scripts/test")).unwrap();
    for package in ["orchestrator", "worker"] {
        let documented = format!("cargo install --locked --path {package}");
        assert!(readme.contains(&documented), "README.md documents `{documented}`");
        let installed = format!("cargo install --locked --debug --path {package} --root");
        assert!(script.contains(&installed), "scripts/test runs `{installed} …`");
    }
}
