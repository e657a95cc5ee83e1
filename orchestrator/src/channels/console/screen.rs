//! Where the console's text goes: above the line editor's prompt ([`EditorScreen`]), or plain stdout and stderr
//! ([`PlainScreen`]). Both show a status line while a turn runs, but only on a terminal: a pipe gets answers
//! and notices alone.
//!
//! A terminal also shows the answer as the model writes it ([`Screen::partial`]); a pipe does not, so a reader
//! of piped stdout gets each answer whole, once, on its own line.

use crate::terminal_text::for_terminal;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// What the running turn is doing, for the status line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnStatus {
    pub step: u32,
    /// The tool running now.
    pub tool: Option<String>,
    /// An approval question waits for the user.
    pub asking: bool,
    pub since: Instant,
}

impl TurnStatus {
    pub fn new() -> Self {
        Self { step: 1, tool: None, asking: false, since: Instant::now() }
    }

    /// `thinking · step 2 · 4s`, `running bash · step 2 · 5s`, `waiting for your answer · step 2 · 9s`.
    pub fn describe(&self) -> String {
        let doing = match (&self.tool, self.asking) {
            (_, true) => "waiting for your answer".to_string(),
            (Some(tool), false) => format!("running {tool}"),
            (None, false) => "thinking".to_string(),
        };
        format!("{doing} · step {} · {}s", self.step, self.since.elapsed().as_secs())
    }
}

impl Default for TurnStatus {
    fn default() -> Self {
        Self::new()
    }
}

/// Where the console's text goes.
pub trait Screen: Send {
    /// An answer (stdout on a pipe).
    fn answer(&mut self, text: &str);
    /// A notice: tool runs, task progress, approvals (stderr on a pipe).
    fn notice(&mut self, text: &str);
    /// The console's own text: the banner and replies to slash commands. On stdout when stdout is a terminal,
    /// else on stderr, so piped stdout holds answers only.
    fn info(&mut self, text: &str) {
        self.notice(text);
    }
    /// What the running turn is doing (`None`: no turn runs). Called again every few hundred milliseconds while
    /// a turn runs, so a screen can animate it. Screens that cannot show it ignore it.
    fn status(&mut self, _status: Option<&TurnStatus>) {}
    /// Whether [`Screen::partial`] shows anything. When it does, an answer that was streamed whole is not
    /// printed again by [`Screen::answer`].
    fn streams(&self) -> bool {
        false
    }
    /// The next piece of the text the model is writing, shown right after the pieces before it (above the
    /// status line).
    fn partial(&mut self, _piece: &str) {}
    /// The streamed text is complete (or cut): it stays where it is, and what is printed next goes below it.
    fn partial_end(&mut self) {}
}

/// What every [`Screen`] of the console is wrapped in: the text is the model's or a tool's (answers, task
/// results, tool names, approval questions), so it reaches the terminal without control characters
/// ([`for_terminal`]); the screen's own styling comes after.
pub(super) struct TerminalSafeScreen(pub(super) Box<dyn Screen>);

impl Screen for TerminalSafeScreen {
    fn answer(&mut self, text: &str) {
        self.0.answer(&for_terminal(text));
    }
    fn notice(&mut self, text: &str) {
        self.0.notice(&for_terminal(text));
    }
    fn info(&mut self, text: &str) {
        self.0.info(&for_terminal(text));
    }
    fn status(&mut self, status: Option<&TurnStatus>) {
        let safe =
            status.map(|s| TurnStatus { tool: s.tool.as_deref().map(|t| for_terminal(t).into_owned()), ..s.clone() });
        self.0.status(safe.as_ref());
    }
    fn streams(&self) -> bool {
        self.0.streams()
    }
    fn partial(&mut self, piece: &str) {
        self.0.partial(&for_terminal(piece));
    }
    fn partial_end(&mut self) {
        self.0.partial_end();
    }
}

/// stdout for answers, stderr for notices, so the output can be piped. On a terminal, an `indicatif` spinner on
/// stderr shows the status while a turn runs.
pub struct PlainScreen {
    stdout_is_terminal: bool,
    /// Whether the spinner may run: not while the user types plain lines on the same terminal, where it would
    /// draw over what they type.
    animate: bool,
    spinner: Option<ProgressBar>,
    /// Streamed text is on stdout without its line end yet; the spinner stays away until it ends.
    open_line: bool,
}

