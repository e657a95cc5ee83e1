//! The interactive console on a pseudo-terminal, for tests that answer its questions as a user would.

use crate::{Home, binary};
use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Everything a child under `script` prints, collected on a thread as it comes.
pub fn capture_screen(child: &mut Child) -> Arc<Mutex<String>> {
    let screen = Arc::new(Mutex::new(String::new()));
    let mut out = child.stdout.take().unwrap();
    let sink = screen.clone();
    std::thread::spawn(move || {
        let mut buffer = [0u8; 4096];
        while let Ok(n) = out.read(&mut buffer) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buffer[..n]));
        }
    });
    screen
}

/// The interactive console on a pseudo-terminal (`script` allocates it), fed line by line.
pub struct Terminal {
    child: Child,
    screen: Arc<Mutex<String>>,
}

/// `shell` run on a pseudo-terminal of its own (`script` allocates it), from the temporary folder, with none of
/// the variables that would point minibot at another key, config or log level.
pub fn in_a_terminal(shell: &str) -> Command {
    let mut command = Command::new("script");
    command
        .args(["-qfec", shell, "/dev/null"])
        .current_dir(std::env::temp_dir())
        .env("TERM", "xterm")
        .env_remove("OPENAI_API_KEY")
        .env_remove("MINIBOT_CONFIG")
        .env_remove("RUST_LOG");
    command
}

impl Terminal {
    pub fn start(home: &Home) -> Self {
        let command = format!("{} console --config {}", binary("minibot").display(), home.config().display());
        let mut child =
            in_a_terminal(&command).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
        let screen = capture_screen(&mut child);
        Self { child, screen }
    }

    /// Types a line and presses Enter.
    /// The pid of the `script` process; the console runs below it.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn type_line(&mut self, line: &str) {
        self.type_keys(&format!("{line}\r"));
    }

    pub fn type_keys(&mut self, keys: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(keys.as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    /// Waits until the screen shows `text` (and returns it), failing after 60 s.
    pub async fn wait_for(&self, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let screen = self.screen.lock().unwrap().clone();
            if screen.contains(text) {
                return screen;
            }
            assert!(Instant::now() < deadline, "the console never showed {text:?}; it shows:\n{screen}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Everything the console printed so far.
    pub fn screen(&self) -> String {
        self.screen.lock().unwrap().clone()
    }

    /// Types `/exit` and waits for the console to end; returns everything it printed.
    pub async fn exit(mut self) -> String {
        self.type_line("/exit");
        let deadline = Instant::now() + Duration::from_secs(15);
        while self.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "the console did not exit on /exit");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // The reader thread may still hold the last bytes.
        tokio::time::sleep(Duration::from_millis(100)).await;
        self.screen()
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
