//! Skill names and descriptions made fit for one line of a prompt. They are written by whoever published the
//! skill and repeated in every system prompt, so a line break could start text that reads as the operator's
//! own, a control character could hide text from a reader, and a long description would be paid for on every
//! turn.

/// The longest name the catalog shows, in characters.
pub const CATALOG_NAME_CHARS: usize = 60;
/// The longest description the catalog and `list_skills` show, in characters.
pub const CATALOG_DESCRIPTION_CHARS: usize = 300;

/// `text` on one line: every run of whitespace (line breaks included) made one space, control and invisible
/// formatting characters dropped, trimmed, and cut to `max_chars` characters, the last being `…` when cut.
/// Reads no further than it needs, so a description of megabytes costs no more than a short one.
pub fn one_line(text: &str, max_chars: usize) -> String {
    let mut out = String::new();
    let mut count = 0;
    let mut space = false;
    for c in text.chars() {
        if c.is_whitespace() {
            space = count > 0;
            continue;
        }
        if c.is_control() || invisible(c) {
            continue;
        }
        let needed = usize::from(space) + 1;
        if count + needed > max_chars {
            // More than fits: keep room for the ellipsis, and no space before it.
            while count >= max_chars && out.pop().is_some() {
                count -= 1;
            }
            out.truncate(out.trim_end().len());
            if max_chars > 0 {
                out.push('…');
            }
            return out;
        }
        if space {
            out.push(' ');
            count += 1;
            space = false;
        }
        out.push(c);
        count += 1;
    }
    out
}

/// Characters that change how text displays without showing: zero-width ones, bidirectional overrides, the
/// byte-order mark.
fn invisible(c: char) -> bool {
    matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitespace_collapses_and_controls_go() {
        assert_eq!(one_line("  a \n\n b\t\r\nc  ", 100), "a b c");
        assert_eq!(one_line("x\u{1b}[2Jy\u{0}z\u{202e}w", 100), "x[2Jyzw");
        assert_eq!(one_line("", 10), "");
    }

    #[test]
    fn long_text_is_cut_with_an_ellipsis() {
        assert_eq!(one_line("abcdef", 6), "abcdef");
        assert_eq!(one_line("abcdefg", 6), "abcde…");
        assert_eq!(one_line("abcd efgh", 6), "abcd…", "no space before the ellipsis");
        assert_eq!(one_line("ééééééé", 3).chars().count(), 3);
        assert_eq!(one_line("a\n\n\nb", 3), "a b");
    }
}
