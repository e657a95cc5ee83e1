//! Logs go as logfmt lines to `logs/minibot.log` (next to the config file) and, with `--verbose`, to stderr.
//! `RUST_LOG` wins over `[runtime].log_level` / `[logging].log_level`. Both outputs pass through a redactor
//! ([`Config::redactor`]) of the vault's values and every configured credential, so no known secret value is
//! ever written to either. The stderr copy also loses its control characters ([`TerminalSafe`]): log values
//! quote what the model and tools said, and stderr is the user's terminal.
//!
//! The log file is private (the folder 0700 when made here, the files 0600, whatever the umask) and turns over
//! by size ([`RotatingFile`]): before a write would take it past `[logging] max_file_bytes` it becomes
//! `minibot.log.1`, the older copies move up one and the oldest beyond `backup_count` goes, so a chatty MCP
//! server cannot fill the disk.

use crate::terminal_text::TerminalSafe;
use anyhow::Context;
use minibot_config::Config;
use minibot_sqlite::private_fs;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The log file's name in the log folder.
pub const LOG_FILE: &str = "minibot.log";

pub fn init(config: &Config, verbose: bool) -> anyhow::Result<()> {
    let level = config.runtime.log_level.clone().unwrap_or_else(|| config.logging.log_level.clone());
    let default_directive = match level.to_ascii_lowercase().as_str() {
        "critical" | "error" => "error",
        "warning" | "warn" => "warn",
        "debug" => "debug",
        "trace" => "trace",
        _ => "info",
    };
    let filter = || {
        EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| EnvFilter::new(format!("{default_directive},sqlx=warn,hyper=warn,reqwest=warn")))
    };
    let dir = config.log_dir();
    private_fs::create_dir_all(&dir).with_context(|| format!("cannot create log folder {}", dir.display()))?;
    let path = dir.join(LOG_FILE);
    let (file, tightened) =
        RotatingFile::open(&path, config.logging.max_file_bytes.bytes(), config.logging.backup_count)
            .with_context(|| format!("cannot open log file {}", path.display()))?;
    let redactor = config.redactor();
    // Each event is formatted whole and written with one append, so lines of concurrent events never mix.
    let file = Arc::new(file);
    let file_writer = {
        let redactor = redactor.clone();
        move || redactor.writer(LogWriter(Arc::clone(&file)))
    };
    let file_layer = tracing_subscriber::fmt::layer()
        .event_format(tracing_logfmt::EventsFormatter::default())
        .fmt_fields(tracing_logfmt::FieldsFormatter::default())
        .with_writer(file_writer)
        .with_filter(filter());
    let stderr_layer = verbose.then(|| {
        tracing_subscriber::fmt::layer()
            .event_format(tracing_logfmt::EventsFormatter::default())
            .fmt_fields(tracing_logfmt::FieldsFormatter::default())
            .with_writer(move || redactor.writer(TerminalSafe(std::io::stderr())))
            .with_filter(filter())
    });
    tracing_subscriber::registry().with(file_layer).with(stderr_layer).try_init().ok();
    for (path, old) in tightened {
        tracing::info!(
            path = %path.display(),
            old_mode = format!("{old:o}"),
            new_mode = format!("{:o}", private_fs::private_mode(old)),
            "made a log file private: the group and others could read it"
        );
    }
    Ok(())
}

/// A log file that turns over by size, shared by every process that writes it: the orchestrator and the local
/// workers it starts (`minibot worker`) append to the same `minibot.log`. Before each write the name is looked
/// up again (one `stat`): when another process has turned the file over meanwhile, this one reopens the new
/// file instead of writing on into `minibot.log.1`. The process whose write would pass `max_bytes` turns it
/// over under an exclusive lock on the full file, so two processes never shift the copies twice; one that
/// waited on the lock finds a new file at the name and only reopens.
///
/// The live file holds at most `max_bytes` (a single event larger than that goes alone into a fresh file), so
/// the log takes at most about `(keep + 1) × max_bytes`. New files are created 0600 and renames keep the mode.
pub struct RotatingFile {
    path: PathBuf,
    max_bytes: u64,
    keep: u32,
    current: Mutex<Current>,
    /// Whether a failure to turn the file over was reported (once, on stderr: the log is what failed).
    warned: AtomicBool,
}

