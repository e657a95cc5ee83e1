//! Markdown answers rendered as Telegram MarkdownV2 and split under the message limit.
//!
//! The model writes CommonMark/GFM; Telegram rejects a whole message when one reserved character is left
//! unescaped or one entity is unbalanced. So the answer is parsed (pulldown-cmark) and written back out by
//! [`Writer`], which escapes every text run and emits only entities it opened itself: whatever the input, the
//! output parses. What Telegram cannot show (headings, lists, tables, rules) becomes bold lines, bullets and
//! `pre` blocks.

use pulldown_cmark::{CodeBlockKind, Event, LinkType, Options, Parser, Tag, TagEnd};

/// Telegram's limit on one message's text, in characters after entity parsing (use chars of the rendered
/// MarkdownV2 text ≤ this, a safe over-estimate).
pub const MAX_MESSAGE_CHARS: usize = 4096;

/// What the format-repair prompt tells the model about MarkdownV2.
pub const REPAIR_INSTRUCTIONS: &str = r#"Telegram MarkdownV2 rules:
- In normal text put a backslash before each of these characters: _ * [ ] ( ) ~ ` > # + - = | { } . ! and before every backslash.
- Formatting: *bold*, _italic_, __underline__, ~strikethrough~, ||spoiler||, [text](https://example.com), `code`, ```language
code block``` and quote lines starting with >.
- Inside `code` and ``` blocks escape only ` and \. Inside the (...) of a link escape only ) and \.
- Close every marker you open; formatting may nest but not overlap, and code cannot contain formatting.
- There are no headings, lists or tables: write headings as *bold* lines, list items as "• item" or "1\. item", and tables inside a ``` block."#;

/// Characters Telegram reserves in normal MarkdownV2 text (the backslash included).
const RESERVED: &[char] =
    &['_', '*', '[', ']', '(', ')', '~', '`', '>', '#', '+', '-', '=', '|', '{', '}', '.', '!', '\\'];

/// The source lengths the splitter tries are capped at this many times the limit: markup that renders to
/// nothing (link definitions) is rare, and rendering the whole rest for every part would be quadratic.
const SOURCE_FACTOR: usize = 8;

/// `text` escaped so Telegram shows it literally in a MarkdownV2 message.
pub fn escape(text: &str) -> String {
    escape_with(text, |c| RESERVED.contains(&c))
}

/// One markdown answer as MarkdownV2.
pub fn to_markdown_v2(markdown: &str) -> String {
    let mut writer = Writer::default();
    for event in Parser::new_ext(markdown, options()) {
        writer.event(event);
    }
    writer.finish()
}

/// The markdown answer cut into parts at line breaks (paragraph breaks preferred, then line breaks, then spaces,
/// hard cut last) such that each part's MarkdownV2 is at most [`MAX_MESSAGE_CHARS`] chars, as
/// `(markdown source, MarkdownV2)` pairs. A fenced code block that must be cut is closed at the end of one part
/// and reopened (same fence line, so same language) at the start of the next: each source is markdown of its
/// own and its MarkdownV2 is `to_markdown_v2(source)`. The sources joined give the answer back plus those fence
/// lines; parts that would show nothing (blank, or only link definitions) are left out.
pub fn split_markdown(markdown: &str) -> Vec<(String, String)> {
    split_markdown_under(markdown, MAX_MESSAGE_CHARS)
}

/// Plain text cut at line breaks (else spaces, else hard) into parts of at most `limit` chars. Blank parts are
/// left out (Telegram refuses empty messages).
pub fn split_plain(text: &str, limit: usize) -> Vec<String> {
    let limit = limit.max(1);
    let mut parts = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let Some((hi, _)) = rest.char_indices().nth(limit) else {
            parts.push(rest);
            break;
        };
        let bytes = rest.as_bytes();
        let last = |lo: usize, wanted: u8| (lo + 1..=hi).rev().find(|&p| bytes[p - 1] == wanted);
        let cut = last(hi / 2, b'\n')
            .or_else(|| last(hi / 2, b' '))
            .or_else(|| last(0, b'\n'))
            .or_else(|| last(0, b' '))
            .unwrap_or(hi);
        parts.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    parts.into_iter().filter(|part| !part.trim().is_empty()).map(str::to_owned).collect()
}

fn options() -> Options {
    Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS
}

