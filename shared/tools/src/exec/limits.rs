//! The bounds of one `contain` call: `[tools.<tool>.limits]` (on by default), tightened by
//! `[tools.<tool>.rlimit]` when that is enabled, and how a call that ran into one is told which bound and which
//! key raises it. The kernel says so itself for CPU time (SIGXCPU) and file size (SIGXFSZ), and the helper, on
//! its own status pipe, for the temp folder and the disk; for memory, processes and open files a program only
//! sees a failed call, so its own words for that failure on stderr are read, and the error says it is a guess.

use super::runner::{Rlimits, RunOutput};
use super::sandbox::SandboxSettings;
use serde_json::{Value, json};

const MIB: u64 = 1024 * 1024;

/// One bound and the key that sets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bound {
    pub what: Limit,
    /// `[tools.bash.limits] memory_mb`.
    pub key: String,
    /// In the key's unit.
    pub value: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Memory,
    AddressSpace,
    Processes,
    CpuTime,
    FileSize,
    TempSpace,
    OpenFiles,
    Disk,
    DiskFiles,
}

impl Limit {
    fn describe(self) -> &'static str {
        match self {
            Self::Memory => "memory limit",
            Self::AddressSpace => "address-space limit",
            Self::Processes => "process limit",
            Self::CpuTime => "CPU time limit",
            Self::FileSize => "file size limit",
            Self::TempSpace => "temp folder size limit",
            Self::OpenFiles => "open files limit",
            Self::Disk => "disk limit",
            Self::DiskFiles => "limit on files made",
        }
    }

    fn unit(self) -> &'static str {
        match self {
            Self::Memory | Self::AddressSpace | Self::FileSize | Self::TempSpace | Self::Disk => " MiB",
            Self::CpuTime => " s",
            Self::Processes | Self::OpenFiles | Self::DiskFiles => "",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::AddressSpace => "address_space",
            Self::Processes => "processes",
            Self::CpuTime => "cpu_time",
            Self::FileSize => "file_size",
            Self::TempSpace => "temp_space",
            Self::OpenFiles => "open_files",
            Self::Disk => "disk",
            Self::DiskFiles => "disk_files",
        }
    }
}

/// The bounds of a `contain` call as the helper applies them, and as the tool names them.
#[derive(Debug, Clone, Default)]
pub struct Bounds {
    pub limits: Rlimits,
    pub temp_bytes: Option<u64>,
    pub disk: Option<minibot_sandbox::DiskBound>,
    pub list: Vec<Bound>,
}

/// The address space a process may map, as a multiple of its memory bound: a backstop for the memory
/// `RLIMIT_DATA` does not count (shared mappings, memfd), with room for what runtimes reserve and never use.
const ADDRESS_SPACE_PER_MEMORY: u64 = 4;

impl Bounds {
    /// `namespaces`: whether the helper can mount the capped temp folder on this host.
    pub fn of(settings: &SandboxSettings, namespaces: bool) -> Self {
        let section = settings.section;
        let l = &settings.limits;
        let mut out = Self::default();
        let on = |value: u64| (value > 0).then_some(value);
        let mut set = |what: Limit, value: Option<u64>, key: &str, from: &str| {
            let value = value?;
            let bound = Bound { what, key: format!("[{section}.{from}] {key}"), value };
            // The tighter of the two sections wins.
            match out.list.iter_mut().find(|b| b.what == what) {
                Some(existing) if existing.value <= value => {}
                Some(existing) => *existing = bound,
                None => out.list.push(bound),
            }
            Some(())
        };
        set(Limit::Memory, on(l.memory_mb), "memory_mb", "limits");
        set(Limit::Processes, on(l.processes), "processes", "limits");
        set(Limit::CpuTime, on(l.cpu_seconds), "cpu_seconds", "limits");
        set(Limit::FileSize, on(l.file_size_mb), "file_size_mb", "limits");
        set(Limit::OpenFiles, on(l.open_files), "open_files", "limits");
        set(Limit::Disk, on(l.disk_mb), "disk_mb", "limits");
        set(Limit::DiskFiles, on(l.disk_files), "disk_files", "limits");
        let backstop = on(l.memory_mb).map(|mb| mb.saturating_mul(ADDRESS_SPACE_PER_MEMORY));
        set(Limit::AddressSpace, backstop, "memory_mb", "limits");
        if namespaces {
            set(Limit::TempSpace, on(l.temp_mb), "temp_mb", "limits");
        }
        if settings.rlimit.enabled {
            let r = &settings.rlimit;
            set(Limit::AddressSpace, r.memory_mb, "memory_mb", "rlimit");
            set(Limit::Processes, r.nproc, "nproc", "rlimit");
            set(Limit::CpuTime, r.cpu_seconds, "cpu_seconds", "rlimit");
            set(Limit::FileSize, r.fsize_mb, "fsize_mb", "rlimit");
            set(Limit::OpenFiles, r.nofile, "nofile", "rlimit");
        }
        let value = |what: Limit| out.list.iter().find(|b| b.what == what).map(|b| b.value);
        out.limits = Rlimits {
            cpu_seconds: value(Limit::CpuTime),
            memory_bytes: value(Limit::AddressSpace).map(|mb| mb.saturating_mul(MIB)),
            data_bytes: value(Limit::Memory).map(|mb| mb.saturating_mul(MIB)),
            fsize_bytes: value(Limit::FileSize).map(|mb| mb.saturating_mul(MIB)),
            nproc: value(Limit::Processes),
            nofile: value(Limit::OpenFiles),
        };
        out.temp_bytes = value(Limit::TempSpace).map(|mb| mb.saturating_mul(MIB));
        out.disk = match (value(Limit::Disk), value(Limit::DiskFiles)) {
            (None, None) => None,
            (bytes, files) => Some(minibot_sandbox::DiskBound {
                bytes: bytes.map_or(u64::MAX, |mb| mb.saturating_mul(MIB)),
                files: files.unwrap_or(u64::MAX),
            }),
        };
        out
    }
}

