//! Where the console's text goes: above the line editor's prompt ([`EditorScreen`]), or plain stdout and stderr
//! ([`PlainScreen`]). Both show a status line while a turn runs, but only on a terminal: a pipe gets answers
//! and notices alone.
//!
//! A terminal also shows the answer as the model writes it ([`Screen::partial`]); a pipe does not, so a reader
//! of piped stdout gets each answer whole, once, on its own line.

use crate::terminal_text::for_terminal;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The line editor's prompt; piped lines are shown after it too.
pub const PROMPT: &str = "you> ";

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

/// Up one row and clear it.
const UP_AND_CLEAR: &str = "\x1b[1A\r\x1b[2K";

/// The lines the user finished at the prompt since the screen last printed, as the input side reports them: the
/// prompt moved below each, so it is no longer right under the rows the screen drew. `None`: a line whose length
/// is unknown (Ctrl-C).
#[derive(Clone, Default)]
pub struct Entered(Arc<Mutex<Vec<Option<String>>>>);

impl Entered {
    pub fn push(&self, line: Option<String>) {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(line);
    }

    fn take(&self) -> Vec<Option<String>> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }
}

/// Text printed above the line editor's prompt (rustyline's external printer), so what the user is typing stays
/// intact. The status line is the last line above the prompt and each update replaces it. `indicatif` cannot
/// draw here: it would draw over the prompt the user types on.
///
/// Streamed text is wrapped here at word boundaries to the terminal's width: finished lines are printed for
/// good, and the line being written is a live row above the status line, redrawn with each piece. The printer
/// always ends a message with a line break, so a row that the terminal wrapped by itself could not be redrawn.
///
/// A line the user enters while a turn runs is redrawn with the rows: while text streams it stays under that
/// text (and over the status line) until the text is complete, so the answer is not cut in two by it; an empty
/// one is erased.
pub struct EditorScreen {
    printer: Box<dyn rustyline::ExternalPrinter + Send>,
    /// Set by the input side when the user presses Enter (or Ctrl-C).
    entered: Entered,
    /// The terminal's width in columns, as the line editor last measured it.
    columns: Arc<AtomicUsize>,
    /// Rows right above the prompt that the next print replaces: the live row of streamed text, the user's lines
    /// held under it and the status line (possibly stale).
    rows: usize,
    /// The status line to keep under whatever is printed.
    current: Option<String>,
    /// The unfinished line of streamed text; `None` when nothing streams.
    live: Option<String>,
    /// The user's lines entered while text streams, as drawn (one row each), under the live row.
    held: Vec<String>,
}

impl EditorScreen {
    pub fn new(
        printer: Box<dyn rustyline::ExternalPrinter + Send>,
        entered: Entered,
        columns: Arc<AtomicUsize>,
    ) -> Self {
        Self { printer, entered, columns, rows: 0, current: None, live: None, held: Vec::new() }
    }

    /// The width streamed text is wrapped to: one column short, so the cursor never waits at the edge.
    fn width(&self) -> usize {
        self.columns.load(Ordering::Relaxed).max(20) - 1
    }

    /// Prints `text` (if any) in place of the rows, then the live row of streamed text, the user's lines held
    /// under it and the status line. Every message ends with a newline; the line editor redraws the prompt below.
    fn emit(&mut self, text: Option<&str>) {
        let (up, entered) = self.take_entered();
        let mut message = UP_AND_CLEAR.repeat(up);
        let live = self.live.as_deref().filter(|line| !line.is_empty());
        let shown: Vec<&str> = entered
            .iter()
            .map(String::as_str)
            .chain(text)
            .chain(live)
            .chain(self.held.iter().map(String::as_str))
            .chain(self.current.as_deref())
            .collect();
        if shown.is_empty() {
            if up == 0 {
                return;
            }
            // Nothing to show: onto the row above the cleared ones, so the line break that ends the message leaves
            // no empty row over the prompt.
            message.push_str("\x1b[1A");
        }
        message.push_str(&shown.join("\n"));
        // Ended here rather than by the printer: between two lines the editor is out of raw mode and the printer
        // writes the message as it is.
        message.push('\n');
        self.rows = usize::from(live.is_some()) + self.held.len() + usize::from(self.current.is_some());
        let _ = self.printer.print(message);
    }

    /// The user's lines entered since the last print: how many rows over the prompt to redraw now (the screen's
    /// rows and those lines), and those lines to print for good first. Lines entered while text streams are held
    /// under it instead. With no rows drawn, or after a line of unknown length, the rows stay as they are.
    fn take_entered(&mut self) -> (usize, Vec<String>) {
        let entered = self.entered.take();
        if entered.is_empty() {
            return (self.rows, Vec::new());
        }
        if self.rows == 0 || entered.iter().any(Option::is_none) {
            // What is on the screen above the prompt stays; the live row goes on under it.
            self.held.clear();
            return (0, Vec::new());
        }
        let columns = self.columns.load(Ordering::Relaxed).max(1);
        let mut up = self.rows;
        let mut fixed = Vec::new();
        for line in entered.into_iter().flatten() {
            // Drawn again by the screen, not the line editor: without control characters, as everything else.
            let shown = format!("{PROMPT}{}", for_terminal(&line));
            // As the editor drew it: the cursor after the last character starts a new row when the row is full.
            up += columns_of(&shown) / columns + 1;
            if line.trim().is_empty() {
                continue;
            }
            if self.live.is_some() {
                let width = self.width();
                self.held.extend(wrapped(&shown, width));
            } else {
                fixed.push(shown);
            }
        }
        (up, fixed)
    }