fn escape_with(text: &str, reserved: impl Fn(char) -> bool) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for c in text.chars() {
        if reserved(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Inside `code` and `pre` only these two are reserved.
fn escape_code(text: &str) -> String {
    escape_with(text, |c| c == '`' || c == '\\')
}

/// Inside the `(...)` of a link only these two are reserved.
fn escape_url(text: &str) -> String {
    escape_with(text, |c| c == ')' || c == '\\')
}

/// Telegram refuses a message whose text link has an address it does not accept, so only absolute web and
/// `tg://` addresses become links; anything else is shown as text.
fn linkable(url: &str) -> bool {
    let lower = url.to_ascii_lowercase();
    ["http://", "https://", "tg://"].iter().any(|scheme| lower.starts_with(scheme) && lower.len() > scheme.len())
        && !url.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// The `pre` language: the first word of the info string, without characters that could end the line or the
/// entity early.
fn code_language(info: &str) -> String {
    let word = info.split_whitespace().next().unwrap_or("");
    word.chars().filter(|c| c.is_ascii_alphanumeric() || "+-_#.".contains(*c)).collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    Bold,
    Italic,
    Strike,
}

impl Style {
    fn marker(self) -> char {
        match self {
            Style::Bold => '*',
            Style::Italic => '_',
            Style::Strike => '~',
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// A link or image being written.
enum LinkFrame {
    /// `[text](url)`; `text_start` is where the text begins in the output, to spot an empty text.
    Entity { url: String, text_start: usize },
    /// Shown as its text, with the address after it in parentheses when there is one worth showing.
    Plain { suffix: Option<String> },
}

#[derive(Default)]
struct TableBuffer {
    rows: Vec<Vec<String>>,
    cell: String,
}

impl TableBuffer {
    /// The table as aligned text for a `pre` block, with a rule under the header row.
    fn render(&self) -> String {
        let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let mut widths = vec![0; columns];
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut text = String::new();
        for (r, row) in self.rows.iter().enumerate() {
            text.push('|');
            for (i, width) in widths.iter().enumerate() {
                let cell = row.get(i).map_or("", String::as_str);
                let pad = width - cell.chars().count();
                text.push(' ');
                text.push_str(cell);
                text.extend(std::iter::repeat_n(' ', pad + 1));
                text.push('|');
            }
            text.push('\n');
            if r == 0 && self.rows.len() > 1 {
                text.push('|');
                for width in &widths {
                    text.extend(std::iter::repeat_n('-', width + 2));
                    text.push('|');
                }
                text.push('\n');
            }
        }
        text
    }
}

/// Turns pulldown-cmark events into MarkdownV2. Newlines are owed (`pending_newlines`) rather than written so
/// that block gaps collapse, nothing trails, and each new line of a quote gets its `>` when (and only when)
/// something is written on it.
#[derive(Default)]
struct Writer {
    out: String,
    pending_newlines: usize,
    mid_line: bool,
    line_quoted: bool,
    quote_depth: usize,
    /// How deep each [`Style`] is nested: Telegram cannot nest an entity in itself, so only the outermost
    /// writes markers.
    style_depth: [usize; 3],
    /// The markers at the very end of the output, oldest first: (style, opens, output length after it). They
    /// let an empty entity be dropped and `_a_` `_b_` be merged into `_ab_` (`__` would read as underline),
    /// even through a chain such as close-italic, close-bold, open-bold, open-italic.
    trailing_markers: Vec<(Style, bool, usize)>,
    links: Vec<LinkFrame>,
    lists: Vec<Option<u64>>,
    /// A bullet was just written: the item's first block goes on the bullet's line.
    fresh_item: bool,
    code_block: Option<(String, String)>,
    table: Option<TableBuffer>,
}

impl Writer {
    fn finish(mut self) -> String {
        let kept = self.out.trim_end_matches(['\n', ' ']).len();
        self.out.truncate(kept);
        self.out
    }

    fn event(&mut self, event: Event<'_>) {
        if self.table.is_some() {
            self.table_event(event);
            return;
        }
        if let Some((_, content)) = self.code_block.as_mut() {
            match event {
                Event::Text(text) => content.push_str(&text),
                Event::End(TagEnd::CodeBlock) => {
                    if let Some((language, content)) = self.code_block.take() {
                        self.pre(&language, &content);
                    }
                }
                _ => {}
            }
            return;
        }
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => self.text(&text),
            Event::Code(code) => self.inline_code(&code),
            Event::InlineMath(math) | Event::DisplayMath(math) => self.text(&math),
            Event::Html(html) | Event::InlineHtml(html) => self.text(&html),
            Event::FootnoteReference(name) => self.text(&format!("[{name}]")),
            Event::SoftBreak | Event::HardBreak => self.pending_newlines += 1,
            Event::Rule => {
                self.block_gap(1);
                self.flush(false);
                self.out.push_str("————");
            }
            Event::TaskListMarker(done) => {
                let fresh = self.fresh_item;
                self.flush(false);
                self.out.push_str(if done { "☑ " } else { "☐ " });
                self.fresh_item = fresh;
            }
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph | Tag::DefinitionListTitle | Tag::DefinitionListDefinition => self.block_gap(0),
            Tag::Heading { .. } => {
                self.block_gap(0);
                self.open(Style::Bold);
            }
            Tag::BlockQuote(_) => {
                self.block_gap(1);
                self.quote_depth += 1;
            }
            Tag::CodeBlock(kind) => {
                self.block_gap(1);
                let language = match kind {
                    CodeBlockKind::Fenced(info) => code_language(&info),
                    CodeBlockKind::Indented => String::new(),
                };
                self.code_block = Some((language, String::new()));
            }
            Tag::HtmlBlock | Tag::FootnoteDefinition(_) | Tag::DefinitionList | Tag::MetadataBlock(_) => {
                self.block_gap(1)
            }
            Tag::List(first) => {
                if self.lists.is_empty() {
                    self.block_gap(1);
                } else {
                    self.request_newlines(1);
                }
                self.lists.push(first);
            }
            Tag::Item => {
                self.request_newlines(1);
                self.flush(false);
                let indent = "  ".repeat(self.lists.len().saturating_sub(1));
                let bullet = match self.lists.last_mut() {
                    Some(Some(number)) => {
                        let bullet = format!("{indent}{number}\\. ");
                        *number += 1;
                        bullet
                    }
                    _ => format!("{indent}• "),
                };
                self.out.push_str(&bullet);
                self.fresh_item = true;
            }
            Tag::Table(_) => {
                self.block_gap(1);
                self.table = Some(TableBuffer::default());
            }
            // Only reached outside a table: cells are handled by `table_event`.
            Tag::TableHead | Tag::TableRow | Tag::TableCell => {}
            Tag::Emphasis => self.open(Style::Italic),
            Tag::Strong => self.open(Style::Bold),
            Tag::Strikethrough => self.open(Style::Strike),
            Tag::Superscript | Tag::Subscript => {}
            Tag::Link { link_type, dest_url, .. } | Tag::Image { link_type, dest_url, .. } => {
                self.start_link(link_type, &dest_url)
            }
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Heading(_) => self.close(Style::Bold),
            TagEnd::BlockQuote(_) => self.quote_depth = self.quote_depth.saturating_sub(1),
            TagEnd::List(_) => {
                self.lists.pop();
            }
            TagEnd::Emphasis => self.close(Style::Italic),
            TagEnd::Strong => self.close(Style::Bold),
            TagEnd::Strikethrough => self.close(Style::Strike),
            TagEnd::Link | TagEnd::Image => self.end_link(),
            _ => {}
        }
    }

    fn table_event(&mut self, event: Event<'_>) {
        let Some(table) = self.table.as_mut() else { return };
        match event {
            Event::Start(Tag::TableHead | Tag::TableRow) => table.rows.push(Vec::new()),
            Event::Start(Tag::TableCell) => table.cell.clear(),
            Event::End(TagEnd::TableCell) => {
                let cell = std::mem::take(&mut table.cell);
                match table.rows.last_mut() {
                    Some(row) => row.push(cell),
                    None => table.rows.push(vec![cell]),
                }
            }
            Event::End(TagEnd::Table) => {
                let text = table.render();
                self.table = None;
                self.pre("", &text);
            }
            Event::Text(text)
            | Event::Code(text)
            | Event::InlineHtml(text)
            | Event::Html(text)
            | Event::InlineMath(text)
            | Event::DisplayMath(text) => table.cell.push_str(&text),
            Event::SoftBreak | Event::HardBreak => table.cell.push(' '),
            Event::TaskListMarker(done) => table.cell.push_str(if done { "[x] " } else { "[ ] " }),
            _ => {}
        }
    }

    fn start_link(&mut self, link_type: LinkType, url: &str) {
        let inside_entity = self.links.iter().any(|frame| matches!(frame, LinkFrame::Entity { .. }));
        if inside_entity {
            // Telegram links cannot nest (an image inside a link): the inner one is only its text.
            self.links.push(LinkFrame::Plain { suffix: None });
        } else if linkable(url) {
            self.flush(false);
            self.out.push('[');
            self.links.push(LinkFrame::Entity { url: url.to_owned(), text_start: self.out.len() });
        } else {
            let shown =
                !matches!(link_type, LinkType::Email | LinkType::Autolink) && !url.is_empty() && !url.starts_with('#');
            self.links.push(LinkFrame::Plain { suffix: shown.then(|| url.to_owned()) });
        }
    }

    fn end_link(&mut self) {
        match self.links.pop() {
            Some(LinkFrame::Entity { url, text_start }) => {
                if self.out.len() == text_start {
                    self.out.push_str(&escape(&url));
                }
                self.out.push_str("](");
                self.out.push_str(&escape_url(&url));
                self.out.push(')');
            }
            Some(LinkFrame::Plain { suffix: Some(url) }) => self.text(&format!(" ({url})")),
            Some(LinkFrame::Plain { suffix: None }) | None => {}
        }
    }

    fn in_link_entity(&self) -> bool {
        self.links.iter().any(|frame| matches!(frame, LinkFrame::Entity { .. }))
    }

    fn text(&mut self, text: &str) {
        for (i, line) in text.split('\n').enumerate() {
            if i > 0 {
                self.pending_newlines += 1;
            }
            if !line.is_empty() {
                self.flush(false);
                self.out.push_str(&escape(line));
            }
        }
    }

    fn inline_code(&mut self, code: &str) {
        if self.in_link_entity() {
            // Telegram does not take code inside a text link; keep the words.
            self.text(code);
        } else if !code.is_empty() {
            self.flush(false);
            self.out.push('`');
            self.out.push_str(&escape_code(code));
            self.out.push('`');
        }
    }

    /// A `pre` block. Inside a quote it goes out unquoted: a `>` before each line would land inside the code.
    fn pre(&mut self, language: &str, content: &str) {
        if content.trim().is_empty() {
            return;
        }
        self.flush(true);
        self.out.push_str("```");
        self.out.push_str(language);
        self.out.push('\n');
        self.out.push_str(&escape_code(content));
        if !content.ends_with('\n') {
            self.out.push('\n');
        }
        self.out.push_str("```");
    }

    fn open(&mut self, style: Style) {
        let depth = &mut self.style_depth[style.index()];
        *depth += 1;
        if *depth == 1 {
            self.flush(false);
            self.marker(style, true);
        }
    }

    fn close(&mut self, style: Style) {
        let depth = &mut self.style_depth[style.index()];
        if *depth == 0 {
            return;
        }
        *depth -= 1;
        if *depth == 0 {
            self.marker(style, false);
        }
    }

    /// Writes a marker, unless it undoes the marker just before it (an empty entity, or the same entity closed
    /// and reopened): then both go.
    fn marker(&mut self, style: Style, opens: bool) {
        if self.trailing_markers.last().is_some_and(|&(_, _, end)| end != self.out.len()) {
            self.trailing_markers.clear();
        }
        if self.trailing_markers.last().is_some_and(|&(last, last_opens, _)| last == style && last_opens != opens) {
            self.out.pop();
            self.trailing_markers.pop();
            return;
        }
        self.out.push(style.marker());
        self.trailing_markers.push((style, opens, self.out.len()));
    }

    fn request_newlines(&mut self, count: usize) {
        if !self.out.is_empty() {
            self.pending_newlines = self.pending_newlines.max(count);
        }
    }

    /// A blank line before a block, except for the first block of a list item, which follows the bullet (on
    /// the same line, or on the next one for blocks that must start a line).
    fn block_gap(&mut self, in_fresh_item: usize) {
        let count = if self.fresh_item { in_fresh_item } else { 2 };
        self.request_newlines(count);
    }

    /// Writes the owed newlines and the quote marker of the line about to get content. `raw` is for `pre`
    /// blocks, whose lines are never quoted.
    fn flush(&mut self, raw: bool) {
        if self.out.is_empty() {
            self.pending_newlines = 0;
        }
        for i in 0..self.pending_newlines {
            self.out.push('\n');
            let previous_quoted = self.line_quoted;
            self.line_quoted = false;
            self.mid_line = false;
            let blank_line = i + 1 < self.pending_newlines;
            if blank_line && previous_quoted && self.quote_depth > 0 && !raw {
                self.out.push('>');
                self.line_quoted = true;
            }
        }
        self.pending_newlines = 0;
        if !self.mid_line {
            if self.quote_depth > 0 && !raw {
                self.out.push('>');
                self.line_quoted = true;
            }
            self.mid_line = true;
        }
        self.fresh_item = false;
    }
}

/// A fenced code block of the source, with the byte offsets the splitter needs.
struct Fence {
    start: usize,
    /// Just after the opening line's newline: where the content starts.
    open_end: usize,
    /// Where the closing fence line starts (`end` when the block runs to the end unclosed).
    close_start: usize,
    end: usize,
    /// The opening line (container prefix, fence and info string), newline included.
    opening: String,
    /// The closing line, without newline.
    closing: String,
}

impl Fence {
    /// A cut here leaves code on both sides: close the block before it and reopen it after.
    fn inside(&self, at: usize) -> bool {
        self.open_end <= at && at < self.close_start
    }

    /// A cut here would split a fence line itself.
    fn splits_fence_line(&self, at: usize) -> bool {
        (self.start < at && at <= self.open_end) || (self.close_start <= at && at < self.end)
    }
}

fn fences(markdown: &str) -> Vec<Fence> {
    let mut found = Vec::new();
    for (event, range) in Parser::new_ext(markdown, options()).into_offset_iter() {
        let Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(_))) = event else { continue };
        let (start, end) = (range.start, range.end);
        let block = &markdown[start..end];
        let open_end = block.find('\n').map_or(end, |i| start + i + 1);
        let line_start = markdown[..start].rfind('\n').map_or(0, |i| i + 1);
        let mut opening = markdown[line_start..open_end].to_owned();
        if !opening.ends_with('\n') {
            opening.push('\n');
        }
        let fence_char = block.chars().next().unwrap_or('`');
        let fence: String = block.chars().take_while(|&c| c == fence_char).collect();
        let body = &markdown[open_end..end];
        let last_start = body.trim_end_matches('\n').rfind('\n').map_or(0, |i| i + 1);
        let last_line = body[last_start..].trim_end();
        let bare = last_line.trim_start_matches(|c: char| c.is_whitespace() || c == '>');
        let closed = !body.is_empty() && bare.starts_with(&fence) && bare.chars().all(|c| c == fence_char);
        let (close_start, closing) =
            if closed { (open_end + last_start, last_line.to_owned()) } else { (end, fence.clone()) };
        found.push(Fence { start, open_end, close_start, end, opening, closing });
    }
    found
}

fn split_markdown_under(markdown: &str, limit: usize) -> Vec<(String, String)> {
    let fences = fences(markdown);
    let mut parts: Vec<(String, String)> = Vec::new();
    let mut start = 0;
    while start < markdown.len() {
        if markdown[start..].trim().is_empty() {
            // Trailing blank lines belong to the last part (so nothing is lost) but change nothing shown.
            if let Some((source, _)) = parts.last_mut() {
                source.push_str(&markdown[start..]);
            }
            break;
        }
        let (end, source, rendered) = next_part(markdown, start, &fences, limit);
        if !rendered.is_empty() {
            parts.push((source, rendered));
        }
        start = end;
    }
    parts
}

/// The markdown of `start..end` made self-contained: a code block cut at either end is reopened / closed.
fn part_source(markdown: &str, start: usize, end: usize, fences: &[Fence]) -> String {
    let mut source = String::new();
    if let Some(fence) = fences.iter().find(|fence| fence.inside(start)) {
        source.push_str(&fence.opening);
    }
    source.push_str(&markdown[start..end]);
    if let Some(fence) = fences.iter().find(|fence| fence.inside(end)) {
        if !source.ends_with('\n') {
            source.push('\n');
        }
        source.push_str(&fence.closing);
    }
    source
}

/// The part starting at `start`: the longest source that fits is found by bisection (rendered length grows
/// with source length, nearly always), then the best break before that point is taken and checked.
fn next_part(markdown: &str, start: usize, fences: &[Fence], limit: usize) -> (usize, String, String) {
    let render = |end: usize| {
        let source = part_source(markdown, start, end, fences);
        let rendered = to_markdown_v2(&source);
        (source, rendered)
    };
    let fits = |rendered: &str| rendered.chars().count() <= limit;
    let max_chars = limit.saturating_mul(SOURCE_FACTOR).max(1);
    let ends: Vec<usize> =
        markdown[start..].char_indices().map(|(i, c)| start + i + c.len_utf8()).take(max_chars + 1).collect();
    let Some(&first_end) = ends.first() else {
        return (markdown.len(), String::new(), String::new());
    };
    if ends.len() <= max_chars {
        let (source, rendered) = render(markdown.len());
        if fits(&rendered) {
            return (markdown.len(), source, rendered);
        }
    }
    let (mut lo, mut hi, mut best) = (0, ends.len().min(max_chars), None);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if fits(&render(ends[mid]).1) {
            best = Some(ends[mid]);
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    let Some(mut max_end) = best else {
        // Not even one character fits (cannot happen with Telegram's limit); move on regardless.
        let (source, rendered) = render(first_end);
        return (first_end, source, rendered);
    };
    loop {
        let cut = choose_cut(markdown, start, max_end, fences);
        let (source, rendered) = render(cut);
        if fits(&rendered) || cut <= first_end {
            return (cut, source, rendered);
        }
        max_end = markdown[..cut].char_indices().next_back().map_or(first_end, |(i, _)| i).max(first_end);
    }
}

/// The best break in `start..=max_end`: a paragraph break, else a line break, else a space — in the second half
/// of the range if there is one there (so parts are not needlessly short), else anywhere; a hard cut last.
/// Never inside a fence line.
fn choose_cut(markdown: &str, start: usize, max_end: usize, fences: &[Fence]) -> usize {
    let bytes = markdown.as_bytes();
    let allowed = |p: usize| !fences.iter().any(|fence| fence.splits_fence_line(p));
    let paragraph = |p: usize| bytes[p - 1] == b'\n' && follows_blank_line(bytes, p - 1);
    let line = |p: usize| bytes[p - 1] == b'\n';
    let space = |p: usize| bytes[p - 1] == b' ';
    let tiers: [&dyn Fn(usize) -> bool; 3] = [&paragraph, &line, &space];
    for lo in [start + (max_end - start) / 2, start] {
        for tier in tiers {
            if let Some(p) = (lo + 1..=max_end).rev().find(|&p| tier(p) && allowed(p)) {
                return p;
            }
        }
    }
    let mut cut = max_end;
    if let Some(fence) = fences.iter().find(|fence| fence.splits_fence_line(cut) && fence.start > start) {
        cut = fence.start;
    }
    cut
}

/// Whether the newline at `newline` ends a blank line (only whitespace since the previous newline).
fn follows_blank_line(bytes: &[u8], newline: usize) -> bool {
    for &b in bytes[..newline].iter().rev() {
        match b {
            b'\n' => return true,
            b' ' | b'\t' | b'\r' => {}
            _ => return false,
        }
    }
    false
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::markdown::*;

    /// Walks MarkdownV2 the way Telegram's parser does and fails on what Telegram would refuse: a reserved
    /// character that is neither escaped nor a marker, a bad escape, entities that overlap, stay open, are
    /// empty, or read as underline (`__`), a link inside a link, a `>` not at a line start.
    fn validate(text: &str) -> Result<(), String> {
        let chars: Vec<char> = text.chars().collect();
        let mut stack: Vec<(&str, usize)> = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            let at_line_start = i == 0 || chars[i - 1] == '\n';
            match c {
                '\\' => {
                    let next = chars.get(i + 1).ok_or("dangling backslash")?;
                    if !(1..=126).contains(&u32::from(*next)) {
                        return Err(format!("bad escape at {i}"));
                    }
                    i += 2;
                    continue;
                }
                '`' => {
                    i = skip_code(&chars, i)?;
                    continue;
                }
                '*' | '~' | '_' | '|' => {
                    let marker = match c {
                        '*' => "*",
                        '~' => "~",
                        '_' if chars.get(i + 1) == Some(&'_') => return Err(format!("`__` (underline) at {i}")),
                        '_' => "_",
                        _ if chars.get(i + 1) == Some(&'|') => "||",
                        _ => return Err(format!("lone `|` at {i}")),
                    };
                    if stack.last().map(|(m, _)| *m) == Some(marker) {
                        let (_, opened) = stack.pop().unwrap();
                        if opened + marker.len() == i {
                            return Err(format!("empty entity {marker} at {i}"));
                        }
                    } else if stack.iter().any(|(m, _)| *m == marker) {
                        return Err(format!("overlapping {marker} at {i}"));
                    } else {
                        stack.push((marker, i));
                    }
                    i += marker.len();
                    continue;
                }
                '[' => {
                    if stack.iter().any(|(m, _)| *m == "[") {
                        return Err(format!("link inside link at {i}"));
                    }
                    stack.push(("[", i));
                }
                ']' => {
                    if stack.pop().map(|(m, _)| m) != Some("[") {
                        return Err(format!("`]` does not close the innermost entity at {i}"));
                    }
                    if chars.get(i + 1) != Some(&'(') {
                        return Err(format!("`]` without `(` at {i}"));
                    }
                    i += 2;
                    loop {
                        match chars.get(i) {
                            None => return Err("unterminated link address".into()),
                            Some('\\') => {
                                if !matches!(chars.get(i + 1), Some(')' | '\\')) {
                                    return Err(format!("needless escape in link address at {i}"));
                                }
                                i += 2;
                            }
                            Some(')') => break,
                            Some(_) => i += 1,
                        }
                    }
                }
                '>' if at_line_start => {}
                '>' | '(' | ')' | '#' | '+' | '-' | '=' | '{' | '}' | '.' | '!' => {
                    return Err(format!("unescaped {c:?} at {i} in {text:?}"));
                }
                _ => {}
            }
            i += 1;
        }
        match stack.last() {
            Some((marker, at)) => Err(format!("{marker} opened at {at} is never closed")),
            None => Ok(()),
        }
    }

    /// Skips a `code` or ```pre``` entity starting at `i`, checking its escapes; returns the index after it.
    fn skip_code(chars: &[char], mut i: usize) -> Result<usize, String> {
        let pre = chars[i..].starts_with(&['`', '`', '`']);
        if pre {
            i += 3;
            while let Some(&c) = chars.get(i) {
                if c == '\n' {
                    break;
                }
                if c == '`' || c == '\\' {
                    return Err(format!("bad pre language at {i}"));
                }
                i += 1;
            }
        } else {
            i += 1;
        }
        let opened = i;
        loop {
            match chars.get(i) {
                None => return Err("unterminated code".into()),
                Some('\\') => {
                    if !matches!(chars.get(i + 1), Some('`' | '\\')) {
                        return Err(format!("needless escape in code at {i}"));
                    }
                    i += 2;
                }
                Some('`') if !pre => {
                    return if i == opened { Err("empty code".into()) } else { Ok(i + 1) };
                }
                Some('`') => {
                    return if chars[i..].starts_with(&['`', '`', '`']) {
                        Ok(i + 3)
                    } else {
                        Err(format!("lone backtick in pre at {i}"))
                    };
                }
                Some(_) => i += 1,
            }
        }
    }

    #[test]
    fn validator_catches_what_telegram_refuses() {
        for bad in ["a.b", "*a", "_a__b_", "*a _b* c_", "x > y", "`a\\b`", "[a](u", "[a]b", "**", "|x", "```\nx"] {
            assert!(validate(bad).is_err(), "{bad:?}");
        }
        for good in ["[a](u\\)x)", "||s||", "*a _b_ c*", ">q\n>r", "`a\\\\b\\``", "```py\nx\n```", "a\\.b"] {
            validate(good).unwrap_or_else(|e| panic!("{good:?}: {e}"));
        }
    }

    fn render(markdown: &str) -> String {
        let out = to_markdown_v2(markdown);
        validate(&out).unwrap_or_else(|e| panic!("{e}\ninput: {markdown:?}\noutput: {out:?}"));
        out
    }

    #[test]
    fn escape_covers_every_reserved_character() {
        let all = "_*[]()~`>#+-=|{}.!\\";
        let escaped = escape(all);
        assert_eq!(escaped, "\\_\\*\\[\\]\\(\\)\\~\\`\\>\\#\\+\\-\\=\\|\\{\\}\\.\\!\\\\");
        assert_eq!(escape("plain text, ok? 42 é 🙂"), "plain text, ok? 42 é 🙂");
        validate(&escaped).unwrap();
    }

    #[test]
    fn plain_text_is_escaped() {
        assert_eq!(
            render("Hello. 1 + 1 = 2! (really) x_y a|b {c} #tag"),
            "Hello\\. 1 \\+ 1 \\= 2\\! \\(really\\) x\\_y a\\|b \\{c\\} \\#tag"
        );
    }

    #[test]
    fn emphasis_code_and_links() {
        assert_eq!(render("**bold** and *italic* and ~~gone~~"), "*bold* and _italic_ and ~gone~");
        assert_eq!(render("use `a.b()` here"), "use `a.b()` here");
        assert_eq!(render("[the docs](https://example.com/a_b)"), "[the docs](https://example.com/a_b)");
        assert_eq!(render("*italic **bold inside** end*"), "_italic *bold inside* end_");
        assert_eq!(render("**bold *italic* bold**"), "*bold _italic_ bold*");
        assert_eq!(render("**a *b **c** d* e**"), "*a _b c d_ e*");
        assert_eq!(render("[**x** y](https://e.x)"), "[*x* y](https://e.x)");
    }

    #[test]
    fn adjacent_italics_do_not_read_as_underline() {
        assert_eq!(render("*a*_b_"), "_ab_");
        assert_eq!(render("*a*_b_ c"), "_ab_ c");
    }

    #[test]
    fn fenced_code_keeps_its_language_and_escapes_only_backticks_and_backslashes() {
        let out = render("```rust\nlet s = \"a\\\\b\"; // `x` *y*\n```");
        assert_eq!(out, "```rust\nlet s = \"a\\\\\\\\b\"; // \\`x\\` *y*\n```");
        assert_eq!(render("    indented(code)\n"), "```\nindented(code)\n```");
        assert_eq!(render("``a`b\\c``"), "`a\\`b\\\\c`");
    }

    #[test]
    fn link_address_with_parenthesis_is_escaped() {
        assert_eq!(
            render("[wiki](<https://en.wikipedia.org/wiki/Rust_(language)>)"),
            "[wiki](https://en.wikipedia.org/wiki/Rust_(language\\))"
        );
        assert_eq!(render("[x](https://a.b/c\\\\d)"), "[x](https://a.b/c\\\\d)");
    }

    #[test]
    fn odd_links_and_images() {
        assert_eq!(render("![a cat](https://e.x/cat.png)"), "[a cat](https://e.x/cat.png)");
        assert_eq!(render("[](https://e.x)"), "[https://e\\.x](https://e.x)");
        assert_eq!(render("[rel](docs/a.md)"), "rel \\(docs/a\\.md\\)");
        assert_eq!(render("[top](#top)"), "top");
        assert_eq!(render("<https://e.x>"), "[https://e\\.x](https://e.x)");
        assert_eq!(render("<me@e.x>"), "me@e\\.x");
        assert_eq!(render("[![alt](https://i.x)](https://l.x)"), "[alt](https://l.x)");
        assert_eq!(render("[`code` link](https://l.x)"), "[code link](https://l.x)");
    }

    #[test]
    fn headings_lists_and_rules() {
        assert_eq!(render("# Title\n\nText."), "*Title*\n\nText\\.");
        assert_eq!(render("## A *b*"), "*A _b_*");
        assert_eq!(render("- one\n- two\n  - deep\n- three"), "• one\n• two\n  • deep\n• three");
        assert_eq!(render("1. first\n2. second"), "1\\. first\n2\\. second");
        assert_eq!(render("3. c\n4. d"), "3\\. c\n4\\. d");
        assert_eq!(render("- a\n\n- b\n\n  more"), "• a\n• b\n\nmore");
        assert_eq!(render("- [ ] todo\n- [x] done"), "• ☐ todo\n• ☑ done");
        assert_eq!(render("above\n\n---\n\nbelow"), "above\n\n————\n\nbelow");
        assert_eq!(render("Intro:\n- a"), "Intro:\n\n• a");
    }

    #[test]
    fn quotes() {
        assert_eq!(render("> quoted *text*\n> more"), ">quoted _text_\n>more");
        assert_eq!(render("before\n\n> a\n>\n> b\n\nafter"), "before\n\n>a\n>\n>b\n\nafter");
        assert_eq!(render("> outer\n> > inner"), ">outer\n>\n>inner");
        assert_eq!(render("> ```\n> code\n> ```\n> after"), "```\ncode\n```\n\n>after");
    }

    #[test]
    fn tables_become_pre_blocks() {
        let out = render("| name | value |\n|---|---|\n| `a` | *1.5* |\n| long name | x |");
        assert_eq!(
            out,
            "```\n| name      | value |\n|-----------|-------|\n| a         | 1.5   |\n| long name | x     |\n```"
        );
    }

    #[test]
    fn breaks_and_html() {
        assert_eq!(render("line one\nline two  \nline three"), "line one\nline two\nline three");
        assert_eq!(
            render("<div>\n<b>hi</b>\n</div>\n\nx <i>y</i>"),
            "<div\\>\n<b\\>hi</b\\>\n</div\\>\n\nx <i\\>y</i\\>"
        );
        assert_eq!(render(""), "");
        assert_eq!(render("\n\n  \n"), "");
    }

    #[test]
    fn unbalanced_markers_are_literal() {
        assert_eq!(render("2 * 3 = 6 and a_b_c"), "2 \\* 3 \\= 6 and a\\_b\\_c");
        assert_eq!(render("**not closed"), "\\*\\*not closed");
        assert_eq!(render("[not a link"), "\\[not a link");
        assert_eq!(render("`not code"), "\\`not code");
    }

    /// A tiny xorshift generator: the property test needs variety, not quality.
    struct Random(u64);

    impl Random {
        fn next(&mut self, bound: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % bound as u64) as usize
        }
    }

    const PIECES: &[&str] = &[
        "*",
        "**",
        "_",
        "__",
        "~",
        "~~",
        "`",
        "```",
        "[",
        "]",
        "(",
        ")",
        "](",
        "](https://e.x/(a)",
        "![",
        "<",
        ">",
        "> ",
        "#",
        "# ",
        "+",
        "- ",
        "1. ",
        "=",
        "|",
        "||",
        "{",
        "}",
        ".",
        "!",
        "\\",
        "\n",
        "\n\n",
        " ",
        "a",
        "word",
        "é",
        "🙂",
        "<b>",
        "</b>",
        "http://x.y",
        "    ",
        "---",
        "| a | b |\n|---|---|\n",
        "- [ ] ",
        "\t",
        "\\*",
    ];

    fn random_markdown(random: &mut Random) -> String {
        let len = 1 + random.next(60);
        (0..len).map(|_| PIECES[random.next(PIECES.len())]).collect()
    }

    #[test]
    fn random_inputs_always_render_valid_markdown_v2() {
        let fixed = [
            "*a _b* c_",
            "**a *b** c*",
            "_a **b_ c**",
            "[a *b](https://x.y) c*",
            "***",
            "*** x ***",
            "___x___",
            "**__x__**",
            "*a*_b_*c*",
            "~~a~~~~b~~",
            "> **a\n> b**",
            "- *a\n- b*",
            "[a](https://x.y/a)b)c",
            "`` ` ``",
            "```\n```",
            "```py\n\n```",
            "> ```\n> x",
            "# \n## *",
            "\\",
            "a\\",
            "* * *",
            "*\n*",
            "[x]: https://ref.x\n\n[x] and [y][x]",
        ];
        for input in fixed {
            render(input);
        }
        let mut random = Random(0x9E37_79B9_7F4A_7C15);
        for _ in 0..3000 {
            let input = random_markdown(&mut random);
            render(&input);
        }
    }

    #[test]
    fn random_inputs_split_into_valid_parts_under_the_limit() {
        let mut random = Random(42);
        for _ in 0..120 {
            let input: String = (0..8).map(|_| random_markdown(&mut random)).collect::<Vec<_>>().join("\n\n");
            for (source, rendered) in split_markdown_under(&input, 120) {
                assert!(rendered.chars().count() <= 120, "{rendered:?}");
                assert_eq!(to_markdown_v2(&source), rendered);
                validate(&rendered).unwrap_or_else(|e| panic!("{e}\nsource: {source:?}\noutput: {rendered:?}"));
            }
        }
    }

    fn long_answer() -> String {
        let mut answer = String::new();
        for i in 0..12 {
            answer.push_str(&format!(
                "Paragraph {i} says **something** useful about `step_{i}` (see [docs](https://e.x/{i})).\n\
                 It has a second line with symbols: a+b=c, x.y!\n\n"
            ));
        }
        answer.push_str("```python\n");
        for i in 0..170 {
            answer.push_str(&format!("print(\"line {i}: a `tick` and a \\\\ backslash\")\n"));
        }
        answer.push_str("```\n\n");
        for i in 0..12 {
            answer.push_str(&format!("Closing paragraph {i} with *emphasis* and a list:\n\n- item {i}\n- item b\n\n"));
        }
        answer
    }

    fn without_fences_and_space(text: &str) -> String {
        text.replace("```python", "").replace("```", "").chars().filter(|c| !c.is_whitespace()).collect()
    }

    #[test]
    fn long_answer_splits_under_the_limit_and_reopens_the_code_block() {
        let answer = long_answer();
        assert!(answer.chars().count() > 10_000, "{}", answer.chars().count());
        let parts = split_markdown(&answer);
        assert!(parts.len() >= 3, "{}", parts.len());
        for (source, rendered) in &parts {
            assert!(rendered.chars().count() <= MAX_MESSAGE_CHARS);
            assert_eq!(&to_markdown_v2(source), rendered);
            validate(rendered).unwrap();
        }
        let cut_in_code = parts.windows(2).any(|pair| {
            pair[0].0.trim_end().ends_with("```")
                && pair[0].0.contains("print(")
                && pair[1].0.starts_with("```python\nprint(")
                && pair[1].1.starts_with("```python\nprint(")
        });
        assert!(cut_in_code, "{:#?}", parts.iter().map(|p| &p.0).collect::<Vec<_>>());
        let joined: String = parts.iter().map(|(source, _)| source.as_str()).collect();
        assert_eq!(without_fences_and_space(&joined), without_fences_and_space(&answer));
        // Every cut but those in the code block falls on a paragraph break.
        for (source, _) in &parts[..parts.len() - 1] {
            assert!(source.ends_with("\n\n") || source.ends_with("```"), "{source:?}");
        }
    }

    #[test]
    fn short_answer_is_one_part() {
        let parts = split_markdown("Just *one* line.\n\n");
        assert_eq!(parts, vec![("Just *one* line.\n\n".to_owned(), "Just _one_ line\\.".to_owned())]);
        assert!(split_markdown("").is_empty());
        assert!(split_markdown(" \n\n").is_empty());
    }

    #[test]
    fn a_long_line_without_breaks_is_cut_hard() {
        let answer = "x".repeat(10_000);
        let parts = split_markdown(&answer);
        assert!(parts.iter().all(|(_, rendered)| rendered.chars().count() <= MAX_MESSAGE_CHARS));
        let joined: String = parts.iter().map(|(source, _)| source.as_str()).collect();
        assert_eq!(joined, answer);
        // Escaping doubles the length of reserved characters; the parts still fit.
        let dots = ".".repeat(10_000);
        let parts = split_markdown(&dots);
        assert!(parts.iter().all(|(_, rendered)| rendered.chars().count() <= MAX_MESSAGE_CHARS));
        assert_eq!(parts.iter().map(|(source, _)| source.len()).sum::<usize>(), 10_000);
    }

    #[test]
    fn split_plain_prefers_line_breaks_then_spaces() {
        assert_eq!(split_plain("short", 10), vec!["short"]);
        assert_eq!(split_plain("aaaa\nbbbb\ncccc", 10), vec!["aaaa\nbbbb\n", "cccc"]);
        assert_eq!(split_plain("aaa bbb ccc ddd", 8), vec!["aaa bbb ", "ccc ddd"]);
        assert_eq!(split_plain("abcdefghij", 4), vec!["abcd", "efgh", "ij"]);
        assert_eq!(split_plain("ééééé", 2), vec!["éé", "éé", "é"]);
        assert!(split_plain("", 10).is_empty());
        let text = "word ".repeat(3000);
        let parts = split_plain(&text, 4096);
        assert!(parts.iter().all(|part| part.chars().count() <= 4096));
        assert_eq!(parts.concat(), text);
    }

    #[test]
    fn repair_instructions_name_the_reserved_characters() {
        for c in RESERVED {
            assert!(REPAIR_INSTRUCTIONS.contains(*c), "{c}");
        }
    }
}
