//! The `contain` sandbox attacked the way a hostile model that has read the code would, through the real
//! `minibot` binary and its real helper, with the settings a config gets when it names none. One test per class
//! of escape found on earlier code: the model's environment reaching the helper before it confines itself, the
//! controlling terminal, named Unix sockets, unbounded resources; and the devices a root assistant could read.

use minibot_e2e::{Home, Reply, Script, ScriptedLlm, run, stderr, stdout, tool_result};
use serde_json::{Value, json};
use std::path::Path;

/// Runs one tool call the model makes in `minibot console --once`, with `extra` config; the tool's result.
async fn attack(extra: &str, tool: &str, args: Value) -> Value {
    let (result, _) = attack_in(None, extra, tool, args).await;
    result
}

/// The model address of a home made before its model: replaced when the attack starts.
const PLACEHOLDER: &str = "http://127.0.0.1:9";

/// As [`attack`], in `home` when given (made with [`PLACEHOLDER`] for the model; `extra` is then unused).
async fn attack_in(home: Option<Home>, extra: &str, tool: &str, args: Value) -> (Value, Home) {
    let llm =
        ScriptedLlm::start(vec![Script::new("attack", vec![Reply::tool(tool, args), Reply::text("attacked")])]).await;
    let home = match home {
        Some(home) => {
            let config = std::fs::read_to_string(home.config()).unwrap().replace(PLACEHOLDER, &llm.base_url());
            std::fs::write(home.config(), config).unwrap();
            home
        }
        None => Home::new(&llm.base_url(), extra),
    };
    let output = run(home.minibot(&["console", "--once", "attack"])).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "attacked\n");
    (tool_result(&llm), home)
}

fn seen(result: &Value) -> String {
    format!("{}{}", result["stdout"].as_str().unwrap_or_default(), result["stderr"].as_str().unwrap_or_default())
}

const BASH: &str = "[tools.bash]\nenabled = true\n";

/// Builds a shared library whose constructor, wherever it is loaded, tries to leave a mark outside the
/// sandbox and to read the config.
fn evil_library(dir: &Path, mark: &Path, config: &Path) -> std::path::PathBuf {
    let source = dir.join("evil.c");
    let library = dir.join("evil.so");
    let code = format!(
        r#"#include <stdio.h>
__attribute__((constructor)) static void evil(void) {{
    FILE *mark = fopen("{mark}", "w");
    if (mark) {{ fputs("escaped", mark); fclose(mark); }}
    FILE *config = fopen("{config}", "r");
    char line[256];
    if (config && fgets(line, sizeof line, config)) fprintf(stderr, "CONFIG:%s", line);
}}
"#,
        mark = mark.display(),
        config = config.display()
    );
    std::fs::write(&source, code).unwrap();
    let status = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(&source)
        .status()
        .expect("a C compiler (cc) builds the test library");
    assert!(status.success());
    library
}

#[tokio::test]
async fn the_models_environment_reaches_only_the_command_inside_the_sandbox() {
    let outside = tempfile::tempdir().unwrap();
    let command = "echo \"FOO=$FOO\"; tr '\\0' '\\n' </proc/1/environ | wc -c";
    for variable in ["LD_PRELOAD", "LD_AUDIT"] {
        let home = Home::new(PLACEHOLDER, BASH);
        let mark = outside.path().join(format!("escaped-{variable}.txt"));
        let library = evil_library(outside.path(), &mark, &home.config());
        let env = json!({ variable: library.display().to_string(), "FOO": "bar" });
        let (result, _) = attack_in(Some(home), BASH, "bash", json!({ "command": command, "env": env })).await;
        let text = seen(&result);
        assert!(!mark.exists(), "{variable}: code chosen by the model ran outside the sandbox: {text}");
        assert!(!text.contains("CONFIG:"), "{variable}: the config was read: {text}");
        // `env` still works as MiniBot documents it, inside the sandbox.
        assert!(text.contains("FOO=bar"), "{variable}: {text}");
        // The sandbox's pid 1 (a fork of the helper) has no environment of its own.
        assert!(text.contains("\n0\n"), "{variable}: the helper had an environment: {text}");
    }
}

