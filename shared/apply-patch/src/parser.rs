use crate::{PatchError, Result};

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File: ";
const DELETE: &str = "*** Delete File: ";
const UPDATE: &str = "*** Update File: ";
const MOVE_TO: &str = "*** Move to: ";
const END_OF_FILE: &str = "*** End of File";

/// One file operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hunk {
    Add { path: String, contents: String },
    Delete { path: String },
    Update { path: String, move_to: Option<String>, chunks: Vec<Chunk> },
}

impl Hunk {
    pub fn path(&self) -> &str {
        match self {
            Self::Add { path, .. } | Self::Delete { path } | Self::Update { path, .. } => path,
        }
    }
}

/// `@@ -a,b +c,d @@`: where the chunk sat in the file the model saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnifiedHeader {
    pub old_start: usize,
    pub old_len: usize,
    pub new_start: usize,
    pub new_len: usize,
}

/// One `@@` section of an update.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Chunk {
    /// `@@ <line>`: a single line to seek before matching the chunk.
    pub context: Option<String>,
    pub unified: Option<UnifiedHeader>,
    /// Context and removed lines, in order.
    pub old_lines: Vec<String>,
    /// Context and added lines, in order.
    pub new_lines: Vec<String>,
    /// `*** End of File`: the chunk sits at the end of the file.
    pub is_end_of_file: bool,
}

/// Parses a whole patch.
pub fn parse_patch(text: &str) -> Result<Vec<Hunk>> {
    let text = strip_heredoc(text.trim());
    let lines: Vec<&str> = text.lines().collect();
    let begin = lines.iter().position(|l| l.trim() == BEGIN);
    let end = lines.iter().rposition(|l| l.trim() == END);
    let (begin, end) = match (begin, end) {
        (Some(b), Some(e)) if b < e => (b, e),
        _ => return Err(PatchError::MissingMarkers),
    };
    let body = &lines[begin + 1..end];
    if body.iter().all(|l| l.trim().is_empty()) {
        return Err(PatchError::Empty);
    }
    let mut hunks = Vec::new();
    let mut i = 0;
    while i < body.len() {
        let line_no = begin + 2 + i;
        let line = body[i].trim();
        if let Some(path) = header_path(line, ADD) {
            let path = path.to_string();
            i += 1;
            let mut content: Vec<&str> = Vec::new();
            while i < body.len() && !is_header(body[i]) {
                match body[i].strip_prefix('+') {
                    Some(rest) => content.push(rest),
                    None if body[i].trim().is_empty() => {}
                    None => {
                        return Err(PatchError::InvalidLine {
                            line: begin + 2 + i,
                            message: format!("every line of Add File {path} must start with '+'"),
                        });
                    }
                }
                i += 1;
            }
            let mut contents = content.join("\n");
            contents.push('\n');
            hunks.push(Hunk::Add { path, contents });
        } else if let Some(path) = header_path(line, DELETE) {
            hunks.push(Hunk::Delete { path: path.to_string() });
            i += 1;
        } else if let Some(path) = header_path(line, UPDATE) {
            let path = path.to_string();
            i += 1;
            let mut move_to = None;
            if let Some(target) = body.get(i).and_then(|l| header_path(l.trim(), MOVE_TO)) {
                move_to = Some(target.to_string());
                i += 1;
            }
            let (chunks, next) = parse_chunks(body, i, begin + 2, &path)?;
            i = next;
            if chunks.is_empty() {
                return Err(PatchError::InvalidLine {
                    line: line_no,
                    message: format!("Update File {path} has no changes"),
                });
            }
            hunks.push(Hunk::Update { path, move_to, chunks });
        } else {
            // Text between hunks that is not a header (commentary, stray blank lines) is ignored, as MiniBot did.
            i += 1;
        }
    }
    if hunks.is_empty() {
        return Err(PatchError::NoHunks);
    }
    Ok(hunks)
}

