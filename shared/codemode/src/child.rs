//! The script's process. `minibot` and `minibot-worker` start themselves with [`CHILD_ARG`] as the first
//! argument to run one script; [`serve_if_asked`], called first in their `main`, turns such a process into the
//! script's and never returns. The child reads its [`Setup`] from stdin, caps its own memory and CPU time
//! ([`crate::limits`]) and runs the script ([`crate::engine`]), talking to the parent in JSON lines over stdin
//! and stdout ([`Pipe`]). Whatever the script does inside one interpreter step, it can only exhaust this
//! process: an allocation past the cap aborts it, and the parent kills it at the script's time limit.

use crate::catalog::ScriptTools;
use crate::engine::{self, Script};
use crate::protocol::{Reply, Request, Setup, ToChild};
use std::io::{BufRead, BufReader, Stdin, Stdout, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The first argument that makes `minibot` or `minibot-worker` run a script.
pub const CHILD_ARG: &str = "__minibot_codemode";

/// The native stack of the script's thread. Monty keeps Python frames on its heap; this is room for its Rust side.
const STACK_BYTES: usize = 16 * 1024 * 1024;

static CARRIED: AtomicBool = AtomicBool::new(false);

/// Called first in `main` (after the sandbox's): when this process was started to run a script, it runs it and
/// exits here; otherwise it notes that this program can start itself for scripts.
pub fn serve_if_asked() {
    let mut args = std::env::args_os();
    let _program = args.next();
    if args.next().is_some_and(|first| first == CHILD_ARG) {
        let parent = args.next().and_then(|pid| pid.to_str().and_then(|pid| pid.parse::<u32>().ok()));
        crate::limits::die_with_parent(parent);
        std::process::exit(child_main());
    }
    CARRIED.store(true, Ordering::Relaxed);
}

/// Whether this program called [`serve_if_asked`], so it can run scripts as its own child.
pub(crate) fn carried() -> bool {
    CARRIED.load(Ordering::Relaxed)
}

fn child_main() -> i32 {
    crate::limits::one_arena();
    let spawned = std::thread::Builder::new().name("codemode".into()).stack_size(STACK_BYTES).spawn(run_script);
    match spawned.map(std::thread::JoinHandle::join) {
        Ok(Ok(code)) => code,
        Ok(Err(_)) => 70,
        Err(error) => {
            eprintln!("codemode: cannot start the script's thread: {error}");
            71
        }
    }
}

fn run_script() -> i32 {
    let mut pipe = Pipe::new();
    let mut line = String::new();
    let setup: Setup = match pipe.input.read_line(&mut line).map(|_| serde_json::from_str(&line)) {
        Ok(Ok(setup)) => setup,
        Ok(Err(error)) => {
            eprintln!("codemode: unreadable setup: {error}");
            return 2;
        }
        Err(error) => {
            eprintln!("codemode: cannot read the setup: {error}");
            return 2;
        }
    };
    drop(line);
    pipe.sync(setup.remaining_ms);
    let script = Script {
        code: setup.code,
        catalog: ScriptTools::new(setup.tools),
        budget: Duration::from_millis(setup.budget_ms),
        max_tool_calls: setup.max_tool_calls,
        max_memory: setup.max_memory,
        max_output_chars: setup.max_output_chars,
    };
    if let Err(error) = crate::limits::arm(setup.max_memory, script.budget) {
        eprintln!("codemode: cannot limit the script's process: {error}");
        return 3;
    }
    engine::run(&script, &mut pipe);
    0
}

/// The child's end of the conversation, and its view of the script's clock: what was left when the parent last
/// said, less the time since.
pub struct Pipe {
    input: BufReader<Stdin>,
    output: Stdout,
    remaining: Duration,
    synced: Instant,
}

impl Pipe {
    fn new() -> Self {
        Self {
            input: BufReader::new(std::io::stdin()),
            output: std::io::stdout(),
            remaining: Duration::ZERO,
            synced: Instant::now(),
        }
    }

    fn sync(&mut self, remaining_ms: u64) {
        self.remaining = Duration::from_millis(remaining_ms);
        self.synced = Instant::now();
    }

    /// What is left of the script's time.
    pub fn remaining(&self) -> Duration {
        self.remaining.saturating_sub(self.synced.elapsed())
    }

    /// Sends `request`; `false` when the parent no longer listens.
    pub fn send(&mut self, request: &Request) -> bool {
        let Ok(mut line) = serde_json::to_vec(request) else { return false };
        line.push(b'\n');
        let mut out = self.output.lock();
        out.write_all(&line).and_then(|()| out.flush()).is_ok()
    }

    /// The parent's answer to a [`Request::Wait`]; `None` when the parent is gone or said nothing readable.
    pub fn recv(&mut self) -> Option<Reply> {
        let mut line = String::new();
        if self.input.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let message: ToChild = serde_json::from_str(&line).ok()?;
        self.sync(message.remaining_ms);
        Some(message.reply)
    }
}
