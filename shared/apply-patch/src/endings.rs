//! Line endings of an updated file. Files in the wild mix them (a CRLF line pasted into a LF file, an old Mac
//! `\r`), and a patch that touches three lines must not rewrite the endings of all the others. So a file is
//! split into lines that remember their own ending; the lines a chunk keeps keep it, and a line the patch adds
//! takes the ending of the lines around it, or the file's most common ending when those disagree.

/// One line of a file, without its ending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Line {
    pub text: String,
    /// `None` for a line the patch added, decided by [`join`]. `Some("")` only for a last line without an ending.
    pub ending: Option<&'static str>,
}

/// Beyond this many cells the alignment of a chunk's old and new lines is skipped (the lines are paired by
/// position instead), so a chunk that rewrites thousands of lines stays cheap.
const MAX_ALIGN_CELLS: usize = 4_000_000;

/// Splits `text` at `\n`, `\r\n` and lone `\r`. A final ending does not start another (empty) line.
pub(crate) fn split(text: &str) -> Vec<Line> {
    let bytes = text.as_bytes();
    let mut lines = Vec::new();
    let (mut start, mut i) = (0, 0);
    while i < bytes.len() {
        let ending = match bytes[i] {
            b'\n' => "\n",
            b'\r' if bytes.get(i + 1) == Some(&b'\n') => "\r\n",
            b'\r' => "\r",
            _ => {
                i += 1;
                continue;
            }
        };
        lines.push(Line { text: text[start..i].to_string(), ending: Some(ending) });
        i += ending.len();
        start = i;
    }
    if start < bytes.len() {
        lines.push(Line { text: text[start..].to_string(), ending: Some("") });
    }
    lines
}

/// The ending most lines of `text` use; `\n` for a text without any (and on a tie with `\n`).
pub(crate) fn majority(text: &str) -> &'static str {
    let mut counts = [("\n", 0usize), ("\r\n", 0), ("\r", 0)];
    for line in split(text) {
        if let Some(slot) = counts.iter_mut().find(|(e, _)| Some(*e) == line.ending) {
            slot.1 += 1;
        }
    }
    // Stable on ties, so `\n` wins them.
    counts.iter().fold(("\n", 0), |best, &(e, n)| if n > best.1 { (e, n) } else { best }).0
}

/// The lines that replace `old`: the new texts, each with the ending of the old line it stands for. A new line
/// equal to an old one (a context line) is that line; the others are paired by position with the old lines
/// between the same two context lines (a `-` line followed by its `+` replacement); what is left is an added
/// line whose ending [`join`] decides.
pub(crate) fn carry(old: &[Line], new: Vec<String>) -> Vec<Line> {
    let anchors = align(old, &new);
    let mut endings: Vec<Option<&'static str>> = vec![None; new.len()];
    let (mut old_from, mut new_from) = (0, 0);
    for &(o, n) in anchors.iter().chain(std::iter::once(&(old.len(), new.len()))) {
        for (k, slot) in endings[new_from..n].iter_mut().enumerate() {
            *slot = old.get(old_from + k).filter(|_| old_from + k < o).and_then(|l| l.ending);
        }
        if let (Some(slot), Some(line)) = (endings.get_mut(n), old.get(o)) {
            *slot = line.ending;
        }
        (old_from, new_from) = (o + 1, n + 1);
    }
    new.into_iter().zip(endings).map(|(text, ending)| Line { text, ending }).collect()
}

/// The longest common subsequence of the old and new lines (compared without surrounding whitespace, as the
/// fuzzy matcher may have matched them), as (old index, new index) pairs in order.
fn align(old: &[Line], new: &[String]) -> Vec<(usize, usize)> {
    let (n, m) = (old.len(), new.len());
    if n == 0 || m == 0 || n.saturating_mul(m) > MAX_ALIGN_CELLS {
        return Vec::new();
    }
    let same = |i: usize, j: usize| old[i].text.trim() == new[j].trim();
    // lengths[i][j]: LCS of old[i..] and new[j..].
    let mut lengths = vec![0u32; (n + 1) * (m + 1)];
    let at = |i: usize, j: usize| i * (m + 1) + j;
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lengths[at(i, j)] = if same(i, j) {
                lengths[at(i + 1, j + 1)] + 1
            } else {
                lengths[at(i + 1, j)].max(lengths[at(i, j + 1)])
            };
        }
    }
    let (mut i, mut j, mut pairs) = (0, 0, Vec::new());
    while i < n && j < m {
        if same(i, j) && lengths[at(i, j)] == lengths[at(i + 1, j + 1)] + 1 {
            pairs.push((i, j));
            i += 1;
            j += 1;
        } else if lengths[at(i + 1, j)] >= lengths[at(i, j + 1)] {
            i += 1;
        } else {
            j += 1;
        }
    }
    pairs
}

/// The file text. A line without an ending gets the ending of the nearest lines that have one: both sides
/// agreeing decide; when they differ the file's `majority` ending wins if it is one of them, else the line
/// above. The last line ends with nothing only when `keep_final` is off and it had no ending.
pub(crate) fn join(lines: Vec<Line>, majority: &'static str, keep_final: bool) -> String {
    let known = |line: &Line| line.ending.filter(|e| !e.is_empty());
    let mut above: Vec<Option<&'static str>> = Vec::with_capacity(lines.len());
    let mut last = None;
    for line in &lines {
        above.push(last);
        last = known(line).or(last);
    }
    let mut below: Vec<Option<&'static str>> = vec![None; lines.len()];
    let mut next = None;
    for (slot, line) in below.iter_mut().zip(&lines).rev() {
        *slot = next;
        next = known(line).or(next);
    }
    let count = lines.len();
    let mut out = String::new();
    for (i, line) in lines.into_iter().enumerate() {
        out.push_str(&line.text);
        let ending = match known(&line) {
            Some(ending) => ending,
            None if i + 1 == count && !keep_final => "",
            None => match (above[i], below[i]) {
                (Some(a), Some(b)) if a == b => a,
                (Some(_), Some(b)) if b == majority => majority,
                (Some(a), _) => a,
                (None, Some(b)) => b,
                (None, None) => majority,
            },
        };
        out.push_str(ending);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endings(text: &str) -> Vec<&'static str> {
        split(text).into_iter().map(|l| l.ending.unwrap_or("?")).collect()
    }

    #[test]
    fn split_keeps_every_ending_and_never_joins_lines() {
        assert_eq!(endings("a\nb\r\nc\rd"), ["\n", "\r\n", "\r", ""]);
        let texts: Vec<String> = split("a\r\rb\n").into_iter().map(|l| l.text).collect();
        assert_eq!(texts, ["a", "", "b"]);
        assert!(split("").is_empty());
    }

    #[test]
    fn majority_counts_endings() {
        assert_eq!(majority("a\r\nb\r\nc\n"), "\r\n");
        assert_eq!(majority("a\r\nb\n"), "\n");
        assert_eq!(majority("no ending"), "\n");
        assert_eq!(majority("a\rb\rc\n"), "\r");
    }
}