    /// Lines of streamed text that are finished, wrapped at the terminal's width; the rest stays live.
    fn finished_lines(&mut self) -> Vec<String> {
        let width = self.width();
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

/// The columns a character takes: from U+1100 on two (most of them are wide).
fn char_columns(c: char) -> usize {
    if u32::from(c) >= 0x1100 { 2 } else { 1 }
}

fn columns_of(text: &str) -> usize {
    text.chars().map(char_columns).sum()
}

/// `line` cut into rows of at most `width` columns, at word boundaries where it can.
fn wrapped(line: &str, width: usize) -> Vec<String> {
    let mut rest = line;
    let mut rows = Vec::new();
    while let Some(at) = wrap_at(rest, width) {
        rows.push(rest[..at].to_string());
        rest = rest[at..].trim_start_matches(' ');
    }
    rows.push(rest.to_string());
    rows
}

/// Where a line wider than `width` columns breaks: after its last space that fits, else at the width. `None`
/// when it fits. Characters count as in [`char_columns`], so a row never wraps by itself.
fn wrap_at(line: &str, width: usize) -> Option<usize> {
    let mut used = 0;
    let mut last_space = None;
    for (at, c) in line.char_indices() {
        used += char_columns(c);
        if used > width {
            return Some(last_space.filter(|space| *space > 0).unwrap_or(at).max(first_char_end(line)));
        }
        if c == ' ' {
            last_space = Some(at);
        }
    }
    None
}

/// Where the first character of `line` ends: a row holds at least one, so cutting always moves on.
fn first_char_end(line: &str) -> usize {
    line.chars().next().map_or(0, char::len_utf8)
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
        // The live row and the user's lines under it are on the screen already: they stay there as they are
        // instead of being printed again, and only the status line under them is redrawn from now on.
        let Some(line) = self.live.take() else { return };
        let kept = usize::from(!line.is_empty()) + std::mem::take(&mut self.held).len();
        self.rows = self.rows.saturating_sub(kept);
        if self.current.is_none() && self.rows > 0 {
            // The turn is over and no answer is printed after the text: the stale status line goes now.
            self.emit(None);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::channels::console::screen::{EditorScreen, Entered, Screen, TurnStatus, UP_AND_CLEAR, wrap_at};
    use std::sync::atomic::AtomicUsize;
    use std::sync::{Arc, Mutex};

    /// Keeps what the screen sends the line editor's printer.
    struct Printed(Arc<Mutex<Vec<String>>>);

    impl rustyline::ExternalPrinter for Printed {
        fn print(&mut self, msg: String) -> rustyline::Result<()> {
            self.0.lock().unwrap().push(msg);
            Ok(())
        }
    }

    /// A screen 80 columns wide, the messages it prints, and where the input side reports lines.
    fn editor_screen() -> (EditorScreen, Arc<Mutex<Vec<String>>>, Entered) {
        let printed = Arc::new(Mutex::new(Vec::new()));
        let entered = Entered::default();
        let columns = Arc::new(AtomicUsize::new(80));
        (EditorScreen::new(Box::new(Printed(printed.clone())), entered.clone(), columns), printed, entered)
    }

    fn last(printed: &Arc<Mutex<Vec<String>>>) -> String {
        printed.lock().unwrap().last().cloned().unwrap_or_default()
    }

    #[test]
    fn a_line_entered_while_text_streams_waits_under_it_and_an_empty_one_goes() {
        let (mut screen, printed, entered) = editor_screen();
        screen.status(Some(&TurnStatus::new()));
        screen.partial("The quick");
        let status = screen.current.clone().unwrap();
        assert_eq!(last(&printed), format!("{UP_AND_CLEAR}The quick\n{status}\n"));
        // The prompt moved below two lines: the rows over it are the live row, the status and those lines.
        entered.push(Some("and the cat".into()));
        entered.push(Some(String::new()));
        screen.partial(" brown");
        let status = screen.current.clone().unwrap();
        assert_eq!(last(&printed), format!("{}The quick brown\nyou> and the cat\n{status}\n", UP_AND_CLEAR.repeat(4)));
        screen.partial(" fox");
        assert!(
            last(&printed).starts_with(&format!("{}The quick brown fox\nyou> and the cat\n", UP_AND_CLEAR.repeat(3)))
        );
        // The turn ends with that text: it stays, the line under it too, and the stale status line goes without
        // leaving an empty row.
        screen.status(None);
        screen.partial_end();
        assert_eq!(last(&printed), format!("{UP_AND_CLEAR}\x1b[1A\n"));
        assert_eq!(screen.rows, 0);
    }

    #[test]
    fn a_line_entered_while_nothing_streams_is_printed_over_the_status_line() {
        let (mut screen, printed, entered) = editor_screen();
        screen.status(Some(&TurnStatus::new()));
        entered.push(Some("later".into()));
        screen.status(Some(&TurnStatus::new()));
        let status = screen.current.clone().unwrap();
        assert_eq!(last(&printed), format!("{}you> later\n{status}\n", UP_AND_CLEAR.repeat(2)));
        // A line given up with Ctrl-C: its length is unknown, so what is above it stays.
        entered.push(None);
        screen.answer("done");
        assert_eq!(last(&printed), format!("done\n{status}\n"));
    }

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
