//! Checks a text the way Telegram parses it for `parse_mode` MarkdownV2 or HTML, so that a badly escaped answer
//! fails here as it would on the real Bot API (`can't parse entities`). The checks follow the rules of
//! <https://core.telegram.org/bots/api#formatting-options> and lean towards accepting: a text refused here is
//! one Telegram refuses too.

/// What Telegram says about a text it cannot parse (after `Bad Request: can't parse entities: `).
pub type ParseError = String;

/// The length of the text once parsed, in UTF-16 code units (what Telegram's 4096 limit counts), or why
/// Telegram would refuse it. `None`: the parse mode is not one Telegram knows.
pub fn check(parse_mode: &str, text: &str) -> Option<Result<usize, ParseError>> {
    match parse_mode.to_ascii_lowercase().as_str() {
        "markdownv2" => Some(markdown_v2(text)),
        "html" => Some(html(text)),
        // Legacy Markdown: kept for old bots; not checked beyond its length.
        "markdown" => Some(Ok(utf16_len(text))),
        _ => None,
    }
}

fn utf16_len(text: &str) -> usize {
    text.chars().map(char::len_utf16).sum()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Entity {
    Bold,
    Italic,
    Underline,
    Strike,
    Spoiler,
    Link,
}

fn reserved(c: char) -> ParseError {
    format!("Character '{c}' is reserved and must be escaped with the preceding '\\'")
}

fn unclosed(at: usize) -> ParseError {
    format!("Can't find end of the entity starting at byte offset {at}")
}

fn markdown_v2(text: &str) -> Result<usize, ParseError> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let next = |i: usize| chars.get(i).map(|(_, c)| *c);
    let mut open: Vec<(Entity, usize)> = Vec::new();
    let mut visible = 0;
    let mut i = 0;
    while i < chars.len() {
        let (at, c) = chars[i];
        let line_start = i == 0 || chars[i - 1].1 == '\n';
        match c {
            '\\' => match next(i + 1) {
                Some(escaped) if (1..=126).contains(&u32::from(escaped)) => {
                    visible += 1;
                    i += 2;
                }
                _ => {
                    visible += 1;
                    i += 1;
                }
            },
            '`' if next(i + 1) == Some('`') && next(i + 2) == Some('`') => {
                let (end, length) = code_end(&chars, i + 3, "```").ok_or_else(|| unclosed(at))?;
                // The first line, when it is one word, names the language and is not shown.
                let first_line: String = chars[i + 3..end].iter().map(|(_, c)| *c).take_while(|c| *c != '\n').collect();
                let language = chars[i + 3..end].len() > first_line.chars().count()
                    && !first_line.is_empty()
                    && !first_line.contains(char::is_whitespace);
                visible += if language { length.saturating_sub(utf16_len(&first_line) + 1) } else { length };
                i = end + 3;
            }
            '`' => {
                let (end, length) = code_end(&chars, i + 1, "`").ok_or_else(|| unclosed(at))?;
                visible += length;
                i = end + 1;
            }
            '*' if line_start && next(i + 1) == Some('*') && next(i + 2) == Some('>') => i += 3,
            '*' => {
                toggle(&mut open, Entity::Bold, at);
                i += 1;
            }
            '_' if next(i + 1) == Some('_') => {
                toggle(&mut open, Entity::Underline, at);
                i += 2;
            }
            '_' => {
                toggle(&mut open, Entity::Italic, at);
                i += 1;
            }
            '~' => {
                toggle(&mut open, Entity::Strike, at);
                i += 1;
            }
            '|' if next(i + 1) == Some('|') => {
                // `||` at the end of a line, with no spoiler open, is the mark of an expandable block quotation.
                let ends_line = matches!(next(i + 2), None | Some('\n'));
                if !ends_line || open.iter().any(|(e, _)| *e == Entity::Spoiler) {
                    toggle(&mut open, Entity::Spoiler, at);
                }
                i += 2;
            }
            '[' => {
                open.push((Entity::Link, at));
                i += 1;
            }
            '!' if next(i + 1) == Some('[') => {
                open.push((Entity::Link, at));
                i += 2;
            }
            ']' => {
                let Some(index) = open.iter().rposition(|(e, _)| *e == Entity::Link) else {
                    return Err(reserved(']'));
                };
                open.remove(index);
                i += 1;
                if next(i) == Some('(') {
                    i = url_end(&chars, i + 1).ok_or_else(|| format!("Can't find end of a URL at byte offset {at}"))?
                        + 1;
                }
            }
            '>' if line_start => i += 1,
            '(' | ')' | '>' | '#' | '+' | '-' | '=' | '|' | '{' | '}' | '.' | '!' => {
                return Err(reserved(c));
            }
            _ => {
                visible += c.len_utf16();
                i += 1;
            }
        }
    }
    match open.first() {
        Some((_, at)) => Err(unclosed(*at)),
        None => Ok(visible),
    }
}

/// Closes `entity` if it is open, else opens it.
fn toggle(open: &mut Vec<(Entity, usize)>, entity: Entity, at: usize) {
    match open.iter().rposition(|(e, _)| *e == entity) {
        Some(index) => {
            open.remove(index);
        }
        None => open.push((entity, at)),
    }
}

