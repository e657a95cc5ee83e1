//! HTML → compact semantic text for `http_request`: what a model needs to read a page and act on it (headings,
//! paragraphs, lists, links with their targets, tables as `a | b` rows, forms with their inputs), without
//! markup, classes, styles or scripts.
//!
//! The parser (`tl`) is fast and forgiving but knows nothing about raw-text elements, so `<script>`/`<style>`
//! blocks are cut out before parsing: a `<` inside JavaScript would otherwise open phantom tags.

use super::entities::decode_entities;
use std::borrow::Cow;

/// Tags whose whole content is dropped.
const SKIPPED: &[&str] = &["script", "style", "noscript", "template", "svg", "head", "iframe", "object", "canvas"];
/// Tags that start a new line.
const BLOCKS: &[&str] = &[
    "p",
    "div",
    "section",
    "article",
    "main",
    "header",
    "footer",
    "nav",
    "aside",
    "ul",
    "ol",
    "dl",
    "dt",
    "dd",
    "blockquote",
    "figure",
    "figcaption",
    "address",
    "details",
    "summary",
    "fieldset",
    "legend",
    "hr",
    "body",
    "html",
    "caption",
    "label",
];
/// Deeper nesting is flattened: pathological pages must not overflow the stack.
const MAX_DEPTH: usize = 96;

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Links, forms and tables kept.
    Compact,
    /// Text only.
    Plain,
}

pub fn render(html: &str, style: Style) -> String {
    let cleaned = strip_raw_blocks(html);
    let Ok(dom) = tl::parse(&cleaned, tl::ParserOptions::default()) else {
        return collapse_lines(&decode_entities(&cleaned));
    };
    let parser = dom.parser();
    let mut out = Renderer { out: String::new(), style, pre: 0 };
    if style == Style::Compact
        && let Some(title) = find_title(&dom)
    {
        out.out.push_str(&format!("# {title}\n\n"));
    }
    for handle in dom.children() {
        out.node(*handle, parser, 0);
    }
    collapse_lines(&out.out)
}

fn find_title(dom: &tl::VDom<'_>) -> Option<String> {
    let parser = dom.parser();
    let handle = dom.query_selector("title")?.next()?;
    let text = handle.get(parser)?.inner_text(parser);
    let text = collapse_spaces(&decode_entities(&text));
    (!text.is_empty()).then_some(text)
}

struct Renderer {
    out: String,
    style: Style,
    /// Inside `<pre>`: whitespace is kept.
    pre: usize,
}

impl Renderer {
    fn newline(&mut self) {
        if !self.out.is_empty() && !self.out.ends_with('\n') {
            self.out.push('\n');
        }
    }

    fn text(&mut self, raw: &str) {
        let decoded = decode_entities(raw);
        if self.pre > 0 {
            self.out.push_str(&decoded);
            return;
        }
        let collapsed = collapse_spaces(&decoded);
        if collapsed.is_empty() {
            if decoded.chars().next().is_some_and(char::is_whitespace) && !self.out.ends_with([' ', '\n']) {
                self.out.push(' ');
            }
            return;
        }
        let lead = decoded.starts_with(char::is_whitespace);
        if lead && !self.out.is_empty() && !self.out.ends_with([' ', '\n']) {
            self.out.push(' ');
        }
        self.out.push_str(&collapsed);
        if decoded.ends_with(char::is_whitespace) {
            self.out.push(' ');
        }
    }

    fn children(&mut self, tag: &tl::HTMLTag<'_>, parser: &tl::Parser<'_>, depth: usize) {
        for child in tag.children().top().iter() {
            self.node(*child, parser, depth + 1);
        }
    }

    /// The text inside a tag, rendered on its own.
    fn inner(&mut self, tag: &tl::HTMLTag<'_>, parser: &tl::Parser<'_>, depth: usize) -> String {
        let saved = std::mem::take(&mut self.out);
        self.children(tag, parser, depth);
        let inner = std::mem::replace(&mut self.out, saved);
        collapse_spaces(&inner)
    }