fn parse_chunks(body: &[&str], mut i: usize, offset: usize, path: &str) -> Result<(Vec<Chunk>, usize)> {
    let mut chunks: Vec<Chunk> = Vec::new();
    let mut current: Option<Chunk> = None;
    while i < body.len() && !is_file_header(body[i]) {
        let raw = body[i];
        let trimmed = raw.trim();
        if trimmed == END_OF_FILE {
            let chunk = current.get_or_insert_with(Chunk::default);
            chunk.is_end_of_file = true;
            chunks.push(std::mem::take(chunk));
            current = None;
        } else if let Some(rest) = trimmed.strip_prefix("@@") {
            if let Some(chunk) = current.take() {
                chunks.push(chunk);
            }
            let (unified, context) = parse_chunk_header(rest.trim());
            current = Some(Chunk { context, unified, ..Chunk::default() });
        } else {
            let chunk = current.get_or_insert_with(Chunk::default);
            if let Some(rest) = raw.strip_prefix('+') {
                chunk.new_lines.push(rest.to_string());
            } else if let Some(rest) = raw.strip_prefix('-') {
                chunk.old_lines.push(rest.to_string());
            } else if let Some(rest) = raw.strip_prefix(' ') {
                chunk.old_lines.push(rest.to_string());
                chunk.new_lines.push(rest.to_string());
            } else if raw.is_empty() {
                // Editors strip the single space of an empty context line; read it as that line.
                chunk.old_lines.push(String::new());
                chunk.new_lines.push(String::new());
            } else {
                return Err(PatchError::InvalidLine {
                    line: offset + i,
                    message: format!(
                        "unexpected line in Update File {path}: {:?}; lines must start with ' ', '+', '-' or '@@'",
                        truncate(raw, 80)
                    ),
                });
            }
        }
        i += 1;
    }
    if let Some(chunk) = current {
        chunks.push(chunk);
    }
    // A chunk made only of blank lines (the gap before the next header) changes nothing.
    chunks.retain(|c| {
        c.context.is_some()
            || c.is_end_of_file
            || c.old_lines.iter().chain(&c.new_lines).any(|l| !l.is_empty())
            || c.old_lines.len() != c.new_lines.len()
    });
    Ok((chunks, i))
}

/// `-a,b +c,d @@ ctx` → unified header and optional context; anything else is a plain context line.
fn parse_chunk_header(rest: &str) -> (Option<UnifiedHeader>, Option<String>) {
    if rest.is_empty() {
        return (None, None);
    }
    if let Some(after) = rest.strip_prefix('-')
        && let Some((ranges, tail)) = after.split_once("@@")
    {
        let mut parts = ranges.split_whitespace();
        let old = parts.next().and_then(parse_range);
        let new = parts.next().and_then(|p| p.strip_prefix('+')).and_then(parse_range);
        if let (Some((old_start, old_len)), Some((new_start, new_len)), None) = (old, new, parts.next()) {
            let context = Some(tail.trim()).filter(|t| !t.is_empty()).map(str::to_string);
            return (Some(UnifiedHeader { old_start, old_len, new_start, new_len }), context);
        }
    }
    (None, Some(rest.to_string()))
}

fn parse_range(text: &str) -> Option<(usize, usize)> {
    match text.split_once(',') {
        Some((start, len)) => Some((start.parse().ok()?, len.parse().ok()?)),
        None => Some((text.parse().ok()?, 1)),
    }
}

fn header_path<'a>(line: &'a str, prefix: &str) -> Option<&'a str> {
    line.strip_prefix(prefix).map(str::trim).filter(|p| !p.is_empty())
}

fn is_file_header(line: &str) -> bool {
    let line = line.trim();
    [ADD, DELETE, UPDATE].iter().any(|h| line.starts_with(h)) || line == END
}

fn is_header(line: &str) -> bool {
    is_file_header(line) || line.trim().starts_with(MOVE_TO)
}

/// Models often wrap the patch in the shell heredoc they saw in examples: `cat <<'EOF' ... EOF`.
fn strip_heredoc(text: &str) -> &str {
    let Some((first, rest)) = text.split_once('\n') else {
        return text;
    };
    let Some(pos) = first.find("<<") else {
        return text;
    };
    let tag = first[pos + 2..].trim().trim_matches(|c| c == '\'' || c == '"' || c == '-').trim();
    if tag.is_empty() || tag.starts_with('*') {
        return text;
    }
    match rest.trim_end().rsplit_once('\n') {
        Some((inner, last)) if last.trim() == tag => inner,
        _ => text,
    }
}

fn truncate(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}
