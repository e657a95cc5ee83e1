//! Where the console's text goes: above the line editor's prompt ([`EditorScreen`]), or plain stdout and stderr
//! ([`PlainScreen`]). Both show a status line while a turn runs, but only on a terminal: a pipe gets answers
//! and notices alone.

use crate::terminal_text::for_terminal;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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
    /// The seam for streamed answers, which come later: the text of an answer as the model writes it, shown in
    /// place of the status line until [`Screen::answer`] brings the whole answer. Nothing calls it yet.
    fn partial(&mut self, _text: &str) {}
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
    fn partial(&mut self, text: &str) {
        self.0.partial(&for_terminal(text));
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
}

impl PlainScreen {
    pub fn new() -> Self {
        let stdout_is_terminal = std::io::stdout().is_terminal();
        Self { stdout_is_terminal, animate: stdout_is_terminal, spinner: None }
    }

    /// No status line (`--plain` typed on a terminal).
    pub fn without_status() -> Self {
        Self { animate: false, ..Self::new() }
    }

    /// Writes with the spinner out of the way, so it never splits a line.
    fn print(&self, to_stdout: bool, text: &str) {
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
    fn status(&mut self, status: Option<&TurnStatus>) {
        let Some(status) = status.filter(|_| self.animate) else {
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
pub struct EditorScreen {
    printer: Box<dyn rustyline::ExternalPrinter + Send>,
    /// Set by the input side when the user pressed Enter: the prompt moved down, so the line above it is the
    /// user's own line now, not the status line.
    displaced: Arc<AtomicBool>,
    /// The status line is on the screen (possibly stale) right above the prompt.
    shown: bool,
    /// The status line to keep under whatever is printed.
    current: Option<String>,
}

impl EditorScreen {
    pub fn new(printer: Box<dyn rustyline::ExternalPrinter + Send>, displaced: Arc<AtomicBool>) -> Self {
        Self { printer, displaced, shown: false, current: None }
    }

    /// Prints `text` (if any) in place of the status line, then the status line again while a turn runs. The
    /// printer ends every message with a newline and redraws the prompt below it.
    fn emit(&mut self, text: Option<&str>) {
        let mut message = String::new();
        let displaced = self.displaced.swap(false, Ordering::SeqCst);
        if self.shown && !displaced {
            // Up to the status line and clear it: the printer left the cursor at the start of the prompt's row.
            message.push_str("\x1b[1A\r\x1b[2K");
        }
        if let Some(text) = text {
            message.push_str(text);
        }
        if let Some(line) = &self.current {
            if text.is_some() {
                message.push('\n');
            }
            message.push_str(line);
        }
        self.shown = self.current.is_some();
        let _ = self.printer.print(message);
    }
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
}

#[cfg(test)]
mod tests {
    use crate::channels::console::screen::TurnStatus;

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
