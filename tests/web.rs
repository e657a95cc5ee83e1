//! The daemon with its web UI on, for the web tests and benchmarks: started on a free loopback port, its address
//! read from the start-up line, stopped with SIGTERM when dropped.

use crate::Home;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct WebDaemon {
    pub child: Child,
    /// `http://127.0.0.1:<port>`, without a trailing slash.
    pub base: String,
    /// Everything the daemon wrote to stderr so far.
    pub stderr: Arc<Mutex<Vec<String>>>,
}

impl WebDaemon {
    /// Starts `minibot` (the daemon) on `home`'s config, which must turn `[http]` on with `port = 0`. Panics with
    /// the daemon's output when it does not come up within a minute.
    pub fn start(home: &Home) -> Self {
        let mut command = home.minibot(&[]);
        command.stdout(Stdio::null()).stderr(Stdio::piped()).env("HOME", home.path());
        Self::spawn(command)
    }

    pub fn spawn(mut command: Command) -> Self {
        let mut child = command.spawn().unwrap();
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let lines = stderr.clone();
        let pipe = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let found = stderr.lock().unwrap().iter().find_map(|line| {
                let rest = line.split("web UI at ").nth(1)?;
                Some(rest.split('/').take(3).collect::<Vec<_>>().join("/"))
            });
            if let Some(base) = found {
                return Self { child, base, stderr };
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the daemon exited ({status}): {:#?}", stderr.lock().unwrap());
            }
            assert!(Instant::now() < deadline, "the web UI did not start: {:#?}", stderr.lock().unwrap());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `host:port`.
    pub fn authority(&self) -> &str {
        self.base.trim_start_matches("http://")
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn stderr_text(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }
}

impl Drop for WebDaemon {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `[http]` section for a test daemon: a free loopback port, the given credentials lines, Telegram off.
pub fn http_config(credentials: &str) -> String {
    format!(
        "[channels.telegram]\nenabled = false\n[http]\nenabled = true\nhost = \"127.0.0.1\"\nport = 0\n{credentials}\n"
    )
}

/// Every file under `dir`, in any folder depth.
pub fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}