/// The open file and which one it is.
struct Current {
    file: File,
    id: (u64, u64),
}

impl Current {
    fn open(path: &Path) -> io::Result<Self> {
        let file = private_fs::open_append(path)?;
        let meta = file.metadata()?;
        Ok(Self { file, id: (meta.dev(), meta.ino()) })
    }
}

impl RotatingFile {
    /// Opens (creating 0600) the log at `path`. Existing logs and copies the group or others could read are
    /// made private (returned with their old mode, to be logged once logging runs); copies numbered beyond
    /// `keep` (left by a larger `backup_count`) are removed.
    pub fn open(path: &Path, max_bytes: u64, keep: u32) -> io::Result<(Self, Vec<(PathBuf, u32)>)> {
        let current = Current::open(path)?;
        let mut tightened = Vec::new();
        // Best effort from here on: the orchestrator and its local workers start together and may race to
        // these files, and a copy that cannot be tidied is no reason not to log.
        if let Ok(Some(old)) = private_fs::tighten_open(&current.file) {
            tightened.push((path.to_path_buf(), old));
        }
        let rotating = Self {
            path: path.to_path_buf(),
            max_bytes: max_bytes.max(1),
            keep,
            current: Mutex::new(current),
            warned: AtomicBool::new(false),
        };
        for (number, copy) in rotating.copies().unwrap_or_default() {
            if number > keep {
                let _ = std::fs::remove_file(&copy);
            } else if let Ok(Some(old)) = private_fs::tighten(&copy) {
                tightened.push((copy, old));
            }
        }
        Ok((rotating, tightened))
    }

    /// The turned-over copies present (`minibot.log.<n>`), by number.
    fn copies(&self) -> io::Result<Vec<(u32, PathBuf)>> {
        let (Some(dir), Some(name)) = (self.path.parent(), self.path.file_name()) else {
            return Ok(Vec::new());
        };
        let prefix = format!("{}.", name.to_string_lossy());
        let mut copies = Vec::new();
        for entry in std::fs::read_dir(if dir.as_os_str().is_empty() { Path::new(".") } else { dir })? {
            let entry = entry?;
            let file_name = entry.file_name();
            let number = file_name
                .to_str()
                .and_then(|n| n.strip_prefix(&prefix))
                .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|n| n.parse::<u32>().ok());
            if let Some(number) = number.filter(|n| *n > 0) {
                copies.push((number, entry.path()));
            }
        }
        copies.sort();
        Ok(copies)
    }

    fn numbered(&self, number: u32) -> PathBuf {
        let mut name = self.path.as_os_str().to_owned();
        name.push(format!(".{number}"));
        PathBuf::from(name)
    }

    /// Appends one event, turning the file over first when the event would take it past the cap.
    fn append(&self, bytes: &[u8]) -> io::Result<()> {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        let size = self.size_at_name(&mut current)?;
        if size > 0 && size.saturating_add(bytes.len() as u64) > self.max_bytes {
            // A copy that cannot be shifted must not cost the event: it is written to the file there is.
            if let Err(error) = self.turn_over(&mut current)
                && !self.warned.swap(true, Ordering::Relaxed)
            {
                eprintln!("minibot: cannot turn the log {} over: {error}", self.path.display());
            }
        }
        current.file.write_all(bytes)
    }

    /// The size of the file at the log's name, after making `current` that file: another process may have
    /// turned it over, or someone removed it.
    fn size_at_name(&self, current: &mut Current) -> io::Result<u64> {
        match std::fs::metadata(&self.path) {
            Ok(meta) if (meta.dev(), meta.ino()) == current.id => Ok(meta.len()),
            _ => {
                *current = Current::open(&self.path)?;
                Ok(current.file.metadata()?.len())
            }
        }
    }

    /// Shifts the copies up one (the oldest beyond `keep` is replaced), renames the log to `.1` and opens a
    /// new one, unless another process did so while this one waited for the lock.
    fn turn_over(&self, current: &mut Current) -> io::Result<()> {
        current.file.lock()?;
        let still_this_file =
            matches!(std::fs::metadata(&self.path), Ok(meta) if (meta.dev(), meta.ino()) == current.id);
        let shifted = if still_this_file { self.shift() } else { Ok(()) };
        let _ = current.file.unlock();
        shifted?;
        *current = Current::open(&self.path)?;
        Ok(())
    }

    fn shift(&self) -> io::Result<()> {
        if self.keep == 0 {
            return std::fs::remove_file(&self.path);
        }
        // Only as far as the first gap: the copies above it stay where they are.
        let top = (1..self.keep).find(|n| !self.numbered(*n).exists()).unwrap_or(self.keep);
        for number in (1..top).rev() {
            std::fs::rename(self.numbered(number), self.numbered(number + 1))?;
        }
        std::fs::rename(&self.path, self.numbered(1))
    }
}

