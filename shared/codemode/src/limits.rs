//! The script process's own limits, set before the script starts.
//!
//! - Address space (`RLIMIT_AS`): what the process maps when armed, plus twice `max_memory_mb` (a final value is
//!   converted and written out once more after the script ends) plus [`ALLOWANCE`]. An allocation past it fails,
//!   and Rust's allocation failure aborts the process with "memory allocation of N bytes failed" on stderr: the
//!   parent reports that as `codemode:memory_limit`. This is what holds a single interpreter step that expands a
//!   value far beyond the limit (`repr` of a list holding one large string many times over).
//! - `max_memory_mb` itself, between steps: Monty compares the live memory it is given (`LIVE_MEMORY`, here the
//!   process's resident size above what it was when armed, sampled every [`SAMPLE_EVERY`]) against the limit at
//!   its checkpoints, so memory grown step by step ends the script with its output kept.
//! - CPU time (`RLIMIT_CPU`): the script's budget plus [`CPU_SPARE`], a backstop for a child whose parent died;
//!   the parent kills it at the time limit in any case.
//! - No core dump (`RLIMIT_CORE` 0): an aborted script would otherwise leave hundreds of MiB behind.

#![expect(unsafe_code, reason = "setrlimit, mallopt, sysconf and prctl are C calls with no safe wrapper in libc")]

use monty_types::{BASELINE_MEMORY, LIVE_MEMORY};
use std::io::Read;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Address space beyond the mapped start and twice the memory limit: the interpreter's own growth, the stacks.
pub const ALLOWANCE: u64 = 64 * 1024 * 1024;
/// CPU seconds past the script's budget before the kernel ends the process.
const CPU_SPARE: u64 = 5;
const SAMPLE_EVERY: Duration = Duration::from_millis(5);

/// The script process dies with the process that started it, so a daemon killed with SIGKILL leaves no script
/// running on. `parent` is the pid the starter gave: when it already died before the signal was asked for, the
/// process ends at once (comparing with 1 instead would fail a daemon that is itself pid 1 in a container).
pub fn die_with_parent(parent: Option<u32>) {
    // SAFETY: prctl with PR_SET_PDEATHSIG takes a signal number and no pointers; getppid has no arguments.
    let now = unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);
        libc::getppid()
    };
    if parent.is_some_and(|parent| u32::try_from(now).ok() != Some(parent)) {
        std::process::exit(0);
    }
}

/// Keeps every thread on glibc's main malloc arena: each extra arena reserves 64 MiB of address space, which would
/// count against the cap without holding anything. Call before any thread starts.
pub fn one_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a tuning parameter of glibc's allocator; no thread allocates concurrently yet.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Sets the limits described in the module docs for a script of `max_memory` bytes and `budget`.
pub fn arm(max_memory: usize, budget: Duration) -> std::io::Result<()> {
    start_sampling()?;
    let mapped = statm(0).unwrap_or(0);
    let memory = u64::try_from(max_memory).unwrap_or(u64::MAX);
    let address_space = mapped.saturating_add(memory.saturating_mul(2)).saturating_add(ALLOWANCE);
    set(libc::RLIMIT_CORE, 0, 0)?;
    let cpu = budget.as_secs().saturating_add(CPU_SPARE);
    // The soft limit sends SIGXCPU, the hard one SIGKILL a second later.
    set(libc::RLIMIT_CPU, cpu, cpu.saturating_add(1))?;
    set(libc::RLIMIT_AS, address_space, address_space)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
type Resource = libc::__rlimit_resource_t;
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
type Resource = libc::c_int;

fn set(resource: Resource, soft: u64, hard: u64) -> std::io::Result<()> {
    let limit = libc::rlimit { rlim_cur: soft, rlim_max: hard };
    // SAFETY: `limit` is a valid rlimit that lives across the call.
    if unsafe { libc::setrlimit(resource, &raw const limit) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Publishes the resident size above today's as Monty's live memory, from a small thread, for the rest of the
/// process's life.
fn start_sampling() -> std::io::Result<()> {
    let baseline = statm(1).unwrap_or(0);
    BASELINE_MEMORY.store(usize::try_from(baseline).unwrap_or(usize::MAX), Ordering::Relaxed);
    LIVE_MEMORY.store(usize::try_from(baseline).unwrap_or(usize::MAX), Ordering::Relaxed);
    std::thread::Builder::new().name("codemode-memory".into()).stack_size(64 * 1024).spawn(|| {
        loop {
            std::thread::sleep(SAMPLE_EVERY);
            if let Some(resident) = statm(1) {
                LIVE_MEMORY.store(usize::try_from(resident).unwrap_or(usize::MAX), Ordering::Relaxed);
            }
        }
    })?;
    Ok(())
}

/// Field `index` of `/proc/self/statm` (0: size of the mappings, 1: resident), in bytes. Reads into a buffer on
/// the stack: the sampler must not allocate while the script may be at its cap.
fn statm(index: usize) -> Option<u64> {
    let mut buffer = [0u8; 256];
    let mut file = std::fs::File::open("/proc/self/statm").ok()?;
    let read = file.read(&mut buffer).ok()?;
    let text = std::str::from_utf8(&buffer[..read]).ok()?;
    let pages: u64 = text.split_ascii_whitespace().nth(index)?.parse().ok()?;
    Some(pages.saturating_mul(page_size()))
}

fn page_size() -> u64 {
    // SAFETY: sysconf only reads a system constant.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).unwrap_or(4096)
}
