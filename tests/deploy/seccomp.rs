//! `deploy/seccomp-minibot.json`, the seccomp profile the compose services run under so that the `contain`
//! sandbox gets its namespaces (docs/deploy.md, "The sandbox in containers"), checked without a container
//! engine: the services name it and the other two options the sandbox needs and no wider one; it is Docker's
//! default profile with exactly the sandbox helper's five rules added; those rules let through what the helper
//! calls, read from its sources and, where `strace` is installed, watched while the real helper runs; and what
//! Docker's default keeps from a container stays refused.
//!
//! The profile is read the way Docker (moby) and libseccomp read it: rules are kept or dropped by the
//! container's architecture, capabilities and kernel; a call is allowed when an allowing rule names it and all
//! of that rule's argument conditions hold, else it gets the errno of a refusing rule that names it, else the
//! default action's.
//!
//! `moby-seccomp-default.json` beside this file is moby's default profile verbatim: `seccomp/default.json` of
//! github.com/moby/profiles at commit 190fa92cb2750186268c960ce30718d3495a228d, the file docs.docker.com links
//! as Docker's default.

use crate::setup::{assert_none, deploy};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub const PROFILE: &str = "deploy/seccomp-minibot.json";
const UPSTREAM: &str = "tests/deploy/moby-seccomp-default.json";
/// What the helper's rules carry as their `comment`: how the five additions are told from Docker's own rules.
const ADDED: &str = "minibot-sandbox:";
/// Allowed by moby/profiles since mid-2025 (moby/profiles#2: kernel keyrings respect user namespaces now),
/// refused by the profile of every Docker release before it; this profile keeps refusing them.
const KEYRING: &[&str] = &["add_key", "keyctl", "request_key"];

const CLONE_NEWNS: u64 = 0x0002_0000;
const CLONE_NEWUSER: u64 = 0x1000_0000;
const CLONE_NEWPID: u64 = 0x2000_0000;
const CLONE_NEWIPC: u64 = 0x0800_0000;
/// The helper's one `unshare`: user, mount, pid and IPC namespaces together.
const HELPER_NAMESPACES: u64 = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC;
/// The namespace flags of `clone`/`unshare` (Docker's own `clone` rule refuses any of these).
const NAMESPACE_FLAGS: &[(&str, u64)] = &[
    ("CLONE_NEWNS", CLONE_NEWNS),
    ("CLONE_NEWUSER", CLONE_NEWUSER),
    ("CLONE_NEWPID", CLONE_NEWPID),
    ("CLONE_NEWNET", 0x4000_0000),
    ("CLONE_NEWUTS", 0x0400_0000),
    ("CLONE_NEWIPC", CLONE_NEWIPC),
    ("CLONE_NEWCGROUP", 0x0200_0000),
    ("CLONE_NEWTIME", 0x80),
];
/// The other `clone` flags strace prints for a fork, a thread or a vfork.
const CLONE_FLAGS: &[(&str, u64)] = &[
    ("CLONE_VM", 0x100),
    ("CLONE_FS", 0x200),
    ("CLONE_FILES", 0x400),
    ("CLONE_SIGHAND", 0x800),
    ("CLONE_PIDFD", 0x1000),
    ("CLONE_VFORK", 0x4000),
    ("CLONE_PARENT", 0x8000),
    ("CLONE_THREAD", 0x1_0000),
    ("CLONE_SYSVSEM", 0x4_0000),
    ("CLONE_SETTLS", 0x8_0000),
    ("CLONE_PARENT_SETTID", 0x10_0000),
    ("CLONE_CHILD_CLEARTID", 0x20_0000),
    ("CLONE_CHILD_SETTID", 0x100_0000),
    ("SIGCHLD", 17),
];
/// `mount` flags by name (`MsFlags::MS_*` in the helper, `MS_*` in strace's output).
const MOUNT_FLAGS: &[(&str, u64)] = &[
    ("MS_RDONLY", 1),
    ("MS_NOSUID", 2),
    ("MS_NODEV", 4),
    ("MS_NOEXEC", 8),
    ("MS_SYNCHRONOUS", 16),
    ("MS_REMOUNT", 32),
    ("MS_MANDLOCK", 64),
    ("MS_DIRSYNC", 128),
    ("MS_NOSYMFOLLOW", 256),
    ("MS_NOATIME", 1024),
    ("MS_NODIRATIME", 2048),
    ("MS_BIND", 4096),
    ("MS_MOVE", 8192),
    ("MS_REC", 16384),
    ("MS_SILENT", 32768),
    ("MS_POSIXACL", 1 << 16),
    ("MS_UNBINDABLE", 1 << 17),
    ("MS_PRIVATE", 1 << 18),
    ("MS_SLAVE", 1 << 19),
    ("MS_SHARED", 1 << 20),
    ("MS_RELATIME", 1 << 21),
    ("MS_STRICTATIME", 1 << 24),
    ("MS_LAZYTIME", 1 << 25),
];
/// The only mount flags the profile lets the helper use: those of its mounts (a private `/`, `/proc`,
/// `/dev/shm`, the temp folder, a devpts instance and the `ptmx` bind).
const HELPER_MOUNT_FLAGS: &[&str] = &["MS_NOSUID", "MS_NODEV", "MS_NOEXEC", "MS_BIND", "MS_REC", "MS_PRIVATE"];
/// The flags of the new mount API's calls by name, as the helper's constants and strace name them (`O_CLOEXEC`
/// as on x86-64 and arm64, the profile's hosts).
const MOUNT_API_FLAGS: &[(&str, u64)] = &[
    ("OPEN_TREE_CLONE", 1),
    ("OPEN_TREE_CLOEXEC", 0x8_0000),
    ("O_CLOEXEC", 0x8_0000),
    ("AT_SYMLINK_NOFOLLOW", 0x100),
    ("AT_NO_AUTOMOUNT", 0x800),
    ("AT_EMPTY_PATH", 0x1000),
    ("AT_RECURSIVE", 0x8000),
    ("MOVE_MOUNT_F_SYMLINKS", 1),
    ("MOVE_MOUNT_F_AUTOMOUNTS", 2),
    ("MOVE_MOUNT_F_EMPTY_PATH", 4),
    ("MOVE_MOUNT_T_SYMLINKS", 0x10),
    ("MOVE_MOUNT_T_AUTOMOUNTS", 0x20),
    ("MOVE_MOUNT_T_EMPTY_PATH", 0x40),
    ("MOVE_MOUNT_SET_GROUP", 0x100),
    ("MOVE_MOUNT_BENEATH", 0x200),
];
/// The new mount API calls the helper makes to leave only its writable folders writable: each with the index of
/// its flags argument and the only flags the profile lets through (`mount_setattr`'s attributes are behind a
/// pointer, out of seccomp's sight).
const MOUNT_API: &[(&str, usize, &[&str])] = &[
    ("open_tree", 2, &["OPEN_TREE_CLONE", "OPEN_TREE_CLOEXEC", "AT_RECURSIVE"]),
    ("mount_setattr", 2, &["AT_RECURSIVE"]),
    ("move_mount", 4, &["MOVE_MOUNT_F_EMPTY_PATH"]),
];
/// The flags of the C library's `fork`: `clone(CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD)`.
const FORK: u64 = 0x20_0000 | 0x100_0000 | 17;

