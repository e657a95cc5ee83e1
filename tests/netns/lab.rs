//! Hosts as network namespaces, driven through `hosts.sh`: a private broker in `broker`, the driving code in
//! `orch`, one `minibot-worker` per worker host, restarted whenever it exits (as systemd's `Restart=always`).
//!
//! The driving code (in-process orchestrator, scripted model, lapin probes) runs on a thread moved into the
//! orch namespace with `setns` ([`Lab::in_orch`]): sockets keep the namespace they were made in, and threads and
//! processes started from that thread inherit it, so nothing else of the test process changes namespace.

use minibot_test_support::binary;
use nix::sched::CloneFlags;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// AMQP heartbeat the tests ask for: a cut host's connection is declared dead after about two of them, by the
/// broker and by the client alike. lapin reads it from the URL query and takes the lower of its and the
/// broker's value.
pub const HEARTBEAT_SECONDS: u32 = 2;
/// Pause before a worker that exited is started again.
const RESTART_DELAY: Duration = Duration::from_millis(100);
/// What the logs of a failed test show of each file.
const LOG_TAIL_BYTES: u64 = 6_000;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("netns/hosts.sh")
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One run of `hosts.sh up`; dropping it kills the workers and takes everything down again.
pub struct Lab {
    state: tempfile::TempDir,
    info: HashMap<String, String>,
    /// `hosts.sh guard`: takes the hosts down if this process dies without running `Drop`.
    guard: Option<Child>,
    workers: Mutex<Vec<Worker>>,
}

impl Lab {
    /// Hosts `broker`, `orch` and `w1..w<workers>` with the private broker started. Panics with the reason
    /// when network namespaces are not available: these tests never skip silently.
    pub fn up(workers: usize) -> Lab {
        let state = tempfile::Builder::new().prefix("mb-netns-state.").tempdir().unwrap();
        let output = Command::new(script())
            .arg("up")
            .arg(workers.to_string())
            .env("MB_NETNS_STATE", state.path())
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script().display()));
        if !output.status.success() {
            panic!(
                "the scale-out tests need network namespaces (`ip netns`, as root) and RabbitMQ's \
                 rabbitmq-server; `hosts.sh up {workers}` failed:\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let mut lab = Lab { state, info: HashMap::new(), guard: None, workers: Mutex::new(Vec::new()) };
        lab.guard = Command::new(script())
            .arg("guard")
            .arg(std::process::id().to_string())
            .env("MB_NETNS_STATE", lab.state.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .ok();
        let info = lab.hosts(&["info"]);
        lab.info = info.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.into(), v.into())).collect();
        lab
    }

    /// Runs `hosts.sh <args>` for this run; its stdout. Panics when it fails.
    fn hosts(&self, args: &[&str]) -> String {
        let output = Command::new(script())
            .args(args)
            .env("MB_NETNS_STATE", self.state.path())
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script().display()));
        assert!(output.status.success(), "hosts.sh {args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).to_string()
    }

    fn value(&self, key: &str) -> &str {
        self.info.get(key).unwrap_or_else(|| panic!("hosts.sh info has no {key}: {:?}", self.info))
    }

    /// The broker's URL with the short heartbeat every client here uses.
    pub fn broker_url(&self) -> String {
        format!("{}?heartbeat={HEARTBEAT_SECONDS}", self.value("broker_url"))
    }

    pub fn addr(&self, host: &str) -> Ipv4Addr {
        self.value(&format!("addr.{host}")).parse().unwrap()
    }

    pub fn ns(&self, host: &str) -> String {
        self.value(&format!("ns.{host}")).to_string()
    }

    /// A folder for config files and data, removed with the hosts.
    pub fn dir(&self) -> &Path {
        self.state.path()
    }

    /// Takes the host's link down: its packets are dropped silently.
    pub fn cut(&self, host: &str) {
        self.hosts(&["cut", host]);
    }

    pub fn restore(&self, host: &str) {
        self.hosts(&["restore", host]);
    }

    /// Stops the broker cleanly and starts it again on the same data; returns once it accepts connections.
    pub fn restart_broker(&self) {
        self.hosts(&["broker-restart"]);
    }

    /// Runs `f` on a thread inside the orch namespace and returns what it returns (a panic there is raised
    /// here).
    pub fn in_orch<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let netns = format!("/var/run/netns/{}", self.ns("orch"));
        std::thread::scope(|scope| {
            let thread = std::thread::Builder::new()
                .name("orch".into())
                .spawn_scoped(scope, move || {
                    let file = std::fs::File::open(&netns).unwrap_or_else(|e| panic!("cannot open {netns}: {e}"));
                    nix::sched::setns(file, CloneFlags::CLONE_NEWNET)
                        .unwrap_or_else(|e| panic!("cannot enter the network namespace {netns}: {e}"));
                    f()
                })
                .unwrap();
            thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    }

    /// Starts `minibot-worker --config <config>` in the host's namespace, as `<host>-1`, and keeps it running:
    /// each time it exits it is started again as `<host>-2`, `<host>-3`, … until the lab is dropped.
    pub fn start_worker(&self, host: &str, config: &Path) {
        let worker = Worker::start(host, &self.ns(host), config, &self.dir().join(format!("{host}.log")));
        lock(&self.workers).push(worker);
    }

    /// Stops every worker (they are not restarted).
    pub fn stop_workers(&self) {
        let workers: Vec<Worker> = lock(&self.workers).drain(..).collect();
        for worker in workers {
            worker.stop();
        }
    }

    /// The worker of `host`: its pid right now and how many times it has been started.
    pub fn worker(&self, host: &str) -> Option<(Option<u32>, u32)> {
        lock(&self.workers).iter().find(|w| w.host == host).map(|w| {
            let state = lock(&w.state);
            (state.pid, state.starts)
        })
    }

    /// Every process in the host's namespace (`ip netns pids`).
    pub fn pids(&self, host: &str) -> Vec<u32> {
        let output = Command::new("ip").args(["netns", "pids", &self.ns(host)]).output().unwrap();
        String::from_utf8_lossy(&output.stdout).split_whitespace().filter_map(|p| p.parse().ok()).collect()
    }

    /// The last lines of every worker's log and of the broker's, for a failed test.
    pub fn logs(&self) -> String {
        let mut text = String::new();
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.dir())
            .map(|entries| entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "log")))
            .into_iter()
            .flatten()
            .collect();
        if let Some(tmp) = self.info.get("tmp") {
            files.push(Path::new(tmp).join("log/server.out"));
            files.push(Path::new(tmp).join("log/broker.log"));
        }
        files.sort();
        for path in files {
            text.push_str(&format!("==== {} ====\n{}\n", path.display(), tail(&path)));
        }
        text
    }
}