    fn node(&mut self, handle: tl::NodeHandle, parser: &tl::Parser<'_>, depth: usize) {
        let Some(node) = handle.get(parser) else {
            return;
        };
        let tag = match node {
            tl::Node::Raw(bytes) => return self.text(&bytes.as_utf8_str()),
            tl::Node::Comment(_) => return,
            tl::Node::Tag(tag) => tag,
        };
        if depth > MAX_DEPTH {
            // `all` is the flat list of descendants, so this needs no recursion however deep the page goes.
            let raw: Vec<String> = tag
                .children()
                .all(parser)
                .iter()
                .filter_map(|n| match n {
                    tl::Node::Raw(bytes) => Some(bytes.as_utf8_str().into_owned()),
                    _ => None,
                })
                .collect();
            for text in raw {
                self.text(&text);
            }
            return;
        }
        let name = tag.name().as_utf8_str().to_ascii_lowercase();
        let name = name.as_str();
        if SKIPPED.contains(&name) {
            return;
        }
        let compact = self.style == Style::Compact;
        match name {
            "br" => self.out.push('\n'),
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                let level = usize::from(name.as_bytes()[1] - b'0');
                let text = self.inner(tag, parser, depth);
                self.newline();
                self.out.push('\n');
                if compact {
                    self.out.push_str(&"#".repeat(level));
                    self.out.push(' ');
                }
                self.out.push_str(&text);
                self.out.push('\n');
            }
            "li" => {
                self.newline();
                self.out.push_str("- ");
                self.children(tag, parser, depth);
                self.newline();
            }
            "pre" => {
                self.newline();
                self.pre += 1;
                self.children(tag, parser, depth);
                self.pre -= 1;
                self.newline();
            }
            "a" if compact => {
                let text = self.inner(tag, parser, depth);
                match attr(tag, "href").filter(|h| !h.is_empty() && !h.starts_with("javascript:")) {
                    Some(href) if text.is_empty() => self.out.push_str(&format!("[{href}]({href})")),
                    Some(href) => self.out.push_str(&format!("[{text}]({href})")),
                    None => self.out.push_str(&text),
                }
            }
            "img" if compact => {
                if let Some(alt) = attr(tag, "alt").filter(|a| !a.is_empty()) {
                    self.out.push_str(&format!("[image: {alt}]"));
                }
            }
            "table" => {
                self.newline();
                self.children(tag, parser, depth);
                self.newline();
            }
            "tr" => {
                self.newline();
                let mut cells = Vec::new();
                for child in tag.children().top().iter() {
                    if let Some(tl::Node::Tag(cell)) = child.get(parser) {
                        let cell_name = cell.name().as_utf8_str().to_ascii_lowercase();
                        if cell_name == "td" || cell_name == "th" {
                            cells.push(self.inner(cell, parser, depth + 1));
                        }
                    }
                }
                self.out.push_str(&if compact { format!("| {} |", cells.join(" | ")) } else { cells.join("  ") });
                self.out.push('\n');
            }
            "form" if compact => {
                self.newline();
                let mut open = String::from("[form");
                push_attrs(&mut open, tag, &["action", "method", "name", "id"]);
                open.push(']');
                self.out.push_str(&open);
                self.out.push('\n');
                self.children(tag, parser, depth);
                self.newline();
                self.out.push_str("[/form]\n");
            }
            "input" if compact => {
                let mut text = String::from("[input");
                let kind = attr(tag, "type").unwrap_or_else(|| "text".into());
                text.push_str(&format!(" type={kind}"));
                push_attrs(&mut text, tag, &["name", "value", "placeholder", "id"]);
                for flag in ["checked", "required", "disabled"] {
                    if tag.attributes().contains(flag) {
                        text.push_str(&format!(" {flag}"));
                    }
                }
                text.push(']');
                self.text(" ");
                self.out.push_str(&text);
                self.out.push(' ');
            }
            "textarea" if compact => {
                let mut text = String::from("[textarea");
                push_attrs(&mut text, tag, &["name", "placeholder"]);
                text.push(']');
                let inner = self.inner(tag, parser, depth);
                self.out.push_str(&text);
                self.out.push_str(&inner);
                self.out.push_str("[/textarea] ");
            }
            "select" if compact => {
                let mut text = String::from("[select");
                push_attrs(&mut text, tag, &["name"]);
                text.push_str(": ");
                let mut options = Vec::new();
                for child in tag.children().all(parser) {
                    if let tl::Node::Tag(option) = child
                        && option.name().as_utf8_str().eq_ignore_ascii_case("option")
                    {
                        let label = collapse_spaces(&decode_entities(&option.inner_text(parser)));
                        let selected = if option.attributes().contains("selected") { "*" } else { "" };
                        options.push(format!("{label}{selected}"));
                    }
                }
                text.push_str(&options.join(" | "));
                text.push(']');
                self.out.push_str(&text);
                self.out.push(' ');
            }
            "button" if compact => {
                let inner = self.inner(tag, parser, depth);
                self.out.push_str(&format!("[button: {inner}] "));
            }
            _ if BLOCKS.contains(&name) => {
                self.newline();
                self.children(tag, parser, depth);
                self.newline();
            }
            _ => self.children(tag, parser, depth),
        }
    }
}