impl PlainScreen {
    pub fn new() -> Self {
        let stdout_is_terminal = std::io::stdout().is_terminal();
        Self { stdout_is_terminal, animate: stdout_is_terminal, spinner: None, open_line: false }
    }

    /// No status line (`--plain` typed on a terminal).
    pub fn without_status() -> Self {
        Self { animate: false, ..Self::new() }
    }

    /// Writes with the spinner out of the way, so it never splits a line.
    fn print(&mut self, to_stdout: bool, text: &str) {
        self.partial_end();
        let write = || {
            if to_stdout {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{text}");
                let _ = out.flush();
            } else {
                eprintln!("{text}");
            }
        };
        match &self.spinner {
            Some(spinner) => spinner.suspend(write),
            None => write(),
        }
    }
}

impl Default for PlainScreen {
    fn default() -> Self {
        Self::new()
    }
}

impl Screen for PlainScreen {
    fn answer(&mut self, text: &str) {
        self.print(true, text);
    }
    fn notice(&mut self, text: &str) {
        self.print(false, text);
    }
    fn info(&mut self, text: &str) {
        self.print(self.stdout_is_terminal, text);
    }
    fn streams(&self) -> bool {
        self.stdout_is_terminal
    }
    fn partial(&mut self, piece: &str) {
        if !self.stdout_is_terminal {
            return;
        }
        // The spinner draws on the same terminal: it would overwrite the line being written.
        if let Some(spinner) = self.spinner.take() {
            spinner.finish_and_clear();
        }
        let mut out = std::io::stdout().lock();
        let _ = write!(out, "{piece}");
        let _ = out.flush();
        self.open_line = true;
    }
    fn partial_end(&mut self) {
        if std::mem::take(&mut self.open_line) {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out);
            let _ = out.flush();
        }
    }
    fn status(&mut self, status: Option<&TurnStatus>) {
        let Some(status) = status.filter(|_| self.animate && !self.open_line) else {
            if let Some(spinner) = self.spinner.take() {
                spinner.finish_and_clear();
            }
            return;
        };
        let spinner = self.spinner.get_or_insert_with(|| {
            let spinner = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            spinner.set_style(ProgressStyle::default_spinner());
            spinner.enable_steady_tick(Duration::from_millis(100));
            spinner
        });
        spinner.set_message(status.describe());
    }
}

const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// Text printed above the line editor's prompt (rustyline's external printer), so what the user is typing stays
/// intact. The status line is the last line above the prompt and each update replaces it. `indicatif` cannot
/// draw here: it would draw over the prompt the user types on.
///
/// Streamed text is wrapped here at word boundaries to the terminal's width: finished lines are printed for
/// good, and the line being written is a live row above the status line, redrawn with each piece. The printer
/// always ends a message with a line break, so a row that the terminal wrapped by itself could not be redrawn.
/// Once the user pressed Enter, the rows above the prompt are the user's line: the unfinished line is drawn
/// again under it and the old rows stay as they were.
pub struct EditorScreen {
    printer: Box<dyn rustyline::ExternalPrinter + Send>,
    /// Set by the input side when the user pressed Enter: the prompt moved down, so the lines above it are the
    /// user's own line now, not the live rows.
    displaced: Arc<AtomicBool>,
    /// The terminal's width in columns, as the line editor last measured it.
    columns: Arc<AtomicUsize>,
    /// Rows right above the prompt that the next print replaces: the live row of streamed text and the status
    /// line (possibly stale).
    rows: usize,
    /// The status line to keep under whatever is printed.
    current: Option<String>,
    /// The unfinished line of streamed text; `None` when nothing streams.
    live: Option<String>,
}

impl EditorScreen {
    pub fn new(
        printer: Box<dyn rustyline::ExternalPrinter + Send>,
        displaced: Arc<AtomicBool>,
        columns: Arc<AtomicUsize>,
    ) -> Self {
        Self { printer, displaced, columns, rows: 0, current: None, live: None }
    }

    /// Prints `text` (if any) in place of the live rows, then the live row of streamed text and the status line.
    /// The printer ends every message with a newline and redraws the prompt below it.
    fn emit(&mut self, text: Option<&str>) {
        let mut message = String::new();
        let displaced = self.displaced.swap(false, Ordering::SeqCst);
        if !displaced {
            // Up to each live row and clear it: the printer left the cursor at the start of the prompt's row.
            message.push_str(&"\x1b[1A\r\x1b[2K".repeat(self.rows));
        }
        let live = self.live.as_deref().filter(|line| !line.is_empty());
        let shown: Vec<&str> = [text, live, self.current.as_deref()].into_iter().flatten().collect();
        message.push_str(&shown.join("\n"));
        self.rows = usize::from(live.is_some()) + usize::from(self.current.is_some());
        let _ = self.printer.print(message);
    }

