#![allow(clippy::expect_used, clippy::unwrap_used)]
//! The helper binary itself, in both of its modes: with namespaces, and as a subreaper (what a host that refuses
//! namespaces gets). What must hold in both: no controlling terminal, no Unix socket, none of the user's
//! terminals, the request's environment and folder only inside, and its input after the request.

use minibot_sandbox::{Limits, Policy, Request};
use std::io::Write;
use std::process::{Command, Stdio};

const PROBE: &str = r#"
import os, socket, sys
print('ctty', open('/proc/self/stat').read().rsplit(')', 1)[1].split()[4])
try:
    os.open('/dev/tty', os.O_RDWR); print('tty opened')
except OSError as e:
    print('tty refused')
try:
    socket.socket(socket.AF_UNIX); print('unix socket made')
except OSError as e:
    print('unix refused')
try:
    print('pts', sorted(os.listdir('/dev/pts')))
except OSError:
    print('pts hidden')
if os.environ.get('TRY_OTHERS'):
    import resource
    try:
        resource.prlimit(os.getppid(), resource.RLIMIT_NOFILE, (64, 64)); print('prlimit of another worked')
    except OSError:
        print('prlimit of another refused')
    try:
        os.chmod('.', 0o777); print('chmod worked')
    except OSError:
        print('chmod refused')
    try:
        # `who` 0 with PRIO_USER is every process of the user, the assistant included.
        os.setpriority(os.PRIO_USER, 0, 19); print('renice of the user worked')
    except OSError:
        print('renice of the user refused')
print('env', os.environ.get('GREETING'), 'cwd', os.getcwd())
print('stdin', sys.stdin.read())
"#;

/// Runs the helper binary with `input` on its standard input (a request, then the command's input).
fn helper(input: &[u8]) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_minibot-sandbox"))
        .arg(minibot_sandbox::RUN_ARG)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

fn run(namespaces: bool) -> String {
    run_with(namespaces, &[])
}

fn run_with(namespaces: bool, extra_env: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let writable = dir.path().canonicalize().unwrap();
    let request = Request {
        policy: Policy {
            read_write: vec![writable.clone()],
            namespaces,
            limits: Some(Limits { cpu_seconds: Some(10), ..Limits::default() }),
            ..Policy::default()
        },
        argv: vec!["python3".into(), "-c".into(), PROBE.into()],
        env: [("PATH", "/usr/local/bin:/usr/bin:/bin"), ("GREETING", "hello")]
            .iter()
            .chain(extra_env)
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        cwd: writable.clone(),
        report_tag: None,
    };
    let mut input = request.encode().unwrap();
    input.extend_from_slice(b"rest of the input");
    let output = helper(&input);
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{text} {}", String::from_utf8_lossy(&output.stderr));
    assert!(text.contains(&format!("env hello cwd {}", writable.display())), "{text}");
    text
}

fn holds(text: &str) {
    assert!(text.contains("ctty 0\n"), "a controlling terminal: {text}");
    assert!(text.contains("tty refused"), "{text}");
    assert!(text.contains("unix refused"), "{text}");
    assert!(text.contains("stdin rest of the input"), "{text}");
}

#[test]
fn with_namespaces_the_command_gets_its_own_terminals_only() {
    let text = run(true);
    holds(&text);
    assert!(text.contains("pts ['ptmx']"), "{text}");
}

#[test]
fn as_a_subreaper_the_same_holds_and_no_terminal_is_there() {
    let text = run(false);
    holds(&text);
    assert!(text.contains("pts hidden"), "{text}");
}

/// Without namespaces, other processes of the user are reachable by pid, and no mount is read-only: the calls
/// Landlock does not see are refused (the helper, the command's parent, stands for the assistant).
#[test]
fn as_a_subreaper_other_processes_and_file_modes_are_out_of_reach() {
    let text = run_with(false, &[("TRY_OTHERS", "1")]);
    assert!(text.contains("prlimit of another refused"), "{text}");
    assert!(text.contains("chmod refused"), "{text}");
    assert!(text.contains("renice of the user refused"), "{text}");
}

/// A writable folder that is gone (the managed folder deleted while the assistant runs) is no reason to fail
/// every call: there is nothing to grant.
#[test]
fn a_missing_writable_folder_is_skipped() {
    for namespaces in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let request = Request {
            policy: Policy {
                read_write: vec![dir.path().join("gone"), dir.path().to_path_buf()],
                namespaces,
                ..Policy::default()
            },
            argv: vec!["/bin/sh".into(), "-c".into(), "echo ok > made".into()],
            env: vec![],
            cwd: dir.path().to_path_buf(),
            report_tag: None,
        };
        let output = helper(&request.encode().unwrap());
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        assert!(dir.path().join("made").is_file());
    }
}

/// The helper's own lines carry the call's tag, which the command never sees; what the command prints does not.
#[test]
fn the_helpers_reports_carry_the_calls_tag() {
    let request = Request {
        policy: Policy { read_write: vec!["/nonexistent/folder".into()], ..Policy::default() },
        argv: vec!["/bin/sh".into(), "-c".into(), "echo 'minibot-sandbox: fake' >&2".into()],
        env: vec![],
        cwd: "/nonexistent/cwd".into(),
        report_tag: Some("tag-4711".into()),
    };
    let output = helper(&request.encode().unwrap());
    assert_eq!(output.status.code(), Some(minibot_sandbox::SETUP_FAILED_EXIT));
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(error.starts_with("tag-4711 minibot-sandbox: cannot enter the working folder"), "{error}");
}

#[test]
fn a_malformed_request_runs_nothing_and_says_why() {
    for input in [&b""[..], &b"\x05\x00\x00\x00{not"[..], &b"\xff\xff\xff\xff"[..]] {
        let output = helper(input);
        assert_eq!(output.status.code(), Some(minibot_sandbox::SETUP_FAILED_EXIT));
        let error = String::from_utf8_lossy(&output.stderr);
        assert!(error.starts_with(minibot_sandbox::SETUP_FAILED_PREFIX), "{error}");
    }
}