#[tokio::test]
async fn a_contained_command_has_no_terminal_to_type_into() {
    let llm_code = r#"
import fcntl, os, termios
word = ''.join(map(chr, [105, 110, 106, 101, 99, 116, 101, 100, 52, 55, 49, 49])) + '\n'
print('ctty', open('/proc/self/stat').read().rsplit(')', 1)[1].split()[4])
try:
    os.open('/dev/tty', os.O_RDWR)
    print('tty: opened')
except OSError as e:
    print('tty: refused', e.errno)
for fd in (0, 1, 2):
    try:
        for ch in word:
            fcntl.ioctl(fd, termios.TIOCSTI, ch.encode())
        print('tiocsti', fd, 'worked')
    except OSError as e:
        print('tiocsti', fd, 'refused', e.errno)
try:
    fcntl.ioctl(1, 0x541C, b'\x0b')
    print('tioclinux worked')
except OSError as e:
    print('tioclinux refused', e.errno)
print('pts', sorted(os.listdir('/dev/pts')))
"#;
    // The assistant runs on a terminal, as a person starts it: `script` gives it one.
    let llm = ScriptedLlm::start(vec![Script::new(
        "attack",
        vec![Reply::tool("python_execute", json!({ "code": llm_code })), Reply::text("attacked")],
    )])
    .await;
    let home = Home::new(&llm.base_url(), "");
    let command = format!(
        "{} console --once attack --config {}",
        minibot_e2e::binary("minibot").display(),
        home.config().display()
    );
    let mut script = std::process::Command::new("script");
    script.args(["-qfec", &command, "/dev/null"]).current_dir(std::env::temp_dir()).env_remove("OPENAI_API_KEY");
    let output = run(script).await;
    let screen = stdout(&output);
    assert!(screen.contains("attacked"), "{screen} {}", stderr(&output));
    let result = tool_result(&llm);
    let text = seen(&result);
    assert!(text.contains("ctty 0\n"), "the command kept a controlling terminal: {text}");
    assert!(text.contains("tty: refused"), "{text}");
    assert!(!text.contains("worked"), "input was pushed into a terminal: {text}");
    assert!(!screen.contains("injected4711"), "the terminal received typed input: {screen}");
    // Only the namespace's own pseudo-terminals exist for it, not the user's.
    assert!(text.contains("pts ['ptmx']"), "{text}");
}

