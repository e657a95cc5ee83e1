//! The report: one line per check, printed as soon as the check ends (some listen or wait for seconds), and
//! the exit code that follows from the worst line.

use crate::terminal_text::for_terminal;
use std::io::Write;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    /// Worth knowing, but nothing the user needs is broken.
    Warn,
    /// Something the user needs is broken: the exit code says so.
    Fail,
    /// Not configured, or cannot be checked because something before it failed.
    Skip,
}

impl Status {
    fn mark(self) -> char {
        match self {
            Self::Ok => '✓',
            Self::Warn => '!',
            Self::Fail => '✗',
            Self::Skip => '-',
        }
    }
}

/// Width of the topic column, so the findings line up.
const TOPIC_WIDTH: usize = 9;

pub struct Report<W: Write> {
    out: W,
    failures: usize,
    warnings: usize,
    /// The config's credentials and vault secrets, masked in every line (a URL or an error can quote one).
    redactor: Option<minibot_vault::Redactor>,
}

impl<W: Write> Report<W> {
    pub fn new(out: W) -> Self {
        Self { out, failures: 0, warnings: 0, redactor: None }
    }

    /// Masks what `redactor` knows in every line from now on.
    pub fn set_redactor(&mut self, redactor: minibot_vault::Redactor) {
        self.redactor = Some(redactor);
    }

    pub fn ok(&mut self, topic: &str, text: impl AsRef<str>) {
        self.line(Status::Ok, topic, text.as_ref(), None);
    }

    pub fn skip(&mut self, topic: &str, text: impl AsRef<str>) {
        self.line(Status::Skip, topic, text.as_ref(), None);
    }

    pub fn warn(&mut self, topic: &str, text: impl AsRef<str>, fix: impl AsRef<str>) {
        self.line(Status::Warn, topic, text.as_ref(), Some(fix.as_ref()));
    }

    pub fn fail(&mut self, topic: &str, text: impl AsRef<str>, fix: impl AsRef<str>) {
        self.line(Status::Fail, topic, text.as_ref(), Some(fix.as_ref()));
    }

    /// Text may quote what a server or a file said, so it reaches the terminal without control characters.
    /// Several lines of text (one per config problem) become one, joined by `; `.
    fn line(&mut self, status: Status, topic: &str, text: &str, fix: Option<&str>) {
        match status {
            Status::Fail => self.failures += 1,
            Status::Warn => self.warnings += 1,
            Status::Ok | Status::Skip => {}
        }
        let text = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("; ");
        let mut line = format!("{} {topic:<TOPIC_WIDTH$} {text}", status.mark());
        if let Some(fix) = fix.filter(|f| !f.is_empty()) {
            line.push_str(" → fix: ");
            line.push_str(fix);
        }
        // A report that cannot be written (a closed pipe) has nobody to tell; the exit code still says it.
        if let Some(redactor) = &self.redactor {
            line = redactor.redact(&line).into_owned();
        }
        let _ = writeln!(self.out, "{}", for_terminal(&line));
        let _ = self.out.flush();
    }

    /// A closing line, and 1 when something needed is broken.
    pub fn finish(mut self) -> i32 {
        let summary = match (self.failures, self.warnings) {
            (0, 0) => "all good".to_string(),
            (0, w) => format!("nothing broken; {w} warning(s)"),
            (f, w) => format!("{f} problem(s) to fix, {w} warning(s)"),
        };
        let _ = writeln!(self.out, "\n{summary}");
        let _ = self.out.flush();
        i32::from(self.failures > 0)
    }
}