/// Every system call `minibot-sandbox` makes until the command's exec, as `strace -f` showed them for
/// `--probe` and for `--run` with namespaces (the three processes: the helper, the pid namespace's pid 1, the
/// command before its exec). [`the_real_helper_makes_only_calls_the_profile_allows`] watches the helper again.
const HELPER_CALLS: &[&str] = &[
    "access",
    "arch_prctl",
    "brk",
    "chdir",
    "clone",
    "close",
    "close_range",
    "execve",
    "exit_group",
    "fcntl",
    "getdents64",
    "getgid",
    "getpid",
    "getrandom",
    "gettid",
    "getuid",
    "kill",
    "landlock_add_rule",
    "landlock_create_ruleset",
    "landlock_restrict_self",
    "mmap",
    "mount",
    "mount_setattr",
    "move_mount",
    "mprotect",
    "munmap",
    "newfstatat",
    "open_tree",
    "openat",
    "pipe2",
    "poll",
    "prctl",
    "pread64",
    "prlimit64",
    "read",
    "readlink",
    "rseq",
    "rt_sigaction",
    "rt_sigprocmask",
    "rt_sigtimedwait",
    "sched_getaffinity",
    "seccomp",
    "set_robust_list",
    "set_tid_address",
    "setsid",
    "sigaltstack",
    "statfs",
    "statx",
    "unshare",
    "wait4",
    "write",
];

/// The capabilities Docker gives a container by default (moby's `DefaultCapabilities`): what the profile's
/// `caps` conditions are evaluated against. The compose file adds none.
const DOCKER_CAPS: &[&str] = &[
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
];

/// The hosts the profile is for: Docker's architecture names, and the oldest kernel the docs name (Ubuntu
/// 22.04's 5.15) for `minKernel` conditions.
const ARCHES: &[&str] = &["amd64", "arm64"];
const KERNEL: (u64, u64) = (5, 15);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Errno(u64),
}

/// A container as the profile sees it.
pub struct Container<'a> {
    pub arch: &'a str,
    pub caps: &'a [&'a str],
    pub kernel: (u64, u64),
}

impl Container<'static> {
    pub fn docker(arch: &'static str) -> Self {
        Self { arch, caps: DOCKER_CAPS, kernel: KERNEL }
    }
}

pub struct Profile {
    pub json: Value,
}

impl Profile {
    pub fn read(relative: &str) -> Self {
        let text = deploy().repo.read(relative);
        let json = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{relative} is not JSON: {e}"));
        Self { json }
    }

    pub fn rules(&self) -> &Vec<Value> {
        self.json["syscalls"].as_array().expect("a syscalls list")
    }

    fn default_errno(&self) -> u64 {
        assert_eq!(self.json["defaultAction"], "SCMP_ACT_ERRNO", "the profile refuses what it does not name");
        self.json["defaultErrnoRet"].as_u64().unwrap_or(1)
    }

    /// What `name(args…)` gets in `container`.
    pub fn verdict(&self, container: &Container, name: &str, args: &[u64]) -> Verdict {
        let mut refused = None;
        for rule in self.rules().iter().filter(|r| applies(r, container)) {
            let named = rule["names"].as_array().is_some_and(|n| n.iter().any(|n| n == name));
            if !named || !conditions_hold(rule, args) {
                continue;
            }
            match rule["action"].as_str() {
                Some("SCMP_ACT_ALLOW") => return Verdict::Allow,
                Some("SCMP_ACT_ERRNO") => {
                    refused.get_or_insert(rule["errnoRet"].as_u64().unwrap_or_else(|| self.default_errno()));
                }
                other => panic!("an action this check does not know: {other:?} in {rule}"),
            }
        }
        Verdict::Errno(refused.unwrap_or_else(|| self.default_errno()))
    }
}

/// Whether a rule is in the filter moby builds for `container` (its `includes` and `excludes`).
fn applies(rule: &Value, container: &Container) -> bool {
    let list = |filter: &str, key: &str| -> Vec<String> {
        rule[filter][key]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect())
            .unwrap_or_default()
    };
    let has_cap = |cap: &String| container.caps.contains(&cap.as_str());
    let arches = list("includes", "arches");
    if !arches.is_empty() && !arches.iter().any(|a| a == container.arch) {
        return false;
    }
    if !list("includes", "caps").iter().all(has_cap) {
        return false;
    }
    if let Some(min) = rule["includes"]["minKernel"].as_str() {
        let mut parts = min.split('.').map(|p| p.parse::<u64>().unwrap_or(0));
        let min = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        if container.kernel < min {
            return false;
        }
    }
    if list("excludes", "arches").iter().any(|a| a == container.arch) {
        return false;
    }
    !list("excludes", "caps").iter().any(has_cap)
}