fn attr(tag: &tl::HTMLTag<'_>, name: &str) -> Option<String> {
    let value = tag.attributes().get(name)??;
    Some(collapse_spaces(&decode_entities(&value.as_utf8_str())))
}

fn push_attrs(out: &mut String, tag: &tl::HTMLTag<'_>, names: &[&str]) {
    for name in names {
        if let Some(value) = attr(tag, name) {
            if value.contains([' ', ']']) || value.is_empty() {
                out.push_str(&format!(" {name}=\"{value}\""));
            } else {
                out.push_str(&format!(" {name}={value}"));
            }
        }
    }
}

/// Cuts `<script>…</script>`, `<style>…</style>` and friends, case-insensitively. An unclosed block runs to the
/// end of the document, as in a browser.
fn strip_raw_blocks(html: &str) -> Cow<'_, str> {
    let lower = html.to_ascii_lowercase();
    if !["<script", "<style", "<noscript", "<template"].iter().any(|t| lower.contains(t)) {
        return Cow::Borrowed(html);
    }
    let mut out = String::with_capacity(html.len());
    let mut pos = 0;
    while pos < html.len() {
        let next = ["script", "style", "noscript", "template"]
            .iter()
            .filter_map(|t| find_open(&lower, pos, t).map(|at| (at, *t)))
            .min_by_key(|(at, _)| *at);
        let Some((start, tag)) = next else {
            out.push_str(&html[pos..]);
            break;
        };
        out.push_str(&html[pos..start]);
        let close = format!("</{tag}");
        pos = match lower[start..].find(&close) {
            Some(rel) => {
                let end = start + rel;
                lower[end..].find('>').map_or(html.len(), |gt| end + gt + 1)
            }
            None => html.len(),
        };
    }
    Cow::Owned(out)
}

/// `<tag` followed by whitespace, `>` or `/` (so `<scripts>` is not `<script`).
fn find_open(lower: &str, from: usize, tag: &str) -> Option<usize> {
    let needle = format!("<{tag}");
    let mut search = from;
    while let Some(rel) = lower[search..].find(&needle) {
        let at = search + rel;
        let after = lower.as_bytes().get(at + needle.len()).copied();
        if matches!(after, None | Some(b'>' | b'/' | b' ' | b'\t' | b'\n' | b'\r')) {
            return Some(at);
        }
        search = at + needle.len();
    }
    None
}

pub fn collapse_spaces(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Trims each line's trailing spaces and keeps at most one blank line in a row.
pub fn collapse_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.lines() {
        let line = line.trim_end();
        if line.trim().is_empty() {
            blank += 1;
            if blank > 1 || out.is_empty() {
                continue;
            }
            out.push('\n');
        } else {
            blank = 0;
            out.push_str(line);
            out.push('\n');
        }
    }
    out.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_are_cut_even_when_unclosed_or_oddly_cased() {
        let out = render("<p>keep</p><SCRIPT type=x>if (a<b) {}</ScRiPt><p>also</p><style>p{}", Style::Compact);
        assert_eq!(out, "keep\nalso");
        assert_eq!(render("<p>a</p><scripts>text</scripts>", Style::Plain), "a\ntext", "<scripts> is not <script>");
    }

    #[test]
    fn pre_keeps_whitespace_and_deep_nesting_is_safe() {
        let out = render("<pre>  indented\n    more</pre>", Style::Compact);
        assert_eq!(out, "  indented\n    more");
        let deep = format!("{}deep{}", "<div>".repeat(5000), "</div>".repeat(5000));
        assert_eq!(render(&deep, Style::Compact), "deep");
    }

    #[test]
    fn links_without_text_show_the_target_and_javascript_links_are_plain() {
        let out = render("<a href=\"/x\"></a> <a href=\"javascript:void(0)\">click</a>", Style::Compact);
        assert_eq!(out, "[/x](/x) click");
    }
}
