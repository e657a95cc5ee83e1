//! System calls the command never needs and a hostile one would use to get out: new namespaces (which would
//! give it the rights to mount over its view), mounts, ptrace and reading other processes' memory, kernel
//! keyrings and modules, BPF, io_uring (whose requests seccomp cannot see), file handles (a classic container
//! escape), the terminal ioctls that push input into a terminal (`TIOCSTI`, `TIOCLINUX`) or take the console.
//!
//! Sockets: Landlock cannot refuse `connect` to a named Unix socket on this code's kernels, and a named
//! socket anywhere the command can read (the user's tmux server, `docker.sock`, D-Bus, an SSH agent) leads
//! out of the sandbox; seccomp cannot read the address a call names. So no Unix socket is made with
//! `socket` at all, with network on or off, and `socketpair` makes no datagram pair (whose `sendto` could name
//! an address). Stream and seqpacket pairs (pipes between a program's own processes) still work. With network
//! on, only IPv4, IPv6 and netlink (the C library's address lookup) sockets are allowed; without it, none.
//! `clone3` answers ENOSYS: its flags sit in memory seccomp cannot read, and the C library then falls back to
//! `clone`, whose flags it can.

use crate::SandboxError;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    TargetArch, apply_filter,
};
use std::collections::BTreeMap;

const DENIED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_userfaultfd,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_fsopen,
    libc::SYS_fsmount,
    libc::SYS_fsconfig,
    libc::SYS_fspick,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_mount_setattr,
    libc::SYS_quotactl,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_syslog,
    libc::SYS_acct,
    libc::SYS_chroot,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    SYS_FILE_GETATTR,
    SYS_FILE_SETATTR,
    SYS_OPEN_TREE_ATTR,
    libc::SYS_fanotify_init,
    libc::SYS_quotactl_fd,
];

/// `file_getattr` and `file_setattr` (Linux 6.17; one number on every architecture): inode flags and project
/// ids by path, which Landlock does not see (a hidden database made immutable).
const SYS_FILE_GETATTR: libc::c_long = 468;
const SYS_FILE_SETATTR: libc::c_long = 469;
/// `open_tree_attr` (Linux 6.15): a clone of a mount with its read-only flag cleared.
const SYS_OPEN_TREE_ATTR: libc::c_long = 467;
/// `setxattrat` and `removexattrat` (Linux 6.13).
const SYS_SETXATTRAT: libc::c_long = 463;
const SYS_REMOVEXATTRAT: libc::c_long = 466;
/// The newest system call this filter was written against: anything above answers ENOSYS, so a call the kernel
/// adds later (another way to do what is refused here) is refused until it has been looked at, and programs fall
/// back to the older call, which is checked.
const LAST_KNOWN_SYSCALL: u32 = 470;

/// Calls answered ENOSYS, so that programs fall back to what can be bounded: `memfd_create` (memory no
/// resource limit counts; programs then use a file), `openat2` (its mode sits in memory seccomp cannot read).
/// `fallocate` (disk space in one call, faster than the disk bound is measured) answers EOPNOTSUPP, on which
/// the C library's `posix_fallocate` writes the blocks instead.
const FALLBACK: &[libc::c_long] = &[libc::SYS_memfd_create, libc::SYS_openat2];

/// System V IPC: shared memory no resource limit counts; refused in every mode.
const SYSV_IPC: &[libc::c_long] = &[
    libc::SYS_shmget,
    libc::SYS_shmat,
    libc::SYS_shmctl,
    libc::SYS_msgget,
    libc::SYS_msgsnd,
    libc::SYS_msgrcv,
    libc::SYS_msgctl,
    libc::SYS_semget,
    libc::SYS_semop,
    libc::SYS_semtimedop,
    libc::SYS_semctl,
];

/// Calls that set a file's mode, with the index of the mode argument: refused when it asks for the setuid or
/// setgid bit, which would let any local user run what the command wrote as the assistant's user (or root).
const MODE_SETTERS: &[(libc::c_long, u8)] = &[
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_open, 2),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_creat, 1),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_chmod, 1),
    #[cfg(target_arch = "x86_64")]
    (libc::SYS_mknod, 1),
    (libc::SYS_openat, 3),
    (libc::SYS_fchmod, 1),
    (libc::SYS_fchmodat, 2),
    (libc::SYS_fchmodat2, 2),
    (libc::SYS_mknodat, 2),
];
const SET_ID_BITS: &[u64] = &[0o4000, 0o2000];

const NAMESPACE_FLAGS: &[i32] = &[
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWNS,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWCGROUP,
];

fn arch() -> Result<TargetArch, SandboxError> {
    TargetArch::try_from(std::env::consts::ARCH).map_err(|e| SandboxError::Seccomp(e.to_string()))
}

fn compile(rules: BTreeMap<i64, Vec<SeccompRule>>, action: SeccompAction) -> Result<BpfProgram, SandboxError> {
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, action, arch()?)
        .map_err(|e| SandboxError::Seccomp(e.to_string()))?;
    filter.try_into().map_err(|e: seccompiler::BackendError| SandboxError::Seccomp(e.to_string()))
}