/// What the formatter writes each event through.
struct LogWriter(Arc<RotatingFile>);

impl Write for LogWriter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        // Whole, so an event is never split between two files.
        self.0.append(bytes)?;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> String {
        format!("{:o}", std::fs::metadata(path).unwrap().permissions().mode() & 0o7777)
    }

    fn line(n: usize) -> Vec<u8> {
        format!("{n:09} {}\n", "x".repeat(89)).into_bytes()
    }

    /// The log and its copies present in `dir`, with their sizes.
    fn files(dir: &Path) -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap())
            .map(|e| (e.file_name().to_string_lossy().into_owned(), e.metadata().unwrap().len()))
            .collect();
        out.sort();
        out
    }

    #[test]
    fn turns_over_by_size_and_keeps_the_newest_copies() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOG_FILE);
        let (log, tightened) = RotatingFile::open(&path, 1_000, 3).unwrap();
        assert!(tightened.is_empty());
        // 100 lines of 100 bytes: 100 kB through a 1 kB cap.
        for n in 0..100 {
            log.append(&line(n)).unwrap();
        }
        let present = files(dir.path());
        let names: Vec<&str> = present.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["minibot.log", "minibot.log.1", "minibot.log.2", "minibot.log.3"]);
        assert!(present.iter().all(|(_, size)| *size <= 1_000), "{present:?}");
        assert!(present.iter().map(|(_, s)| s).sum::<u64>() <= 4_000, "{present:?}");
        for (name, _) in &present {
            assert_eq!(mode(&dir.path().join(name)), "600", "{name}");
        }
        // The newest lines are in the live file, the ones before them in .1, and nothing is cut in two.
        let live = std::fs::read_to_string(&path).unwrap();
        assert!(live.ends_with(&String::from_utf8(line(99)).unwrap()), "{live}");
        let previous = std::fs::read_to_string(dir.path().join("minibot.log.1")).unwrap();
        assert!(previous.lines().all(|l| l.len() == 99), "{previous}");
        let first_live: usize = live[..9].parse().unwrap();
        let last_previous: usize = previous.lines().last().unwrap()[..9].parse().unwrap();
        assert_eq!(last_previous + 1, first_live);
    }

    #[test]
    fn two_writers_of_one_file_share_the_turning_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOG_FILE);
        let (first, _) = RotatingFile::open(&path, 1_000, 2).unwrap();
        let (second, _) = RotatingFile::open(&path, 1_000, 2).unwrap();
        for n in 0..60 {
            let writer = if n % 3 == 0 { &first } else { &second };
            writer.append(&line(n)).unwrap();
        }
        let present = files(dir.path());
        let names: Vec<&str> = present.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["minibot.log", "minibot.log.1", "minibot.log.2"]);
        assert!(present.iter().all(|(_, size)| *size <= 1_000), "no writer went on in a turned-over copy: {present:?}");
        let all: String = ["minibot.log.2", "minibot.log.1", "minibot.log"]
            .iter()
            .map(|n| std::fs::read_to_string(dir.path().join(n)).unwrap())
            .collect();
        let numbers: Vec<usize> = all.lines().map(|l| l[..9].parse().unwrap()).collect();
        assert!(numbers.windows(2).all(|w| w[0] + 1 == w[1]), "in order, none lost in the kept files: {numbers:?}");
        assert_eq!(numbers.last(), Some(&59));
    }

    #[test]
    fn concurrent_writers_stay_bounded_and_lines_stay_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOG_FILE);
        // Separate opens lock separately (as separate processes do), and each has its own view of the file.
        let writers: Vec<Arc<RotatingFile>> =
            (0..4).map(|_| Arc::new(RotatingFile::open(&path, 2_000, 3).unwrap().0)).collect();
        let threads: Vec<_> = writers
            .iter()
            .enumerate()
            .map(|(w, writer)| {
                let writer = Arc::clone(writer);
                std::thread::spawn(move || {
                    for n in 0..500 {
                        writer.append(&line(w * 1_000 + n)).unwrap();
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        let present = files(dir.path());
        let names: Vec<&str> = present.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["minibot.log", "minibot.log.1", "minibot.log.2", "minibot.log.3"]);
        // Each writer checks the size before its write, so the others' lines can land in between: at most one
        // line per other writer over the cap.
        assert!(present.iter().all(|(_, size)| *size <= 2_000 + 3 * 100), "{present:?}");
        for (name, _) in &present {
            let text = std::fs::read_to_string(dir.path().join(name)).unwrap();
            assert!(text.lines().all(|l| l.len() == 99), "a line was split in {name}");
        }
    }

    #[test]
    fn old_open_logs_are_made_private_and_extra_copies_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOG_FILE);
        for name in ["minibot.log", "minibot.log.1", "minibot.log.2", "minibot.log.7", "minibot.log.x", "other.log"] {
            std::fs::write(dir.path().join(name), b"old\n").unwrap();
            std::fs::set_permissions(dir.path().join(name), std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        let (_log, tightened) = RotatingFile::open(&path, 1_000, 2).unwrap();
        let mut changed: Vec<String> =
            tightened.iter().map(|(p, old)| format!("{} {old:o}", p.file_name().unwrap().to_string_lossy())).collect();
        changed.sort();
        assert_eq!(changed, ["minibot.log 644", "minibot.log.1 644", "minibot.log.2 644"]);
        for name in ["minibot.log", "minibot.log.1", "minibot.log.2"] {
            assert_eq!(mode(&dir.path().join(name)), "600", "{name}");
        }
        assert!(!dir.path().join("minibot.log.7").exists(), "a copy beyond backup_count goes");
        assert_eq!(mode(&dir.path().join("other.log")), "644", "not ours to change");
        assert_eq!(mode(&dir.path().join("minibot.log.x")), "644", "not a numbered copy");
    }

    #[test]
    fn no_copies_kept_means_the_log_starts_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOG_FILE);
        let (log, _) = RotatingFile::open(&path, 500, 0).unwrap();
        for n in 0..20 {
            log.append(&line(n)).unwrap();
        }
        let present = files(dir.path());
        assert_eq!(present.len(), 1, "{present:?}");
        assert!(present[0].1 <= 500);
    }

    #[test]
    fn a_removed_log_is_made_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOG_FILE);
        let (log, _) = RotatingFile::open(&path, 10_000, 1).unwrap();
        log.append(b"one\n").unwrap();
        std::fs::remove_file(&path).unwrap();
        log.append(b"two\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two\n");
        assert_eq!(mode(&path), "600");
    }
}