/// What a call shows of a bound it ran into: the result's `limit` object, and a line naming the bound and the
/// key that raises it; `failed` says whether the call failed (the line is its `error`) or went on (a `warning`:
/// a process of it ran into the bound, and the command carried on without it).
pub struct RanInto {
    pub limit: Value,
    pub message: String,
    pub failed: bool,
}

pub fn ran_into(bounds: &[Bound], output: &RunOutput) -> Option<RanInto> {
    if bounds.is_empty() {
        return None;
    }
    let failed = !output.success();
    let (what, sure) = which(output)?;
    let bound = match what {
        Limit::Memory => {
            bounds.iter().filter(|b| matches!(b.what, Limit::Memory | Limit::AddressSpace)).min_by_key(|b| b.value)?
        }
        _ => bounds.iter().find(|b| b.what == what)?,
    };
    let shown = format!("{}{}", bound.value, bound.what.unit());
    let error = if sure {
        format!(
            "the command ran into the sandbox's {} ({shown}); raise {} if the task needs more",
            bound.what.describe(),
            bound.key
        )
    } else {
        format!(
            "the command's errors read like it ran into the sandbox's {} ({shown}); if so, raise {} if the task \
             needs more",
            bound.what.describe(),
            bound.key
        )
    };
    let limit = json!({ "name": bound.what.name(), "value": bound.value, "key": bound.key });
    let message = if failed { error } else { format!("the call went on, but {error}") };
    Some(RanInto { limit, message, failed })
}

/// Which bound, and whether the kernel or the helper said so (rather than the command's own words).
fn which(output: &RunOutput) -> Option<(Limit, bool)> {
    const SIGXCPU: i32 = 24;
    const SIGXFSZ: i32 = 25;
    let ended_by = output.signal.or_else(|| output.exit_code.filter(|c| *c > 128).map(|c| c - 128));
    match ended_by {
        Some(SIGXCPU) => return Some((Limit::CpuTime, true)),
        Some(SIGXFSZ) => return Some((Limit::FileSize, true)),
        _ => {}
    }
    let reported = |line: &str| {
        let line = format!("{}{line}", minibot_sandbox::SETUP_FAILED_PREFIX);
        output.helper_report.lines().any(|l| l == line)
    };
    for (line, limit) in [
        (minibot_sandbox::LIMIT_TEMP, Limit::TempSpace),
        (minibot_sandbox::LIMIT_DISK, Limit::Disk),
        (minibot_sandbox::LIMIT_FILES, Limit::DiskFiles),
    ] {
        if reported(line) {
            return Some((limit, true));
        }
    }
    let err = &output.stderr;
    const MEMORY: &[&str] =
        &["MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory", "memory exhausted"];
    const PROCESSES: &[&str] = &[
        "can't start new thread",
        "fork: retry",
        "fork: Resource temporarily unavailable",
        "BlockingIOError: [Errno 11] Resource temporarily unavailable",
        "pthread_create",
    ];
    if MEMORY.iter().any(|m| err.contains(m)) {
        return Some((Limit::Memory, false));
    }
    if PROCESSES.iter().any(|m| err.contains(m)) {
        return Some((Limit::Processes, false));
    }
    if err.contains("Too many open files") {
        return Some((Limit::OpenFiles, false));
    }
    // bash's words for a child that SIGXFSZ or SIGXCPU ended.
    if err.contains("File too large") || err.contains("File size limit exceeded") {
        return Some((Limit::FileSize, false));
    }
    if err.contains("CPU time limit exceeded") {
        return Some((Limit::CpuTime, false));
    }
    None
}
