//! Talking to the person running `minibot init`. Questions go through `/dev/tty`, so a key piped on stdin
//! (`--api-key-stdin`) and a redirected stdout do not get in the way; `--yes` runs ask nothing and report on
//! stderr.

use minibot_vault::{PasswordPrompt, TtyPrompt, Zeroizing};
use std::fs::File;
use std::io::{Read, Write};

/// The person typed end-of-file (Ctrl-D): they want out, and nothing has been written yet.
#[derive(Debug, thiserror::Error)]
#[error("stopped at the question \"{0}\"; nothing was written")]
pub struct Stopped(pub String);

pub enum Ui {
    Terminal(File),
    /// `--yes`: nothing is asked; every answer comes from a flag, the existing file or a default.
    Batch,
}

impl Ui {
    /// The terminal, or why there is none.
    pub fn terminal() -> anyhow::Result<Self> {
        match std::fs::OpenOptions::new().read(true).write(true).open("/dev/tty") {
            Ok(tty) => Ok(Self::Terminal(tty)),
            Err(error) => anyhow::bail!(
                "minibot init asks its questions on a terminal and there is none ({error}); pass --yes and the \
                 answers as flags (see `minibot init --help`)"
            ),
        }
    }

    pub fn interactive(&self) -> bool {
        matches!(self, Self::Terminal(_))
    }

    /// A line of news: on the terminal in a wizard, on stderr in a `--yes` run.
    pub fn say(&mut self, text: &str) {
        // News quotes what servers said (errors, model lists, a bot's name): text only, no terminal controls.
        let text = crate::terminal_text::for_terminal(text);
        match self {
            Self::Terminal(tty) => {
                let _ = writeln!(tty, "{text}");
            }
            Self::Batch => eprintln!("{text}"),
        }
    }

    /// One answer, trimmed; Enter alone gives `default` (shown in brackets).
    pub fn line(&mut self, question: &str, default: Option<&str>) -> anyhow::Result<String> {
        let Self::Terminal(tty) = self else {
            anyhow::bail!("internal: asked \"{question}\" in a --yes run");
        };
        match default.filter(|d| !d.is_empty()) {
            Some(default) => write!(tty, "{question} [{default}]: ")?,
            None => write!(tty, "{question}: ")?,
        }
        tty.flush()?;
        let Some(answer) = read_line(tty)? else {
            return Err(Stopped(question.to_string()).into());
        };
        let answer = answer.trim();
        Ok(if answer.is_empty() { default.unwrap_or_default().to_string() } else { answer.to_string() })
    }

    /// Asks until `parse` accepts the answer, showing why it did not.
    pub fn until<T>(
        &mut self,
        question: &str,
        default: Option<&str>,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> anyhow::Result<T> {
        loop {
            let answer = self.line(question, default)?;
            match parse(&answer) {
                Ok(value) => return Ok(value),
                Err(why) => self.say(&format!("  {why}")),
            }
        }
    }

    pub fn yes_no(&mut self, question: &str, default: bool) -> anyhow::Result<bool> {
        let shown = if default { "Y/n" } else { "y/N" };
        self.until(&format!("{question} ({shown})"), None, |answer| match answer.to_ascii_lowercase().as_str() {
            "" => Ok(default),
            "y" | "yes" => Ok(true),
            "n" | "no" => Ok(false),
            _ => Err("answer y or n".into()),
        })
    }

    /// Picks one of `options` by number or by its name; `default` is an index.
    pub fn pick<T: Copy>(&mut self, question: &str, options: &[(&str, &str, T)], default: usize) -> anyhow::Result<T> {
        for (index, (_, label, _)) in options.iter().enumerate() {
            self.say(&format!("  {}) {label}", index + 1));
        }
        let default_number = (default + 1).to_string();
        self.until(question, Some(&default_number), |answer| {
            let by_number = answer.parse::<usize>().ok().and_then(|n| n.checked_sub(1)).and_then(|i| options.get(i));
            let by_name = options.iter().find(|(name, _, _)| name.eq_ignore_ascii_case(answer));
            by_number.or(by_name).map(|(_, _, value)| *value).ok_or_else(|| {
                let names: Vec<&str> = options.iter().map(|(name, _, _)| *name).collect();
                format!("answer a number from 1 to {} or one of {}", options.len(), names.join(", "))
            })
        })
    }

    /// A line typed without echo (keys, tokens, passwords).
    pub fn secret(&mut self, question: &str) -> anyhow::Result<Zeroizing<String>> {
        match TtyPrompt.ask(&format!("{question}: "))? {
            Some(value) => Ok(Zeroizing::new(value.trim().to_string())),
            None => anyhow::bail!("internal: asked \"{question}\" without a terminal"),
        }
    }
}

/// Reads up to a newline byte by byte: the terminal hands over one line per read anyway, and nothing typed
/// ahead for the next (hidden) question is swallowed by a buffer here. `None` at end-of-file.
fn read_line(mut tty: &File) -> std::io::Result<Option<String>> {
    let mut bytes = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        if tty.read(&mut byte)? == 0 {
            return Ok(if bytes.is_empty() { None } else { Some(String::from_utf8_lossy(&bytes).into_owned()) });
        }
        if byte[0] == b'\n' {
            return Ok(Some(String::from_utf8_lossy(&bytes).trim_end_matches('\r').to_string()));
        }
        bytes.push(byte[0]);
    }
}
