//! Finding where a chunk's lines sit in a file. Each search tries four comparators in order and stops at the
//! first that finds a match, so an exact match always wins over a fuzzy one elsewhere.

/// How strictly two lines must agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    Exact,
    TrimEnd,
    Trim,
    Normalized,
}

pub(crate) const LEVELS: [Level; 4] = [Level::Exact, Level::TrimEnd, Level::Trim, Level::Normalized];

pub(crate) fn lines_equal(a: &str, b: &str, level: Level) -> bool {
    match level {
        Level::Exact => a == b,
        Level::TrimEnd => a.trim_end() == b.trim_end(),
        Level::Trim => a.trim() == b.trim(),
        Level::Normalized => normalize(a.trim()) == normalize(b.trim()),
    }
}

/// Typographic punctuation a model (or a word processor) substitutes for ASCII.
fn normalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' => out.push('\''),
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' => out.push('"'),
            '\u{2010}' | '\u{2011}' | '\u{2012}' | '\u{2013}' | '\u{2014}' | '\u{2015}' | '\u{2212}' => out.push('-'),
            '\u{2026}' => out.push_str("..."),
            '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => out.push(' '),
            other => out.push(other),
        }
    }
    out
}

fn matches_at(lines: &[String], pattern: &[String], start: usize, level: Level) -> bool {
    start + pattern.len() <= lines.len() && pattern.iter().zip(&lines[start..]).all(|(p, l)| lines_equal(l, p, level))
}

/// The first index at or after `start` where `pattern` matches; with `eof`, the end of the file is tried
/// first. An empty pattern matches at `start`.
pub(crate) fn seek(lines: &[String], pattern: &[String], start: usize, eof: bool) -> Option<usize> {
    if pattern.is_empty() {
        return Some(start);
    }
    if pattern.len() > lines.len() {
        return None;
    }
    let last = lines.len() - pattern.len();
    for level in LEVELS {
        if eof && last >= start && matches_at(lines, pattern, last, level) {
            return Some(last);
        }
        if let Some(found) = (start..=last).find(|&i| matches_at(lines, pattern, i, level)) {
            return Some(found);
        }
    }
    None
}

/// Outcome of a search restricted to a window around a unified header's line.
pub(crate) enum Windowed {
    Found(usize),
    Ambiguous,
    Missing,
}

/// Searches `[from, to]` for `pattern`. At each comparator level the header's own line wins if it matches;
/// otherwise exactly one match is required.
pub(crate) fn seek_window(lines: &[String], pattern: &[String], from: usize, to: usize, preferred: usize) -> Windowed {
    if pattern.len() > lines.len() {
        return Windowed::Missing;
    }
    let to = to.min(lines.len() - pattern.len());
    if from > to {
        return Windowed::Missing;
    }
    for level in LEVELS {
        if (from..=to).contains(&preferred) && matches_at(lines, pattern, preferred, level) {
            return Windowed::Found(preferred);
        }
        let found: Vec<usize> = (from..=to).filter(|&i| matches_at(lines, pattern, i, level)).collect();
        match found.len() {
            0 => continue,
            1 => return Windowed::Found(found[0]),
            _ => return Windowed::Ambiguous,
        }
    }
    Windowed::Missing
}