fn tail(path: &Path) -> String {
    let Ok(mut file) = std::fs::File::open(path) else { return String::new() };
    let length = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(length.saturating_sub(LOG_TAIL_BYTES)));
    let mut bytes = Vec::new();
    let _ = file.read_to_end(&mut bytes);
    String::from_utf8_lossy(&bytes).to_string()
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.stop_workers();
        if std::thread::panicking() {
            eprintln!("logs of the failed scale-out run:\n{}", self.logs());
        }
        let status = Command::new(script())
            .arg("down")
            .env("MB_NETNS_STATE", self.state.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status();
        if !status.is_ok_and(|s| s.success()) {
            eprintln!("hosts.sh down failed for {}", self.state.path().display());
        }
        if let Some(mut guard) = self.guard.take() {
            // The whole group: the guard's shell and the `sleep` it may be in.
            if let Ok(pgid) = i32::try_from(guard.id()) {
                let _ = kill(Pid::from_raw(-pgid), Signal::SIGKILL);
            }
            let _ = guard.wait();
        }
    }
}

#[derive(Default)]
struct WorkerState {
    stopping: bool,
    pid: Option<u32>,
    starts: u32,
}

/// One supervised `minibot-worker`.
struct Worker {
    host: String,
    state: Arc<Mutex<WorkerState>>,
    thread: JoinHandle<()>,
}

impl Worker {
    fn start(host: &str, ns: &str, config: &Path, log: &Path) -> Worker {
        let program = binary("minibot-worker");
        let state = Arc::new(Mutex::new(WorkerState::default()));
        let (host, ns, config, log) = (host.to_string(), ns.to_string(), config.to_path_buf(), log.to_path_buf());
        let shared = state.clone();
        let thread = std::thread::spawn({
            let host = host.clone();
            move || {
                loop {
                    let mut child = {
                        // Checked and started under the lock, so `stop` never misses a worker started meanwhile.
                        let mut state = lock(&shared);
                        if state.stopping {
                            return;
                        }
                        state.starts += 1;
                        let log = std::fs::OpenOptions::new().create(true).append(true).open(&log).unwrap();
                        // `ip netns exec` execs the command, so the child's pid is the worker's.
                        let child = Command::new("ip")
                            .args(["netns", "exec", &ns])
                            .arg(&program)
                            .arg("--config")
                            .arg(&config)
                            .env("MINIBOT_WORKER_ID", format!("{host}-{}", state.starts))
                            .env("RUST_LOG", "warn,minibot_worker=info,minibot_queue=info")
                            .stdin(Stdio::null())
                            .stdout(Stdio::null())
                            .stderr(log)
                            .spawn()
                            .unwrap_or_else(|e| panic!("cannot start minibot-worker on {host}: {e}"));
                        state.pid = Some(child.id());
                        child
                    };
                    let _ = child.wait();
                    let mut state = lock(&shared);
                    state.pid = None;
                    if state.stopping {
                        return;
                    }
                    drop(state);
                    std::thread::sleep(RESTART_DELAY);
                }
            }
        });
        Worker { host, state, thread }
    }

    fn stop(self) {
        {
            let mut state = lock(&self.state);
            state.stopping = true;
            if let Some(pid) = state.pid.and_then(|p| i32::try_from(p).ok()) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
        let _ = self.thread.join();
    }
}

/// Forwards TCP connections from `listen` to `to`: the scripted model listens on the orch namespace's loopback
/// only, and the workers reach it through this listener on the orch host's address.
pub async fn forward(listen: SocketAddr, to: SocketAddr) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind(listen).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            tokio::spawn(async move {
                let _ = inbound.set_nodelay(true);
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(to).await {
                    let _ = outbound.set_nodelay(true);
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    addr
}

/// CPU time a process used so far, user and system, in clock ticks of 10 ms (0 when it is gone).
pub fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name is in parentheses and may hold spaces; utime and stime are the 12th and 13th fields
    // after it.
    let Some((_, rest)) = stat.rsplit_once(')') else { return 0 };
    rest.split_whitespace().skip(11).take(2).filter_map(|t| t.parse::<u64>().ok()).sum()
}

/// Resident memory of a process, from /proc (0 when it is gone).
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse().ok())
        .unwrap_or(0)
}
