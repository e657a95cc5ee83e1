//! Keeping printed output and the final value within `max_output_chars`: their start and their end, with a
//! marker saying how much was left out between them.

use monty_types::{MontyException, PrintWriterCallback};
use std::borrow::Cow;

/// What the script printed, held to its first and last characters as it comes, so a print loop cannot grow it.
pub struct Printed {
    limit: usize,
    head: String,
    head_chars: usize,
    tail: String,
    tail_chars: usize,
    total: usize,
}

impl Printed {
    pub fn new(limit: usize) -> Self {
        Self { limit, head: String::new(), head_chars: 0, tail: String::new(), tail_chars: 0, total: 0 }
    }

    fn head_limit(&self) -> usize {
        self.limit.div_ceil(2)
    }

    fn tail_limit(&self) -> usize {
        self.limit - self.head_limit()
    }

    fn push(&mut self, text: &str) {
        for c in text.chars() {
            self.total += 1;
            if self.head_chars < self.head_limit() {
                self.head.push(c);
                self.head_chars += 1;
            } else {
                self.tail.push(c);
                self.tail_chars += 1;
            }
        }
        // Trimmed in batches: a character at a time would copy the tail for every character printed.
        if self.tail_chars > 2 * self.tail_limit() + 1024 {
            self.tail = last_chars(&self.tail, self.tail_chars, self.tail_limit()).to_string();
            self.tail_chars = self.tail_limit();
        }
    }

    /// The output, cut to the limit.
    pub fn finish(&self) -> String {
        if self.total <= self.limit {
            return format!("{}{}", self.head, self.tail);
        }
        let tail = last_chars(&self.tail, self.tail_chars, self.tail_limit());
        format!("{}{}{tail}", self.head, marker(self.total - self.limit))
    }
}

impl PrintWriterCallback for Printed {
    fn stdout_write(&mut self, output: Cow<'_, str>) -> Result<(), MontyException> {
        self.push(&output);
        Ok(())
    }

    fn stdout_push(&mut self, end: char) -> Result<(), MontyException> {
        let mut buffer = [0u8; 4];
        self.push(end.encode_utf8(&mut buffer));
        Ok(())
    }
}

fn marker(omitted: usize) -> String {
    format!("\n… [{omitted} characters omitted] …\n")
}

fn last_chars(text: &str, chars: usize, keep: usize) -> &str {
    let skip = chars.saturating_sub(keep);
    match text.char_indices().nth(skip) {
        Some((at, _)) => &text[at..],
        None => "",
    }
}

/// `text` cut to `limit` characters keeping its start and end; `None` when it fits.
pub fn cut(text: &str, limit: usize) -> Option<String> {
    let chars = text.chars().count();
    if chars <= limit {
        return None;
    }
    let head = limit.div_ceil(2);
    let head_end = text.char_indices().nth(head).map_or(text.len(), |(at, _)| at);
    let tail = last_chars(text, chars, limit - head);
    Some(format!("{}{}{tail}", &text[..head_end], marker(chars - limit)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_output_is_whole_and_long_output_keeps_both_ends() {
        let mut printed = Printed::new(10);
        printed.push("héllo");
        assert_eq!(printed.finish(), "héllo");
        let mut printed = Printed::new(10);
        for i in 0..10_000 {
            printed.push(&format!("{}", i % 10));
        }
        let out = printed.finish();
        assert!(out.starts_with("01234\n… [9990 characters omitted] …\n"), "{out}");
        assert!(out.ends_with("56789"), "{out}");
        assert_eq!(cut("abcdefghij", 4).as_deref(), Some("ab\n… [6 characters omitted] …\nij"));
        assert_eq!(cut("abc", 4), None);
    }
}
