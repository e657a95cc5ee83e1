//! Text that reaches the user's terminal. Whatever the model writes (and whatever a tool returns, an MCP
//! server names, or a classifier gives as its reason) can hold terminal control sequences: a title change, an
//! OSC 52 clipboard write, a screen clear, a DECRQSS query whose answer the terminal types back as if the user
//! had. A terminal acts on them only through control characters (ESC, BEL, the C1 range U+0080–U+009F, which
//! some terminals take as ESC sequences on their own, and CR, which lets a line overwrite what was printed
//! before it), so those are dropped and everything else is kept as written: newline and tab are the only
//! controls a printed answer needs. The console's own styling (the dim notices) is added after this, never
//! taken from the text.

use std::borrow::Cow;
use std::io::Write;

/// Whether `c` stays in printed text: anything but the control characters (Unicode `Cc`: C0, DEL, C1), except
/// newline and tab.
fn keeps(c: char) -> bool {
    (!c.is_control() || matches!(c, '\n' | '\t')) && !is_bidi_control(c)
}

/// Bidirectional embeddings, overrides and isolates: they reorder what follows on screen, so a line can read
/// differently from what it is (an approval question that seems to name another file).
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
}

/// `text` without the control characters a terminal would act on.
pub fn for_terminal(text: &str) -> Cow<'_, str> {
    if text.chars().all(keeps) { Cow::Borrowed(text) } else { Cow::Owned(text.chars().filter(|&c| keeps(c)).collect()) }
}

/// A writer that drops the same control characters from bytes on their way to a terminal (the log lines
/// `--verbose` prints on stderr quote values with spaces, but not one made only of a C1 sequence). It works on
/// bytes, since a formatter may hand over anything: C0 and DEL bytes go, as do C1 characters in their UTF-8
/// form (`C2 80`–`C2 9F`); a lone byte in `80`–`9F` is a part of another character, not a control, and stays.
pub struct TerminalSafe<W: Write>(pub W);

impl<W: Write> Write for TerminalSafe<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut out = Vec::with_capacity(buf.len());
        let mut bytes = buf.iter().copied().peekable();
        while let Some(byte) = bytes.next() {
            match byte {
                b'\n' | b'\t' => out.push(byte),
                0x00..=0x1F | 0x7F => {}
                0xC2 if bytes.peek().is_some_and(|next| (0x80..=0x9F).contains(next)) => {
                    bytes.next();
                }
                _ => out.push(byte),
            }
        }
        self.0.write_all(&out)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The red-team reply (`repro_terminal_escape.sh`): title, screen clear, clipboard write, DECRQSS.
    const HOSTILE: &str = "hello \x1b]0;PWNED_TITLE\x07 \x1b[2J \x1b]52;c;cm0gLXJmIH4K\x07 \x1bP$q\x1b\\ \u{9b}31m end";

    #[test]
    fn control_characters_go_and_the_text_stays() {
        assert_eq!(for_terminal(HOSTILE), "hello ]0;PWNED_TITLE [2J ]52;c;cm0gLXJmIH4K P$q\\ 31m end");
        assert_eq!(for_terminal("line one\r\nline\ttwo\u{7f}\u{85}\0"), "line one\nline\ttwo");
        assert_eq!(for_terminal("file \u{202E}txt.exe\u{2069} done"), "file txt.exe done");
        let plain = "tables | ok\n\t— ünïcödé 名前 🚀 👨\u{200d}👩 \u{a0}";
        assert!(matches!(for_terminal(plain), Cow::Borrowed(text) if text == plain));
    }

    #[test]
    fn the_writer_drops_the_same_bytes_and_keeps_multibyte_characters() {
        let mut out = TerminalSafe(Vec::new());
        out.write_all(HOSTILE.as_bytes()).unwrap();
        assert_eq!(String::from_utf8_lossy(&out.0), for_terminal(HOSTILE));
        // `Ǜ` is C7 9B: its second byte looks like an 8-bit CSI and must stay.
        let mut out = TerminalSafe(Vec::new());
        out.write_all("Ǜ ok\n".as_bytes()).unwrap();
        assert_eq!(out.0, "Ǜ ok\n".as_bytes());
    }
}