/// A Unix socket server outside the sandbox, as the user's tmux server, docker.sock or an SSH agent would be;
/// counts the connections and datagrams it gets.
struct LocalService {
    _dir: tempfile::TempDir,
    stream: std::path::PathBuf,
    datagram: std::path::PathBuf,
    reached: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl LocalService {
    fn start() -> Self {
        use std::sync::atomic::Ordering;
        let dir = tempfile::tempdir().unwrap();
        let stream = dir.path().join("server.sock");
        let datagram = dir.path().join("log.sock");
        let reached = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let listener = std::os::unix::net::UnixListener::bind(&stream).unwrap();
        let counter = reached.clone();
        std::thread::spawn(move || {
            for connection in listener.incoming() {
                if connection.is_ok() {
                    counter.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
        let socket = std::os::unix::net::UnixDatagram::bind(&datagram).unwrap();
        let counter = reached.clone();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 64];
            while socket.recv(&mut buffer).is_ok() {
                counter.fetch_add(1, Ordering::SeqCst);
            }
        });
        // Everyone may connect, as to a socket in /tmp or /run.
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        Self { _dir: dir, stream, datagram, reached }
    }

    fn reached(&self) -> usize {
        self.reached.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[tokio::test]
async fn no_unix_socket_outside_the_sandbox_can_be_reached_with_network_on_or_off() {
    let service = LocalService::start();
    let code = format!(
        r#"
import socket
def attempt(name, f):
    try:
        f()
        print(name, 'reached')
    except OSError as e:
        print(name, 'refused', e.errno)
    except (OverflowError, ValueError) as e:
        print(name, 'refused', e)
def stream():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect({stream:?})
def datagram():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.sendto(b'x', {datagram:?})
def pair_datagram():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    a.sendto(b'x', {datagram:?})
def pair_raw():
    # The kernel makes a SOCK_RAW Unix pair a datagram pair, whose sendto names any socket.
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_RAW)
    a.sendto(b'x', {datagram:?})
def abstract():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect('\0minibot-redteam')
def raw_family():
    # AF_UNIX with upper bits set, straight to the system call: the kernel reads only the low 32 bits.
    import ctypes, platform
    libc = ctypes.CDLL(None, use_errno=True)
    number = {{'x86_64': 41, 'aarch64': 198}}[platform.machine()]
    fd = libc.syscall(number, ctypes.c_long(1 | (1 << 32)), ctypes.c_long(1), ctypes.c_long(0))
    if fd < 0:
        raise OSError(ctypes.get_errno(), 'socket')
    s = socket.socket(fileno=fd)
    s.connect({stream:?})
for name, f in [('stream', stream), ('datagram', datagram), ('pair_datagram', pair_datagram), ('pair_raw', pair_raw),
                ('abstract', abstract), ('raw_family', raw_family)]:
    attempt(name, f)
a, b = socket.socketpair()
a.send(b'ok'); print('pair', b.recv(2))
"#,
        stream = service.stream.display().to_string(),
        datagram = service.datagram.display().to_string()
    );
    for network in ["false", "true"] {
        let extra = format!("[tools.python_exec]\nallow_network = {network}\n");
        let result = attack(&extra, "python_execute", json!({ "code": code })).await;
        let text = seen(&result);
        assert!(!text.contains("reached"), "allow_network = {network}: {text}");
        assert!(text.contains("pair b'ok'"), "a program's own socket pairs still work: {text}");
        assert_eq!(result["sandbox_network"], json!(network == "true"), "{result}");
    }
    assert_eq!(service.reached(), 0, "the local service was reached");
}

#[tokio::test]
async fn a_root_command_cannot_read_disks_memory_or_the_users_terminals() {
    let command = "for d in /dev/vda /dev/sda /dev/nvme0n1 /dev/mem /dev/kmsg /dev/pts/0; do \
                   head -c1 \"$d\" >/dev/null 2>&1 && echo \"read $d\"; done; ls /dev >/dev/null 2>&1 && echo listed; \
                   head -c4 /dev/urandom | wc -c; echo fine >/dev/null && echo null-ok";
    let result = attack(BASH, "bash", json!({ "command": command })).await;
    let text = seen(&result);
    assert!(!text.contains("read /dev"), "{text}");
    assert!(!text.contains("listed"), "{text}");
    assert!(text.contains("4\nnull-ok"), "the everyday devices work: {text}");
}

#[tokio::test]
async fn limits_are_on_by_default_and_a_call_past_one_names_it_and_its_key() {
    // The defaults: a 6 GiB allocation fails, ordinary work runs.
    let code = "b = bytearray(6 << 30)\nprint('allocated')";
    let result = attack("", "python_execute", json!({ "code": code })).await;
    assert!(seen(&result).contains("MemoryError"), "{result}");
    assert_eq!(result["limit"]["key"], "[tools.python_exec.limits] memory_mb", "{result}");
    assert!(result["error"].as_str().unwrap().contains("memory_mb"), "{result}");

    // Small limits, to hit each quickly.
    let extra = "[tools.bash]\nenabled = true\n[tools.bash.limits]\ntemp_mb = 8\ncpu_seconds = 1\n";
    let fill = "dd if=/dev/zero of=\"$TMPDIR/big\" bs=1M count=64";
    let result = attack(extra, "bash", json!({ "command": fill })).await;
    assert!(seen(&result).contains("No space left on device"), "{result}");
    assert_eq!(result["limit"]["key"], "[tools.bash.limits] temp_mb", "{result}");

    // A process of the command hit a bound and the command went on: told as a warning.
    let extra_fsize = "[tools.bash]\nenabled = true\n[tools.bash.limits]\nfile_size_mb = 1\n";
    let cut = "head -c 5000000 /dev/zero > \"$TMPDIR/big\"; echo after";
    let result = attack(extra_fsize, "bash", json!({ "command": cut })).await;
    assert_eq!(result["exit_code"], 0, "{result}");
    assert_eq!(result["limit"]["key"], "[tools.bash.limits] file_size_mb", "{result}");
    assert!(result["warning"].as_str().unwrap().contains("file_size_mb"), "{result}");

    let spin = "while :; do :; done";
    let result = attack(extra, "bash", json!({ "command": spin, "timeout_seconds": 20 })).await;
    assert_eq!(result["limit"]["key"], "[tools.bash.limits] cpu_seconds", "{result}");
    assert!(result["error"].as_str().unwrap().contains("CPU time"), "{result}");
}

/// The kernel counts no processes for root, so this runs the assistant as a normal user (as the Docker image
/// and the systemd units do): a copy of `minibot` (it carries its helper) in a folder that user owns.
#[tokio::test]
async fn the_process_limit_holds_for_a_normal_user() {
    let code = "import threading, time\nfor i in range(200):\n    threading.Thread(target=time.sleep, args=(3,)).start()\nprint('started all')";
    let llm = ScriptedLlm::start(vec![Script::new(
        "attack",
        vec![Reply::tool("python_execute", json!({ "code": code })), Reply::text("attacked")],
    )])
    .await;
    let home = Home::new(&llm.base_url(), "[tools.python_exec.limits]\nprocesses = 40\n");
    let command = if nix_is_root() {
        let binary = home.path().join("minibot");
        std::fs::copy(minibot_e2e::binary("minibot"), &binary).unwrap();
        let status =
            std::process::Command::new("chown").args(["-R", "nobody:nogroup"]).arg(home.path()).status().unwrap();
        assert!(status.success());
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut command = std::process::Command::new("setpriv");
        command.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--reset-env"]).arg(&binary);
        command
    } else {
        std::process::Command::new(minibot_e2e::binary("minibot"))
    };
    let mut command = command;
    command
        .args(["console", "--once", "attack", "--config"])
        .arg(home.config())
        .current_dir(home.path())
        .env_remove("OPENAI_API_KEY")
        .stdin(std::process::Stdio::null());
    let output = run(command).await;
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let result = tool_result(&llm);
    assert!(seen(&result).contains("can't start new thread"), "{result}");
    assert!(!seen(&result).contains("started all"), "{result}");
    assert_eq!(result["limit"]["key"], "[tools.python_exec.limits] processes", "{result}");
}

fn nix_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(2) == Some("0")))
        .unwrap_or(false)
}