fn compare(len: SeccompCmpArgLen, arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, SandboxError> {
    SeccompCondition::new(arg, len, op, value).map_err(|e| SandboxError::Seccomp(e.to_string()))
}

/// A condition on a `long` argument (clone's flags).
fn condition(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, SandboxError> {
    compare(SeccompCmpArgLen::Qword, arg, op, value)
}

/// A condition on an `int` argument: the kernel reads only its low 32 bits, so the upper ones must not let a
/// value slip past a 64-bit comparison.
fn int_condition(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, SandboxError> {
    compare(SeccompCmpArgLen::Dword, arg, op, value)
}

/// ioctls refused: push a character into a terminal's input (`TIOCSTI`), the console's selection and paste
/// (`TIOCLINUX`), redirect the console (`TIOCCONS`); set inode flags (`FS_IOC_SETFLAGS` and its 32-bit form,
/// `FS_IOC_FSSETXATTR`: immutable, append-only), which Landlock does not see.
const REFUSED_IOCTLS: &[u64] = &[0x5412, 0x541C, 0x541D, 0x4008_6602, 0x4004_6602, 0x401C_5820];

/// Socket types `socketpair` may make: stream and seqpacket, whose sends never name an address. A datagram
/// pair (`SOCK_DGRAM`, or `SOCK_RAW`, which the kernel makes a datagram pair) could `sendto` any named socket.
const PAIR_TYPES: &[u64] = &[1, 5];

/// Without namespaces, the calls that reach other processes of the user by pid (Landlock scopes only signals
/// and abstract sockets): resource limits, priorities, CPU affinity and scheduling; refused unless they name
/// the caller itself (pid 0) — argument index of the pid.
const OTHERS_BY_PID: &[(libc::c_long, u8)] = &[
    (libc::SYS_prlimit64, 0),
    (libc::SYS_setpriority, 1),
    (libc::SYS_ioprio_set, 1),
    (libc::SYS_sched_setaffinity, 0),
    (libc::SYS_sched_setscheduler, 0),
    (libc::SYS_sched_setparam, 0),
    (libc::SYS_sched_setattr, 0),
];

/// Without namespaces (no read-only mounts) or an IPC namespace of its own: changes to files' modes, owners,
/// extended attributes and times, which Landlock does not see (a config made world-readable), and the host's
/// POSIX message queues.
const REFUSED_WITHOUT_NAMESPACES: &[libc::c_long] = &[
    #[cfg(target_arch = "x86_64")]
    libc::SYS_chmod,
    libc::SYS_fchmod,
    libc::SYS_fchmodat,
    libc::SYS_fchmodat2,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_chown,
    libc::SYS_fchown,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_lchown,
    libc::SYS_fchownat,
    libc::SYS_setxattr,
    libc::SYS_lsetxattr,
    libc::SYS_fsetxattr,
    libc::SYS_removexattr,
    libc::SYS_lremovexattr,
    libc::SYS_fremovexattr,
    SYS_SETXATTRAT,
    SYS_REMOVEXATTRAT,
    libc::SYS_utimensat,
    libc::SYS_futimesat,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_utimes,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_utime,
    libc::SYS_mq_open,
    libc::SYS_mq_unlink,
];

/// Socket families allowed with network on.
const NETWORK_FAMILIES: &[i32] = &[libc::AF_INET, libc::AF_INET6, libc::AF_NETLINK];

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, SandboxError> {
    SeccompRule::new(conditions).map_err(|e| SandboxError::Seccomp(e.to_string()))
}

/// The filters, in the order they are installed. Needs `no_new_privs` (Landlock set it). `namespaces`: the
/// command runs in the helper's namespaces (read-only mounts, its own IPC and pids).
fn programs(network: bool, namespaces: bool) -> Result<Vec<BpfProgram>, SandboxError> {
    let mut denied: BTreeMap<i64, Vec<SeccompRule>> = DENIED.iter().map(|nr| (*nr, Vec::new())).collect();
    if !namespaces {
        for nr in REFUSED_WITHOUT_NAMESPACES {
            denied.insert(*nr, Vec::new());
        }
        for (nr, arg) in OTHERS_BY_PID {
            let mut rules = vec![rule(vec![int_condition(*arg, SeccompCmpOp::Ne, 0)?])?];
            // `who` 0 means the caller only with PRIO_PROCESS (0) / IOPRIO_WHO_PROCESS (1); with a user or a
            // group it means all of the user's processes.
            let own = match *nr {
                libc::SYS_setpriority => Some(0),
                libc::SYS_ioprio_set => Some(1),
                _ => None,
            };
            if let Some(own) = own {
                rules.push(rule(vec![int_condition(0, SeccompCmpOp::Ne, own)?])?);
            }
            denied.insert(*nr, rules);
        }
    }
    for nr in SYSV_IPC {
        denied.insert(*nr, Vec::new());
    }
    for (nr, arg) in MODE_SETTERS {
        // Without namespaces chmod is refused whole (above); the rest get the set-id check.
        if denied.get(nr).is_some_and(Vec::is_empty) {
            continue;
        }
        let rules = SET_ID_BITS
            .iter()
            .map(|bit| rule(vec![int_condition(*arg, SeccompCmpOp::MaskedEq(*bit), *bit)?]))
            .collect::<Result<Vec<_>, _>>()?;
        denied.insert(*nr, rules);
    }
    let clone_rules = NAMESPACE_FLAGS
        .iter()
        .map(|flag| {
            let flag = u64::from(flag.unsigned_abs());
            rule(vec![condition(0, SeccompCmpOp::MaskedEq(flag), flag)?])
        })
        .collect::<Result<Vec<_>, _>>()?;
    denied.insert(libc::SYS_clone, clone_rules);
    let ioctls = REFUSED_IOCTLS
        .iter()
        .map(|request| rule(vec![int_condition(1, SeccompCmpOp::Eq, *request)?]))
        .collect::<Result<Vec<_>, _>>()?;
    denied.insert(libc::SYS_ioctl, ioctls);
    let mut out = vec![compile(denied, SeccompAction::Errno(libc::EPERM.unsigned_abs()))?];
    let mut fallback = BTreeMap::from([(libc::SYS_clone3, Vec::new())]);
    for nr in FALLBACK {
        fallback.insert(*nr, Vec::new());
    }
    out.push(compile(fallback, SeccompAction::Errno(libc::ENOSYS.unsigned_abs()))?);
    let fallocate = BTreeMap::from([(libc::SYS_fallocate, Vec::new())]);
    out.push(compile(fallocate, SeccompAction::Errno(libc::EOPNOTSUPP.unsigned_abs()))?);
    let families: &[i32] = if network { NETWORK_FAMILIES } else { &[] };
    let socket_rule = if families.is_empty() {
        Vec::new()
    } else {
        // Refused when the family is none of the allowed ones.
        let conditions = families
            .iter()
            .map(|family| int_condition(0, SeccompCmpOp::Ne, u64::from(family.unsigned_abs())))
            .collect::<Result<Vec<_>, _>>()?;
        vec![rule(conditions)?]
    };
    // Refused: a family other than Unix, or a type (the low four bits; SOCK_NONBLOCK and SOCK_CLOEXEC sit above
    // them) other than the allowed ones.
    let unix = u64::from(libc::AF_UNIX.unsigned_abs());
    let mut pair_rules = vec![rule(vec![int_condition(0, SeccompCmpOp::Ne, unix)?])?];
    for kind in (0..16u64).filter(|kind| !PAIR_TYPES.contains(kind)) {
        pair_rules.push(rule(vec![int_condition(1, SeccompCmpOp::MaskedEq(0xf), kind)?])?);
    }
    let sockets = BTreeMap::from([(libc::SYS_socket, socket_rule), (libc::SYS_socketpair, pair_rules)]);
    out.push(compile(sockets, SeccompAction::Errno(libc::EACCES.unsigned_abs()))?);
    Ok(out)
}

/// Numbers this filter does not know answer ENOSYS: above [`LAST_KNOWN_SYSCALL`], and on x86_64 the x32 calls
/// (bit 30 set in the number), which come under the same architecture tag and match none of the numbers here.
/// Installed first.
fn unknown_calls() -> BpfProgram {
    use seccompiler::sock_filter;
    const RET_ERRNO: u32 = 0x0005_0000;
    const RET_ALLOW: u32 = 0x7fff_0000;
    let op = |code: u16, jt: u8, jf: u8, k: u32| sock_filter { code, jt, jf, k };
    vec![
        // A = seccomp_data.nr
        op(0x20, 0, 0, 0),
        // if A > LAST_KNOWN_SYSCALL (unsigned, so x32's high numbers too): errno, else allow
        op(0x25, 0, 1, LAST_KNOWN_SYSCALL),
        op(0x06, 0, 0, RET_ERRNO | libc::ENOSYS.unsigned_abs()),
        op(0x06, 0, 0, RET_ALLOW),
    ]
}

pub fn install(network: bool, namespaces: bool) -> Result<(), SandboxError> {
    apply_filter(&unknown_calls()).map_err(|e| SandboxError::Seccomp(e.to_string()))?;
    for program in programs(network, namespaces)? {
        apply_filter(&program).map_err(|e| SandboxError::Seccomp(e.to_string()))?;
    }
    Ok(())
}

/// Whether this kernel takes seccomp filters (`Seccomp:` in /proc/self/status).
pub fn available() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| s.lines().any(|l| l.starts_with("Seccomp:")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filters_compile_for_this_machine() {
        for (network, namespaces) in [(true, true), (true, false), (false, true), (false, false)] {
            assert_eq!(programs(network, namespaces).unwrap().len(), 4);
        }
    }
}