fn conditions_hold(rule: &Value, args: &[u64]) -> bool {
    let Some(conditions) = rule["args"].as_array() else {
        return true;
    };
    conditions.iter().all(|c| {
        let index = c["index"].as_u64().expect("a condition's index");
        let arg = args.get(usize::try_from(index).unwrap_or(usize::MAX)).copied().unwrap_or(0);
        let value = c["value"].as_u64().expect("a condition's value");
        let two = c["valueTwo"].as_u64().unwrap_or(0);
        match c["op"].as_str().expect("a condition's op") {
            "SCMP_CMP_EQ" => arg == value,
            "SCMP_CMP_NE" => arg != value,
            "SCMP_CMP_LT" => arg < value,
            "SCMP_CMP_LE" => arg <= value,
            "SCMP_CMP_GT" => arg > value,
            "SCMP_CMP_GE" => arg >= value,
            "SCMP_CMP_MASKED_EQ" => arg & value == two,
            other => panic!("a comparison this check does not know: {other}"),
        }
    })
}

fn flag(table: &[(&str, u64)], name: &str) -> Option<u64> {
    table.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

/// `A|B|0x10` as strace prints flags, or `0`.
fn flags_value(text: &str, tables: &[&[(&str, u64)]]) -> Result<u64, String> {
    let mut value = 0;
    for word in text.trim().split('|') {
        let word = word.trim();
        let known = tables.iter().find_map(|t| flag(t, word));
        let number = word.strip_prefix("0x").map_or_else(|| word.parse().ok(), |h| u64::from_str_radix(h, 16).ok());
        value |= known.or(number).ok_or_else(|| format!("a flag this check does not know: {word}"))?;
    }
    Ok(value)
}

fn helper_mount_mask() -> u64 {
    HELPER_MOUNT_FLAGS.iter().map(|f| flag(MOUNT_FLAGS, f).expect("a known flag")).fold(0, |a, b| a | b)
}

/// The flags the profile lets through for `call` of [`MOUNT_API`], with the index of its flags argument.
fn mount_api_flags(call: &str) -> (usize, u64) {
    let (_, index, names) = MOUNT_API.iter().find(|(name, ..)| *name == call).expect("a call of MOUNT_API");
    let value = names.iter().map(|n| flag(MOUNT_API_FLAGS, n).expect("a known flag")).fold(0, |a, b| a | b);
    (*index, value)
}

/// Six arguments, all zero but `value` at `index`.
fn args_with(index: usize, value: u64) -> Vec<u64> {
    let mut args = vec![0; 6];
    args[index] = value;
    args
}

/// The five rules the profile adds to Docker's default, as they must read.
fn expected_additions() -> Vec<Value> {
    let unshare = serde_json::json!({
        "names": ["unshare"],
        "action": "SCMP_ACT_ALLOW",
        "args": [{"index": 0, "value": HELPER_NAMESPACES, "op": "SCMP_CMP_EQ"}],
    });
    let mount = serde_json::json!({
        "names": ["mount"],
        "action": "SCMP_ACT_ALLOW",
        "args": [{"index": 3, "value": !helper_mount_mask(), "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}],
    });
    let mut rules = vec![unshare, mount];
    for (call, ..) in MOUNT_API {
        let (index, value) = mount_api_flags(call);
        rules.push(serde_json::json!({
            "names": [call],
            "action": "SCMP_ACT_ALLOW",
            "args": [{"index": index, "value": value, "op": "SCMP_CMP_EQ"}],
        }));
    }
    rules
}

fn is_added(rule: &Value) -> bool {
    rule["comment"].as_str().is_some_and(|c| c.starts_with(ADDED))
}

#[test]
fn every_service_that_runs_tools_names_the_profile_and_no_wider_option() {
    let d = deploy();
    let mut problems = vec![];
    let mut checked = 0;
    for (name, service) in d.ours() {
        checked += 1;
        let opts = &service.security_opt;
        // Compose reads `seccomp=` (or `seccomp:`) as a file relative to the compose file, or `unconfined`.
        let seccomp: Vec<&str> =
            opts.iter().filter_map(|o| o.strip_prefix("seccomp=").or_else(|| o.strip_prefix("seccomp:"))).collect();
        match seccomp.as_slice() {
            [file] if *file == "unconfined" => problems.push(format!("service {name}: seccomp=unconfined")),
            [file] if file.trim_start_matches("./") != PROFILE => {
                problems.push(format!("service {name}: seccomp={file}, not {PROFILE}"));
            }
            [_] => {}
            other => problems.push(format!("service {name}: one seccomp= option naming {PROFILE}, not {other:?}")),
        }
        // Compose v2 turns exactly this spelling into the engine's settings (`systempaths:…` reaches the engine,
        // which refuses it).
        if !opts.iter().any(|o| o == "systempaths=unconfined") {
            problems.push(format!("service {name}: no `systempaths=unconfined` in security_opt (docs/deploy.md)"));
        }
        // No AppArmor profile, or the one docs/deploy.md gives for Ubuntu 24.04 (user namespaces allowed).
        let apparmor = |o: &String| o == "apparmor=unconfined" || o == "apparmor=minibot-sandbox";
        if !opts.iter().any(apparmor) {
            problems.push(format!("service {name}: no `apparmor=unconfined` in security_opt (docs/deploy.md)"));
        }
        for opt in opts {
            let known = opt.starts_with("seccomp") || opt == "systempaths=unconfined" || apparmor(opt);
            if !known && opt != "no-new-privileges:true" && opt != "no-new-privileges=true" {
                problems.push(format!("service {name}: security_opt `{opt}` is not one docs/deploy.md explains"));
            }
        }
        if service.privileged {
            problems.push(format!("service {name}: privileged: true turns every confinement off"));
        }
        if !service.cap_add.is_empty() {
            problems.push(format!("service {name}: cap_add {:?}: the sandbox needs no capability", service.cap_add));
        }
    }
    assert!(checked >= 2, "the orchestrator and worker services");
    let (broker_name, broker) = d.broker();
    if !broker.security_opt.is_empty() {
        problems.push(format!(
            "{broker_name} runs no tool commands and keeps Docker's defaults: {:?}",
            broker.security_opt
        ));
    }
    assert_none(problems, "compose services and the sandbox's container options");
}

#[test]
fn the_profile_is_dockers_default_with_only_the_sandbox_rules_added() {
    let upstream = Profile::read(UPSTREAM);
    let ours = Profile::read(PROFILE);
    for key in ["defaultAction", "defaultErrnoRet", "archMap"] {
        assert_eq!(ours.json[key], upstream.json[key], "{key} differs from Docker's default");
    }
    let keys: BTreeSet<&String> = ours.json.as_object().expect("an object").keys().collect();
    let upstream_keys: BTreeSet<&String> = upstream.json.as_object().expect("an object").keys().collect();
    assert_eq!(keys, upstream_keys, "the profile has the top-level keys of Docker's default, no more");

    // Docker's default, less the keyring calls that only moby/profiles' newest revision allows.
    let mut expected: Vec<Value> = upstream.rules().clone();
    let allow_all = &mut expected[0];
    assert!(allow_all.get("args").is_none() && allow_all.get("includes").is_none(), "rule 0 allows unconditionally");
    let names = allow_all["names"].as_array_mut().expect("names");
    for call in KEYRING {
        assert!(names.iter().any(|n| n == call), "{call} is in the default's allow list: the reference changed");
    }
    names.retain(|n| !KEYRING.iter().any(|k| n == k));

    let (added, kept): (Vec<Value>, Vec<Value>) = ours.rules().iter().cloned().partition(is_added);
    assert_eq!(kept.len(), expected.len(), "the profile drops or adds rules of Docker's default");
    let mut problems = vec![];
    for (i, (got, want)) in kept.iter().zip(&expected).enumerate() {
        if got == want {
            continue;
        }
        let names = |rule: &Value| -> BTreeSet<String> {
            rule["names"].as_array().into_iter().flatten().filter_map(|n| n.as_str().map(String::from)).collect()
        };
        let (got_names, want_names) = (names(got), names(want));
        let mut without_names = [got.clone(), want.clone()];
        for rule in &mut without_names {
            rule.as_object_mut().expect("a rule").remove("names");
        }
        problems.push(format!(
            "rule {i} differs from Docker's: names added {:?}, removed {:?}{}",
            got_names.difference(&want_names).collect::<Vec<_>>(),
            want_names.difference(&got_names).collect::<Vec<_>>(),
            if without_names[0] == without_names[1] {
                String::new()
            } else {
                format!("; the rest is {} instead of {}", without_names[0], without_names[1])
            }
        ));
    }
    assert_none(problems, "Docker's default rules changed in the profile");
    let stripped: Vec<Value> = added
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r.as_object_mut().expect("a rule").remove("comment");
            r
        })
        .collect();
    assert_eq!(stripped, expected_additions(), "the sandbox's rules are these five, exactly (docs/deploy.md)");
    assert!(
        ours.rules().ends_with(&added),
        "the sandbox's rules come after Docker's, so a diff against the default shows them at a glance"
    );
}

/// The helper's own sources: which namespaces it unshares, which mount flags it uses and which system calls it
/// makes through `libc::syscall` (with the flags it passes the new mount API), so a change to the helper that
/// the profile would refuse in a container fails here instead of in a deployment.
#[test]
fn the_profile_allows_what_the_helpers_sources_call() {
    let root = &deploy().repo.root;
    let sources = sandbox_sources(root);
    assert!(!sources.is_empty(), "the sandbox helper's sources under shared/sandbox/src");
    let ours = Profile::read(PROFILE);
    let mut problems = vec![];
    let mut unshared = 0;
    let mut mount_flags = 0;
    // Each raw call: where, and its arguments as the profile sees them (zero where the source is not a flag).
    let mut raw_calls: Vec<(String, String, Vec<u64>)> = vec![];
    for (path, text) in &sources {
        let shown = path.strip_prefix(root).unwrap_or(path).display().to_string();
        if text.contains("unshare(") {
            unshared |= tokens(text, "CloneFlags::")
                .iter()
                .map(|t| flag(NAMESPACE_FLAGS, t).ok_or_else(|| format!("{shown}: unknown flag {t}")))
                .collect::<Result<Vec<_>, _>>()
                .unwrap_or_else(|e| panic!("{e}"))
                .into_iter()
                .fold(0, |a, b| a | b);
        }
        for token in tokens(text, "MsFlags::") {
            match flag(MOUNT_FLAGS, &token) {
                Some(value) => mount_flags |= value,
                None => problems.push(format!("{shown}: a mount flag this check does not know: {token}")),
            }
        }
        // The helper's own constants for the new mount API's flags must be the kernel's.
        for (name, value) in constants(text) {
            if let Some(known) = flag(MOUNT_API_FLAGS, &name)
                && known != value
            {
                problems.push(format!("{shown}: const {name} = {value:#x}, the kernel's is {known:#x}"));
            }
        }
        for (call, args) in raw_syscalls(text) {
            let Some(&(_, index, _)) = MOUNT_API.iter().find(|(name, ..)| *name == call) else {
                raw_calls.push((shown.clone(), call, vec![0; 6]));
                continue;
            };
            // args[0] is the call's number: the flags are one further on.
            match args.get(index + 1).map(|a| source_flags(a)) {
                Some(Ok(value)) => raw_calls.push((shown.clone(), call, args_with(index, value))),
                Some(Err(e)) => problems.push(format!("{shown}: {call}: {e}")),
                None => problems.push(format!("{shown}: {call} with {} arguments", args.len() - 1)),
            }
        }
        // Calls the profile does not allow at all: each would need a rule of its own (and a reason in the docs).
        for call in ["umount(", "umount2(", "pivot_root(", "setns(", "sched::clone(", "syscall(libc::SYS_clone"] {
            if text.contains(call) {
                problems.push(format!("{shown} calls {call}…), which {PROFILE} refuses in a container"));
            }
        }
    }
    assert_eq!(unshared, HELPER_NAMESPACES, "the helper unshares user, mount, pid and IPC namespaces");
    assert!(mount_flags != 0, "the helper mounts (its /proc at least): the source scan found no MsFlags");
    // Each of the profile's new mount API rules is for a call the helper makes, with the flags it allows.
    for (call, ..) in MOUNT_API {
        let (index, allowed) = mount_api_flags(call);
        let used: Vec<u64> = raw_calls.iter().filter(|(_, c, _)| c == call).map(|(.., args)| args[index]).collect();
        if used.is_empty() {
            problems.push(format!("the helper's sources make no {call} call: {PROFILE} allows one (drop its rule)"));
        }
        for value in used.into_iter().filter(|v| *v != allowed) {
            problems.push(format!("the helper calls {call} with flags {value:#x}, the profile allows {allowed:#x}"));
        }
    }
    for arch in ARCHES {
        let container = Container::docker(arch);
        if ours.verdict(&container, "unshare", &[unshared]) != Verdict::Allow {
            problems.push(format!("{arch}: unshare({unshared:#x}) is refused"));
        }
        // The rule is a mask: every combination of the flags in use passes when all of them together pass.
        if ours.verdict(&container, "mount", &[0, 0, 0, mount_flags]) != Verdict::Allow {
            problems.push(format!("{arch}: mount with flags {mount_flags:#x} is refused"));
        }
        for (shown, call, args) in &raw_calls {
            let verdict = ours.verdict(&container, call, args);
            if verdict != Verdict::Allow {
                problems.push(format!("{arch}: {shown} calls {call} {args:#x?}, which gets {verdict:?}"));
            }
        }
        for call in HELPER_CALLS {
            let mount_api = MOUNT_API.iter().any(|(name, ..)| name == call);
            let args = match *call {
                "unshare" => vec![unshared],
                "mount" => vec![0, 0, 0, mount_flags],
                "clone" => vec![FORK],
                _ if mount_api => {
                    let (index, value) = mount_api_flags(call);
                    args_with(index, value)
                }
                _ => vec![],
            };
            if *call == "arch_prctl" && *arch != "amd64" {
                continue;
            }
            let verdict = ours.verdict(&container, call, &args);
            if verdict != Verdict::Allow {
                problems.push(format!("{arch}: the helper's {call} gets {verdict:?}"));
            }
        }
    }
    assert_none(problems, "calls of the sandbox helper that the profile refuses");
}

#[test]
fn what_dockers_default_refuses_stays_refused() {
    let ours = Profile::read(PROFILE);
    let upstream = Profile::read(UPSTREAM);
    let helper_flags = HELPER_NAMESPACES;
    let mut problems = vec![];
    for arch in ARCHES {
        let c = Container::docker(arch);
        // Refused outright: keyrings, BPF, tracing and other processes' memory, file handles, kernel images and
        // modules, the new mount API's file system contexts, io_uring, userfaultfd, swap, reboot, clocks, raw I/O,
        // other namespaces.
        for call in [
            "add_key",
            "keyctl",
            "request_key",
            "bpf",
            "perf_event_open",
            "kcmp",
            "pidfd_getfd",
            "open_by_handle_at",
            "kexec_load",
            "kexec_file_load",
            "init_module",
            "finit_module",
            "delete_module",
            "setns",
            "umount",
            "umount2",
            "pivot_root",
            "fsopen",
            "fsconfig",
            "fsmount",
            "fspick",
            "io_uring_setup",
            "io_uring_enter",
            "io_uring_register",
            "userfaultfd",
            "swapon",
            "swapoff",
            "reboot",
            "syslog",
            "acct",
            "settimeofday",
            "clock_settime",
            "iopl",
            "ioperm",
            "lookup_dcookie",
            "quotactl",
            "sethostname",
            "setdomainname",
            "lsm_set_self_attr",
            "nfsservctl",
            "vhangup",
            "mbind",
            "set_mempolicy",
        ] {
            if ours.verdict(&c, call, &[0; 6]) == Verdict::Allow {
                problems.push(format!("{arch}: {call} is allowed"));
            }
        }
        // ptrace and reading or writing another process's memory as in the default: refused before Linux 4.8,
        // whose ptrace can no longer get a traced process past seccomp (the command's own filter refuses them).
        for call in ["ptrace", "process_vm_readv", "process_vm_writev"] {
            let old = Container { arch, caps: DOCKER_CAPS, kernel: (4, 4) };
            for container in [&c, &old] {
                let (got, want) = (ours.verdict(container, call, &[0; 6]), upstream.verdict(container, call, &[0; 6]));
                if got != want {
                    problems.push(format!(
                        "{arch}, Linux {:?}: {call} gets {got:?}, in Docker's default {want:?}",
                        container.kernel
                    ));
                }
            }
            if ours.verdict(&old, call, &[0; 6]) == Verdict::Allow {
                problems.push(format!("{arch}: {call} is allowed before Linux 4.8"));
            }
        }
        // clone3 answers ENOSYS (its flags are out of seccomp's sight; the C library falls back to clone).
        if ours.verdict(&c, "clone3", &[0; 6]) != Verdict::Errno(38) {
            problems.push(format!("{arch}: clone3 does not answer ENOSYS"));
        }
        // A fork passes; clone with any namespace flag does not.
        if ours.verdict(&c, "clone", &[FORK]) != Verdict::Allow {
            problems.push(format!("{arch}: fork (clone {FORK:#x}) is refused"));
        }
        for (name, value) in NAMESPACE_FLAGS.iter().filter(|(n, _)| *n != "CLONE_NEWTIME") {
            if ours.verdict(&c, "clone", &[FORK | value]) == Verdict::Allow {
                problems.push(format!("{arch}: clone with {name} is allowed"));
            }
        }
        // unshare: the helper's four namespaces together, nothing else, in no other combination.
        for (name, value) in NAMESPACE_FLAGS {
            for flags in [*value, helper_flags | value, helper_flags & !value] {
                if flags != helper_flags && ours.verdict(&c, "unshare", &[flags]) == Verdict::Allow {
                    problems.push(format!("{arch}: unshare({flags:#x}) ({name}) is allowed"));
                }
            }
        }
        for extra in [0x200_u64, 0x400, 0x4_0000] {
            if ours.verdict(&c, "unshare", &[helper_flags | extra]) == Verdict::Allow {
                problems.push(format!("{arch}: unshare with the helper's flags plus {extra:#x} is allowed"));
            }
        }
        // mount: never a remount, a move, shared or slave propagation, or any flag the helper does not use.
        for (name, value) in MOUNT_FLAGS.iter().filter(|(n, _)| !HELPER_MOUNT_FLAGS.contains(n)) {
            if ours.verdict(&c, "mount", &[0, 0, 0, *value]) == Verdict::Allow {
                problems.push(format!("{arch}: mount with {name} is allowed"));
            }
        }
        for high in [1_u64 << 32, 1 << 63] {
            if ours.verdict(&c, "mount", &[0, 0, 0, high | 2]) == Verdict::Allow {
                problems.push(format!("{arch}: mount with flag bits above 32 ({high:#x}) is allowed"));
            }
        }
        // open_tree, mount_setattr and move_mount: the helper's flags exactly. No open_tree without a clone (a
        // descriptor of a mount in place), no move_mount of a mount named by path, onto an empty path, beneath
        // another or sharing its peer group, no mount_setattr on one mount alone or by an empty path.
        for (call, ..) in MOUNT_API {
            let (index, allowed) = mount_api_flags(call);
            if ours.verdict(&c, call, &args_with(index, allowed)) != Verdict::Allow {
                problems.push(format!("{arch}: {call} with the helper's flags {allowed:#x} is refused"));
            }
            let mut others = vec![0, allowed | 1 << 32, allowed | 1 << 63];
            for (_, value) in MOUNT_API_FLAGS {
                others.extend([*value, allowed | value, allowed & !value]);
            }
            for flags in others.into_iter().filter(|f| *f != allowed) {
                if ours.verdict(&c, call, &args_with(index, flags)) == Verdict::Allow {
                    problems.push(format!("{arch}: {call} with flags {flags:#x} is allowed"));
                }
            }
        }
        // Sockets and personality as in the default.
        if ours.verdict(&c, "socket", &[40]) == Verdict::Allow {
            problems.push(format!("{arch}: AF_VSOCK sockets are allowed"));
        }
        if ours.verdict(&c, "personality", &[0x0040_0000]) == Verdict::Allow {
            problems.push(format!("{arch}: personality(READ_IMPLIES_EXEC) is allowed"));
        }
        // And with capabilities added (a user's own override), the default's capability rules still decide.
        let admin: Vec<&str> = DOCKER_CAPS.iter().copied().chain(["CAP_SYS_ADMIN"]).collect();
        let with_admin = Container { arch, caps: &admin, kernel: KERNEL };
        for call in ["setns", "umount2", "bpf", "keyctl", "fsopen", "open_tree"] {
            let (got, want) = (ours.verdict(&with_admin, call, &[0; 6]), upstream.verdict(&with_admin, call, &[0; 6]));
            if got != want && !KEYRING.contains(&call) {
                problems.push(format!("{arch} with CAP_SYS_ADMIN: {call} gets {got:?}, Docker's default {want:?}"));
            }
        }
    }
    assert_none(problems, "calls Docker's default refuses that the profile lets through");
}

/// The real helper under `strace -f`: every call it makes until the command's exec (with the arguments a rule
/// looks at, as strace prints them) must pass the profile. Needs `strace` and a built `minibot-sandbox`, and
/// says so and passes when either is missing: the checks above hold without them.
#[test]
fn the_real_helper_makes_only_calls_the_profile_allows() {
    let Some(strace) = on_path("strace") else {
        eprintln!("skipped: no strace on PATH (apt-get install strace)");
        return;
    };
    let helper = sandbox_binary();
    if !helper.is_file() {
        eprintln!("skipped: {} is not built (cargo build -p minibot-sandbox)", helper.display());
        return;
    }
    let dir = tempfile::tempdir().expect("a temp dir");
    let work = dir.path().join("work");
    std::fs::create_dir(&work).expect("a work folder");
    let ours = Profile::read(PROFILE);
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    let container = Container::docker(arch);
    let mut problems = vec![];
    let mut seen = BTreeSet::new();
    for (label, args, input) in [("--probe", vec!["--probe"], Vec::new()), ("--run", vec!["--run"], request(&work))] {
        let trace = dir.path().join(format!("trace{label}"));
        let mut child = Command::new(&strace)
            .args(["-f", "-qq", "-s", "64", "-o"])
            .arg(&trace)
            .arg(&helper)
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("strace starts");
        {
            use std::io::Write as _;
            let mut stdin = child.stdin.take().expect("stdin");
            let _ = stdin.write_all(&input);
        }
        let output = child.wait_with_output().expect("strace ends");
        let text = std::fs::read_to_string(&trace).unwrap_or_default();
        let calls = helper_calls(&text);
        let succeeded = |needle: &str| calls.iter().any(|c| c.name == needle && !c.failed);
        // The probe makes everything read-only; a command's run also keeps its writable folder.
        let made: &[&str] = match label {
            "--run" => &["unshare", "mount", "mount_setattr", "open_tree", "move_mount"],
            _ => &["unshare", "mount", "mount_setattr"],
        };
        assert!(
            output.status.success() && made.iter().all(|c| succeeded(c)),
            "minibot-sandbox {label} under strace did not make its namespaces ({}): {}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim(),
            text.lines().rev().take(15).collect::<Vec<_>>().join("\n")
        );
        if label == "--run" {
            assert!(
                calls.iter().any(|c| c.name == "execve" && c.args.contains("/bin/true") && !c.failed),
                "the helper never ran its command: its request format changed? (stderr: {})",
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        for call in calls {
            seen.insert(call.name.clone());
            let args = match call.name.as_str() {
                "unshare" => flags_value(&call.args, &[NAMESPACE_FLAGS, CLONE_FLAGS]).map(|f| vec![f]),
                "clone" => {
                    let flags = call.args.split(", ").find_map(|a| a.strip_prefix("flags=")).unwrap_or("0");
                    flags_value(flags, &[NAMESPACE_FLAGS, CLONE_FLAGS]).map(|f| vec![f])
                }
                "mount" => {
                    let flags = split_args(&call.args).get(3).cloned().unwrap_or_default();
                    flags_value(&flags, &[MOUNT_FLAGS]).map(|f| vec![0, 0, 0, f])
                }
                name if MOUNT_API.iter().any(|(n, ..)| *n == name) => {
                    let (index, _) = mount_api_flags(name);
                    let flags = split_args(&call.args).get(index).cloned().unwrap_or_default();
                    flags_value(&flags, &[MOUNT_API_FLAGS]).map(|f| args_with(index, f))
                }
                _ => Ok(vec![]),
            };
            match args {
                Err(e) => problems.push(format!("{label}: {}({}): {e}", call.name, call.args)),
                Ok(args) => {
                    let verdict = ours.verdict(&container, &call.name, &args);
                    // A call that already failed on this host (a probe of a feature) may be refused as well.
                    if verdict != Verdict::Allow && !call.failed {
                        problems.push(format!("{label}: {}({}) gets {verdict:?}", call.name, call.args));
                    }
                }
            }
        }
    }
    let listed: BTreeSet<String> = HELPER_CALLS.iter().map(|c| c.to_string()).collect();
    let new: Vec<&String> = seen.difference(&listed).collect();
    if !new.is_empty() {
        eprintln!("the helper now also calls {new:?} (all allowed); HELPER_CALLS could list them");
    }
    assert_none(problems, "calls the real helper makes that the profile refuses");
}

/// A `--run` request (length-prefixed JSON on standard input, as `minibot-sandbox` reads it): `/bin/true` in
/// namespaces, with a capped temp folder, so every mount the helper makes happens.
fn request(work: &Path) -> Vec<u8> {
    let work = work.to_string_lossy();
    let json = serde_json::json!({
        "policy": {
            "read_write": [work],
            "hidden": [],
            "network": false,
            "namespaces": true,
            "limits": null,
            "temp": {"path": work, "bytes": 1_048_576},
        },
        "argv": ["/bin/true"],
        "env": [["PATH", "/usr/bin:/bin"]],
        "cwd": work,
    });
    let bytes = serde_json::to_vec(&json).expect("JSON");
    let mut out = u32::try_from(bytes.len()).expect("a small request").to_le_bytes().to_vec();
    out.extend(bytes);
    out
}

struct Call {
    name: String,
    args: String,
    failed: bool,
}

/// The calls of the helper's processes in an `strace -f` log, up to the command's exec. The helper, its pid 1
/// and the command's process all exist before the command execs, and whatever appears after that is the
/// command's: the pids a clone returns cannot tell, as inside the pid namespace they are the namespace's.
fn helper_calls(trace: &str) -> Vec<Call> {
    let mut root = None;
    let mut seen = BTreeSet::new();
    let mut command = BTreeSet::new();
    let mut command_started = false;
    let mut unfinished: BTreeMap<String, String> = BTreeMap::new();
    let mut out = vec![];
    for line in trace.lines() {
        let Some((pid, rest)) = line.split_once(char::is_whitespace) else { continue };
        let pid = pid.to_string();
        let root = root.get_or_insert_with(|| pid.clone()).clone();
        if seen.insert(pid.clone()) && command_started {
            command.insert(pid.clone());
        }
        if command.contains(&pid) {
            continue;
        }
        let rest = rest.trim_start();
        let (name, body) = if let Some(resumed) = rest.strip_prefix("<... ") {
            let Some((name, tail)) = resumed.split_once(" resumed>") else { continue };
            let start = unfinished.remove(&pid).unwrap_or_default();
            let start = start.split_once('(').map_or("", |(_, args)| args).to_string();
            (name.to_string(), format!("{start}{tail}"))
        } else if let Some((name, tail)) = rest.split_once('(') {
            if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                continue;
            }
            if let Some(start) = tail.strip_suffix(" <unfinished ...>") {
                unfinished.insert(pid, format!("{name}({start}"));
                continue;
            }
            (name.to_string(), tail.to_string())
        } else {
            continue;
        };
        // strace pads a short line's `= result` to a column: `<... mount resumed>)      = 0`.
        let (args, result) = match body.rsplit_once(" = ") {
            Some((args, result)) => (args.trim_end().strip_suffix(')').unwrap_or(args), result),
            None => (body.as_str(), ""),
        };
        let failed = result.trim_start().starts_with('-') || result.is_empty();
        if name == "execve" && pid != root && !failed {
            command.insert(pid);
            command_started = true;
        }
        out.push(Call { name, args: args.to_string(), failed });
    }
    // Calls a helper process was still in when it ended (its exit, a wait cut short by a kill).
    for (pid, start) in unfinished {
        if let Some((name, args)) = start.split_once('(')
            && !command.contains(&pid)
        {
            out.push(Call { name: name.to_string(), args: args.to_string(), failed: false });
        }
    }
    out
}

/// A call strace shows in two parts, and short lines padded to a column, read as one call with its result.
#[test]
fn strace_logs_are_read_call_by_call() {
    let trace = "10 unshare(CLONE_NEWNS|CLONE_NEWUSER) = 0\n\
                 11 mount_setattr(AT_FDCWD, \"/\", AT_RECURSIVE, {attr_set=MOUNT_ATTR_RDONLY}, 32 <unfinished ...>\n\
                 10 <... clone resumed>, child_tidptr=0x7f661a852f50) = 11\n\
                 11 <... mount_setattr resumed>)      = 0\n\
                 11 open_tree(AT_FDCWD, \"/x\", OPEN_TREE_CLONE) = -1 EPERM (Operation not permitted)\n";
    let calls = helper_calls(trace);
    let shown: Vec<(&str, &str, bool)> = calls.iter().map(|c| (c.name.as_str(), c.args.as_str(), c.failed)).collect();
    assert_eq!(
        shown,
        [
            ("unshare", "CLONE_NEWNS|CLONE_NEWUSER", false),
            ("clone", ", child_tidptr=0x7f661a852f50", false),
            ("mount_setattr", "AT_FDCWD, \"/\", AT_RECURSIVE, {attr_set=MOUNT_ATTR_RDONLY}, 32", false),
            ("open_tree", "AT_FDCWD, \"/x\", OPEN_TREE_CLONE", true),
        ]
    );
}

/// strace's argument list split at top-level commas (not inside quotes, brackets or braces).
fn split_args(args: &str) -> Vec<String> {
    let mut out = vec![];
    let mut current = String::new();
    let (mut depth, mut quoted, mut escaped) = (0_i32, false, false);
    for c in args.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '[' | '{' | '(' if !quoted => depth += 1,
            ']' | '}' | ')' if !quoted => depth -= 1,
            ',' if !quoted && depth == 0 => {
                out.push(current.trim().to_string());
                current.clear();
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    out.push(current.trim().to_string());
    out
}

/// The calls a source text makes through `libc::syscall(libc::SYS_name, …)`: each name, with the call's
/// arguments as written (the first is the call's number).
fn raw_syscalls(text: &str) -> Vec<(String, Vec<String>)> {
    let mut out = vec![];
    for (at, found) in text.match_indices("syscall(") {
        let rest = &text[at + found.len()..];
        let Some(name) = rest.trim_start().strip_prefix("libc::SYS_") else { continue };
        let name: String = name.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        // The arguments up to the parenthesis that closes the call.
        let mut depth = 0_i32;
        let mut quoted = false;
        let end = rest.char_indices().find_map(|(i, c)| {
            match c {
                '"' => quoted = !quoted,
                '(' if !quoted => depth += 1,
                ')' if !quoted && depth == 0 => return Some(i),
                ')' if !quoted => depth -= 1,
                _ => {}
            }
            None
        });
        let inner = &rest[..end.unwrap_or(rest.len())];
        let args = split_args(inner).into_iter().filter(|a| !a.is_empty()).collect();
        out.push((name, args));
    }
    out
}

/// A flags argument as the helper's source writes it (`A | libc::B as libc::c_uint | 0x10`), by the names of
/// [`MOUNT_API_FLAGS`].
fn source_flags(expression: &str) -> Result<u64, String> {
    let mut value = 0;
    for word in expression.split('|') {
        let word = word.split_once(" as ").map_or(word, |(w, _)| w).trim();
        let word = word.strip_prefix("libc::").unwrap_or(word);
        let number = word.strip_prefix("0x").map_or_else(|| word.parse().ok(), |h| u64::from_str_radix(h, 16).ok());
        value |=
            flag(MOUNT_API_FLAGS, word).or(number).ok_or_else(|| format!("a flag this check does not know: {word}"))?;
    }
    Ok(value)
}

/// `const NAME: type = value;` integer constants in a source text.
fn constants(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim_start().trim_start_matches("pub ");
            let (name, rest) = line.strip_prefix("const ")?.split_once(':')?;
            let value = rest.split_once('=')?.1.trim().strip_suffix(';')?.trim().replace('_', "");
            let value =
                value.strip_prefix("0x").map_or_else(|| value.parse().ok(), |h| u64::from_str_radix(h, 16).ok())?;
            Some((name.trim().to_string(), value))
        })
        .collect()
}

/// `Prefix::NAME` tokens in a source text, without the prefix.
fn tokens(text: &str, prefix: &str) -> Vec<String> {
    text.match_indices(prefix)
        .map(|(at, _)| {
            text[at + prefix.len()..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect()
        })
        .collect()
}

fn sandbox_sources(root: &Path) -> Vec<(PathBuf, String)> {
    let dir = root.join("shared/sandbox/src");
    let mut out = vec![];
    let mut stack = vec![dir];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs")
                && let Ok(text) = std::fs::read_to_string(&path)
            {
                out.push((path, text));
            }
        }
    }
    out.sort();
    out
}

/// The `minibot-sandbox` built next to this test's own binary (target/<profile>/deps/… → target/<profile>/).
fn sandbox_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    exe.parent().and_then(Path::parent).map(|p| p.join("minibot-sandbox")).unwrap_or_default()
}

fn on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join(program)).find(|f| f.is_file()))
        .unwrap_or_default()
}