/// Where the code that starts at `from` ends (the index of its closing `fence`) and its visible length. Inside
/// code only `` ` `` and `\` are escaped.
fn code_end(chars: &[(usize, char)], from: usize, fence: &str) -> Option<(usize, usize)> {
    let fence: Vec<char> = fence.chars().collect();
    let mut visible = 0;
    let mut i = from;
    while i < chars.len() {
        if chars[i].1 == '\\' && i + 1 < chars.len() {
            visible += chars[i + 1].1.len_utf16();
            i += 2;
            continue;
        }
        if chars[i..].iter().map(|(_, c)| *c).take(fence.len()).eq(fence.iter().copied()) {
            return Some((i, visible));
        }
        visible += chars[i].1.len_utf16();
        i += 1;
    }
    None
}

/// The index of the `)` that ends the URL starting at `from`; inside it `)` and `\` are escaped.
fn url_end(chars: &[(usize, char)], from: usize) -> Option<usize> {
    let mut i = from;
    while i < chars.len() {
        match chars[i].1 {
            '\\' => i += 2,
            ')' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

const HTML_TAGS: &[&str] = &[
    "b",
    "strong",
    "i",
    "em",
    "u",
    "ins",
    "s",
    "strike",
    "del",
    "span",
    "tg-spoiler",
    "a",
    "tg-emoji",
    "tg-time",
    "code",
    "pre",
    "blockquote",
];

fn html(text: &str) -> Result<usize, ParseError> {
    let mut open: Vec<(String, usize)> = Vec::new();
    let mut visible = 0;
    let mut rest = text;
    let mut offset = 0;
    while let Some(c) = rest.chars().next() {
        let at = offset;
        let step = match c {
            '<' if rest[1..].starts_with(|n: char| n.is_ascii_alphabetic() || n == '/') => {
                let end = rest.find('>').ok_or_else(|| format!("Unclosed start tag at byte offset {at}"))?;
                let inside = &rest[1..end];
                let (closing, tag) = match inside.strip_prefix('/') {
                    Some(tag) => (true, tag),
                    None => (false, inside),
                };
                let name = tag.split(|c: char| c.is_whitespace() || c == '/').next().unwrap_or("").to_lowercase();
                if closing {
                    match open.pop() {
                        Some((top, _)) if top == name => {}
                        Some((top, _)) => {
                            return Err(format!(
                                "Unmatched end tag at byte offset {at}, expected \"</{top}>\", found \"</{name}>\""
                            ));
                        }
                        None => return Err(format!("Unexpected end tag at byte offset {at}")),
                    }
                } else if HTML_TAGS.contains(&name.as_str()) {
                    open.push((name, at));
                } else {
                    return Err(format!("Unsupported start tag \"{name}\" at byte offset {at}"));
                }
                end + 1
            }
            '&' => match entity_len(rest) {
                Some(len) => {
                    visible += 1;
                    len
                }
                None => {
                    visible += 1;
                    1
                }
            },
            _ => {
                visible += c.len_utf16();
                c.len_utf8()
            }
        };
        rest = &rest[step..];
        offset += step;
    }
    match open.first() {
        Some((tag, _)) => Err(format!("Can't find end tag corresponding to start tag \"{tag}\"")),
        None => Ok(visible),
    }
}

/// The length of the HTML entity `rest` starts with (`&lt;`, `&#123;`, …), if it is one Telegram knows.
fn entity_len(rest: &str) -> Option<usize> {
    let end = rest.find(';')?;
    let name = &rest[1..end];
    let known = matches!(name, "lt" | "gt" | "amp" | "quot")
        || name.strip_prefix("#x").is_some_and(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()))
        || name.strip_prefix('#').is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()));
    known.then_some(end + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md(text: &str) -> Result<usize, ParseError> {
        check("MarkdownV2", text).unwrap()
    }

    #[test]
    fn escaped_markdown_is_accepted_and_counted_without_its_marks() {
        assert_eq!(md("Hello world\\. Fine\\!"), Ok(18));
        assert_eq!(md("*bold* _italic_ __under__ ~gone~ ||hidden||"), Ok(29));
        assert_eq!(md("[a link](https://example.com/a_(b\\))"), Ok(6));
        assert_eq!(md("```rust\nfn main() { let x = 1.0; }\n```"), Ok(27));
        assert_eq!(md("`a.b-c` and \\`"), Ok(11));
        assert_eq!(md(">quoted\n**>expandable\n>last||"), Ok(22));
        assert_eq!(md("3 \\* 4 \\= 12"), Ok(10));
    }

    #[test]
    fn reserved_characters_and_open_entities_are_refused() {
        assert_eq!(md("Hello."), Err("Character '.' is reserved and must be escaped with the preceding '\\'".into()));
        assert!(md("a-b").is_err());
        assert!(md("snake_case word").unwrap_err().contains("byte offset 5"));
        assert!(md("*bold").is_err());
        assert!(md("```\nno end").is_err());
        assert!(md("a > b").is_err());
        assert!(md("oops]").is_err());
    }

    #[test]
    fn html_tags_must_be_known_and_balanced() {
        let prompt = "🔐 Approval required\n<b>bash</b>\n\n- command: touch a &amp; b &lt;c&gt;";
        assert_eq!(
            check("HTML", prompt).unwrap(),
            Ok(utf16_len("🔐 Approval required\nbash\n\n- command: touch a & b <c>"))
        );
        assert!(check("HTML", "<b>open").unwrap().is_err());
        assert!(check("HTML", "<b><i>x</b></i>").unwrap().is_err());
        assert!(check("HTML", "<div>x</div>").unwrap().is_err());
        assert_eq!(check("HTML", "a < b & c"), Some(Ok(9)));
        assert!(check("Fancy", "x").is_none());
    }
}