#[tokio::test]
async fn a_contained_bash_starts_in_the_managed_root() {
    let extra = "[tools.bash]\nenabled = true\n[tools.file_storage]\nenabled = true\n";
    let (result, home) = attack_in(None, extra, "bash", json!({ "command": "pwd; echo note > made-here.txt" })).await;
    assert_eq!(result["exit_code"], 0, "{result}");
    let root = home.path().join("data/files");
    assert!(root.join("made-here.txt").is_file(), "{result}");
    assert!(result["cwd"].as_str().unwrap().ends_with("data/files"), "{result}");
}

/// Landlock cannot take a path back out of a writable folder, so a managed folder that holds something the
/// assistant runs (here its agents folder) stops start-up rather than let a contained command plant a specialist.
#[tokio::test]
async fn a_managed_folder_holding_the_agents_folder_stops_start_up_in_contain_mode() {
    let llm = ScriptedLlm::start(vec![Script::new("hello", vec![Reply::text("hi")])]).await;
    let extra =
        "[tools.file_storage]\nenabled = true\nroot_dir = \"files\"\n[orchestration]\ndirectory = \"files/agents\"\n";
    let home = Home::new(&llm.base_url(), extra);
    std::fs::create_dir_all(home.path().join("files/agents")).unwrap();
    let output = run(home.minibot(&["console", "--once", "hello"])).await;
    assert!(!output.status.success(), "start-up went on: {}", stdout(&output));
    let message = stderr(&output);
    assert_eq!(message.lines().count(), 1, "one line: {message}");
    assert!(message.contains("agents folder") && message.contains("root_dir"), "{message}");
    assert!(llm.requests().is_empty());
}