    /// Lines of streamed text that are finished, wrapped at the terminal's width; the rest stays live.
    fn finished_lines(&mut self) -> Vec<String> {
        let width = self.columns.load(Ordering::Relaxed).max(20) - 1;
        let Some(live) = self.live.as_mut() else { return Vec::new() };
        let mut lines = Vec::new();
        loop {
            if let Some(at) = live.find('\n') {
                let rest = live.split_off(at + 1);
                live.pop();
                lines.push(std::mem::replace(live, rest));
                continue;
            }
            match wrap_at(live, width) {
                Some(at) => {
                    let rest = live[at..].trim_start_matches(' ').to_string();
                    live.truncate(at);
                    lines.push(std::mem::replace(live, rest));
                }
                None => return lines,
            }
        }
    }
}

/// Where a line wider than `width` columns breaks: after its last space that fits, else at the width. `None`
/// when it fits. Characters from U+1100 on count as two columns (most of them are wide), so a row never wraps by
/// itself.
fn wrap_at(line: &str, width: usize) -> Option<usize> {
    let mut used = 0;
    let mut last_space = None;
    for (at, c) in line.char_indices() {
        used += if u32::from(c) >= 0x1100 { 2 } else { 1 };
        if used > width {
            return Some(last_space.filter(|space| *space > 0).unwrap_or(at));
        }
        if c == ' ' {
            last_space = Some(at);
        }
    }
    None
}

impl Screen for EditorScreen {
    fn answer(&mut self, text: &str) {
        self.emit(Some(text));
    }
    fn notice(&mut self, text: &str) {
        self.emit(Some(&format!("\x1b[2m{text}\x1b[0m")));
    }
    fn info(&mut self, text: &str) {
        self.emit(Some(text));
    }
    fn status(&mut self, status: Option<&TurnStatus>) {
        match status {
            Some(status) => {
                let frame = FRAMES[(status.since.elapsed().as_millis() / 100) as usize % FRAMES.len()];
                self.current = Some(format!("\x1b[2m{frame} {}\x1b[0m", status.describe()));
                self.emit(None);
            }
            // The stale line goes with the next print: the answer that ended the turn follows at once.
            None => self.current = None,
        }
    }
    fn streams(&self) -> bool {
        true
    }
    fn partial(&mut self, piece: &str) {
        self.live.get_or_insert_with(String::new).push_str(piece);
        let finished = self.finished_lines();
        let text = finished.join("\n");
        self.emit((!finished.is_empty()).then_some(text.as_str()));
    }
    fn partial_end(&mut self) {
        // The live row is already on the screen: it stays there as it is instead of being printed again.
        if self.live.take().is_some_and(|line| !line.is_empty()) {
            self.rows = self.rows.saturating_sub(1);
        }
        if self.current.is_none() && self.rows > 0 {
            // The turn is over and no answer is printed after the text: the stale status line goes now.
            self.emit(None);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::channels::console::screen::{TurnStatus, wrap_at};

    #[test]
    fn streamed_lines_wrap_after_the_last_word_that_fits() {
        assert_eq!(wrap_at("short line", 20), None);
        let line = "the quick brown fox jumps";
        let at = wrap_at(line, 20).unwrap();
        assert_eq!(&line[..at], "the quick brown fox");
        // No space to wrap at: cut at the width.
        assert_eq!(wrap_at(&"x".repeat(25), 20), Some(20));
        // Wide characters take two columns each.
        let wide = "日本語のテキストがここに続きます";
        let at = wrap_at(wide, 20).unwrap();
        assert_eq!(wide[..at].chars().count(), 10);
    }

    #[test]
    fn the_status_says_what_the_turn_does() {
        let mut status = TurnStatus::new();
        assert_eq!(status.describe(), "thinking · step 1 · 0s");
        status.step = 2;
        status.tool = Some("bash".into());
        assert_eq!(status.describe(), "running bash · step 2 · 0s");
        status.asking = true;
        assert_eq!(status.describe(), "waiting for your answer · step 2 · 0s");
    }
}