/// Landlock does not see `chmod`, `chown`, extended attributes or times: with namespaces every mount but the
/// writable folders is read-only, so a command can neither make a secret world-readable nor a copy of a
/// program setuid, nor touch the host's System V shared memory.
#[tokio::test]
async fn modes_owners_and_times_outside_the_writable_folders_cannot_change() {
    use std::os::unix::fs::PermissionsExt as _;
    let outside = tempfile::tempdir().unwrap();
    let file = outside.path().join("private.txt");
    std::fs::write(&file, "mine").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let before = std::fs::metadata(&file).unwrap().modified().unwrap();
    let segment = std::process::Command::new("ipcmk").args(["-M", "4096"]).output().unwrap();
    let id: String = String::from_utf8_lossy(&segment.stdout).chars().filter(char::is_ascii_digit).collect();
    let placeholder = Home::new(PLACEHOLDER, BASH);
    let config = placeholder.config();
    let command = format!(
        "chmod 666 {f} {c}; chmod u+s {f}; chown 0:0 {f}; touch -d 2001-01-01 {f} {c}; setfattr -n user.x -v 1 {f}; \
         ipcs -m | grep -c ' {id} ' ; echo done",
        f = file.display(),
        c = config.display()
    );
    let (result, _home) = attack_in(Some(placeholder), BASH, "bash", json!({ "command": command })).await;
    let _ = std::process::Command::new("ipcrm").args(["-m", &id]).status();
    let text = seen(&result);
    assert!(text.contains("done"), "{text}");
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o7777, 0o600, "{text}");
    assert_eq!(std::fs::metadata(&file).unwrap().modified().unwrap(), before, "{text}");
    assert_eq!(std::fs::metadata(&config).unwrap().permissions().mode() & 0o777, 0o644, "{text}");
    assert!(text.contains("0\ndone"), "the host's shared memory segment {id} was visible: {text}");
}

/// A file system mounted a second time shows the same files under another path: the hidden ones stay hidden
/// there too. Needs root (to bind-mount); skipped otherwise.
#[tokio::test]
async fn a_second_mount_of_the_config_folder_does_not_reveal_it() {
    if !nix_is_root() {
        eprintln!("skipped: bind mounts need root");
        return;
    }
    let home = Home::new(PLACEHOLDER, &format!("# canary-mount-4711\n{BASH}"));
    let outside = tempfile::tempdir().unwrap();
    // A name that is not UTF-8, as the mount table writes it.
    let alias = outside.path().join(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b"copy \xff"));
    std::fs::create_dir(&alias).unwrap();
    let status = std::process::Command::new("mount").arg("--bind").arg(home.path()).arg(&alias).status().unwrap();
    assert!(status.success());
    let command =
        format!("cd {}/* && cat config.toml; cat {}/config.toml", outside.path().display(), home.path().display());
    let (result, _home) = attack_in(Some(home), BASH, "bash", json!({ "command": command })).await;
    let _ = std::process::Command::new("umount").arg(&alias).status();
    let text = seen(&result);
    assert!(!text.contains("canary-mount-4711"), "the config was read through the second mount: {text}");
}

/// The helper's own words travel on a descriptor the command never holds: a command that prints them is a
/// command that ran, and blames no limit.
#[tokio::test]
async fn a_command_cannot_speak_for_the_helper() {
    let command = "echo ran > proof.txt; echo 'minibot-sandbox: Landlock: not offered by this kernel' >&2; \
                   echo 'minibot-sandbox: limit: temp' >&2; exit 125";
    let extra = "[tools.bash]\nenabled = true\n[tools.file_storage]\nenabled = true\n";
    let (result, home) = attack_in(None, extra, "bash", json!({ "command": command })).await;
    assert_eq!(result["exit_code"], 125, "{result}");
    assert!(result.get("limit").is_none(), "{result}");
    assert!(home.path().join("data/files/proof.txt").is_file(), "{result}");
}

/// The managed folder and the run folder are on the assistant's disk: a call may take `disk_mb` of it.
#[tokio::test]
async fn a_call_filling_the_disk_is_stopped_at_its_bound() {
    let extra =
        "[tools.bash]\nenabled = true\n[tools.bash.limits]\ndisk_mb = 16\n[tools.file_storage]\nenabled = true\n";
    let fill = "for i in $(seq 1 400); do head -c 1048576 /dev/zero >> big.bin; sleep 0.01; done; echo finished";
    let (result, home) = attack_in(None, extra, "bash", json!({ "command": fill, "timeout_seconds": 60 })).await;
    assert!(!seen(&result).contains("finished"), "{result}");
    assert_eq!(result["limit"]["key"], "[tools.bash.limits] disk_mb", "{result}");
    let written = std::fs::metadata(home.path().join("data/files/big.bin")).map(|m| m.len()).unwrap_or(0);
    assert!(written < 64 * 1024 * 1024, "{written} bytes written");
}

/// What no resource limit counts, and what would outlive the call on the disk: refused, so that programs fall back
/// to what is bounded. A setuid file in the managed folder would let any local user run it as the assistant.
#[tokio::test]
async fn unbounded_memory_instant_disk_and_setuid_files_are_refused() {
    let code = r#"
import ctypes, os, stat
libc = ctypes.CDLL(None, use_errno=True)
def attempt(name, f):
    try:
        f(); print(name, 'worked')
    except OSError as e:
        print(name, 'refused', e.errno)
def memfd():
    os.memfd_create('x')
def sysv():
    if libc.shmget(0, 1 << 20, 0o1600) < 0:
        raise OSError(ctypes.get_errno(), 'shmget')
def falloc():
    fd = os.open('big', os.O_CREAT | os.O_WRONLY, 0o600)
    if libc.fallocate(fd, 0, ctypes.c_long(0), ctypes.c_long(1 << 30)) != 0:
        raise OSError(ctypes.get_errno(), 'fallocate')
def setuid_chmod():
    open('tool', 'w').write('#!/bin/sh\n')
    os.chmod('tool', 0o4755)
def setuid_create():
    os.close(os.open('tool2', os.O_CREAT | os.O_WRONLY, 0o4755))
    if os.stat('tool2').st_mode & 0o4000:
        raise SystemExit('setuid file made')
def filecap():
    # cap_setuid+ep on a file the command owns, in the v2 form: any local user running it could become root.
    value = bytes([0, 0, 0, 2, 0x80, 0, 0, 0, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])
    open('capped', 'w').write('x')
    os.setxattr('capped', 'security.capability', value)
def open_tree_attr():
    # A clone of a mount with its read-only flag cleared (Linux 6.15).
    if libc.syscall(467, -100, b'/', 1 | 0x8000, None, 0) < 0:
        raise OSError(ctypes.get_errno(), 'open_tree_attr')
for name, f in [('memfd', memfd), ('sysv', sysv), ('fallocate', falloc), ('setuid_chmod', setuid_chmod),
                ('setuid_create', setuid_create), ('filecap', filecap), ('open_tree_attr', open_tree_attr)]:
    attempt(name, f)
os.chmod('tool', 0o755); print('plain chmod ok')
print('big', os.path.getsize('big') if os.path.exists('big') else 0)
"#;
    let extra = "[tools.file_storage]\nenabled = true\n";
    let home = Home::new(PLACEHOLDER, extra);
    let root = home.path().join("data/files");
    std::fs::create_dir_all(&root).unwrap();
    let args = json!({ "code": format!("import os\nos.chdir({:?})\n{code}", root.display().to_string()) });
    let (result, _home) = attack_in(Some(home), extra, "python_execute", args).await;
    let text = seen(&result);
    for name in ["memfd", "sysv", "fallocate", "setuid_chmod", "filecap", "open_tree_attr"] {
        assert!(text.contains(&format!("{name} refused")), "{name}: {text}");
    }
    assert!(!text.contains("worked"), "{text}");
    assert!(!text.contains("setuid file made"), "{text}");
    assert!(text.contains("plain chmod ok"), "{text}");
    assert!(text.contains("big 0"), "disk space was allocated at once: {text}");
}
