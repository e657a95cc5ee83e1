use crate::files::{Found, ManagedPath, ManagedRoot, WalkOptions, io_error, open_regular, walk_files};
use cap_std::fs::Dir;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use minibot_agent::{Tool, ToolContext, ToolError, ToolResult};
use minibot_config::GrepSection;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const MAX_PATTERN_CHARS: usize = 1000;
const MAX_CONTEXT_LINES: u64 = 20;
/// Longer lines are cut in results: a minified file would otherwise put megabytes into one match.
const MAX_LINE_CHARS: usize = 500;
/// Compiled-regex memory bound, so a pathological pattern fails fast instead of eating memory.
const REGEX_SIZE_LIMIT: usize = 10 * 1024 * 1024;

pub struct Grep {
    root: Arc<ManagedRoot>,
    max_matches: u64,
    max_file_size: u64,
}

impl Grep {
    pub fn new(root: Arc<ManagedRoot>, config: &GrepSection) -> Self {
        Self { root, max_matches: u64::from(config.max_matches), max_file_size: config.max_file_size_bytes.bytes() }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    recursive: Option<bool>,
    #[serde(default)]
    ignore_case: Option<bool>,
    #[serde(default)]
    fixed_string: Option<bool>,
    #[serde(default)]
    include_hidden: Option<bool>,
    #[serde(default)]
    context_before: Option<u64>,
    #[serde(default)]
    context_after: Option<u64>,
    #[serde(default)]
    max_matches: Option<u64>,
}

/// A search, independent of the tool (the benchmark drives it directly).
#[derive(Debug, Clone)]
pub struct GrepOptions {
    pub pattern: String,
    pub fixed_string: bool,
    pub ignore_case: bool,
    pub include_hidden: bool,
    pub recursive: bool,
    pub context_before: usize,
    pub context_after: usize,
    pub max_matches: usize,
    pub max_file_size: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct GrepMatch {
    pub path: String,
    pub line: u64,
    #[serde(rename = "match")]
    pub text: String,
    pub context_before: Vec<String>,
    pub context_after: Vec<String>,
}

#[derive(Debug, Clone, Default)]
pub struct GrepOutcome {
    pub matches: Vec<GrepMatch>,
    pub files_scanned: u64,
    pub files_skipped: u64,
    pub truncated: bool,
    /// What the folder walk left out past its depth and entry caps, for the model; `None` when it was complete.
    pub notice: Option<String>,
}

impl Tool for Grep {
    type Args = Args;

    fn name(&self) -> &str {
        "grep"
    }

    fn description(&self) -> String {
        format!(
            "Search managed files for a regular expression (Rust regex syntax) or, with fixed_string=true, a plain \
             string. Searches a file or a folder (recursive by default; hidden files skipped unless \
             include_hidden). Returns at most {} matches with optional context lines.",
            self.max_matches
        )
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": { "type": "string" },
                "path": { "type": ["string", "null"], "description": "File or folder relative to the managed root (default the root)." },
                "recursive": { "type": ["boolean", "null"] },
                "ignore_case": { "type": ["boolean", "null"] },
                "fixed_string": { "type": ["boolean", "null"] },
                "include_hidden": { "type": ["boolean", "null"] },
                "context_before": { "type": ["integer", "null"], "minimum": 0, "maximum": MAX_CONTEXT_LINES },
                "context_after": { "type": ["integer", "null"], "minimum": 0, "maximum": MAX_CONTEXT_LINES },
                "max_matches": { "type": ["integer", "null"], "minimum": 1, "maximum": self.max_matches }
            },
            "required": ["pattern"],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, _ctx: &ToolContext) -> ToolResult {
        if args.pattern.is_empty() || args.pattern.chars().count() > MAX_PATTERN_CHARS {
            return Err(ToolError::invalid_arguments(format!("pattern must be 1 to {MAX_PATTERN_CHARS} characters")));
        }
        let target = self.root.resolve(args.path.as_deref().unwrap_or(""))?;
        let start = open_target(&self.root, &target)?;
        let options = GrepOptions {
            pattern: args.pattern.clone(),
            fixed_string: args.fixed_string.unwrap_or(false),
            ignore_case: args.ignore_case.unwrap_or(false),
            include_hidden: args.include_hidden.unwrap_or(false),
            recursive: args.recursive.unwrap_or(true),
            context_before: args.context_before.unwrap_or(0).min(MAX_CONTEXT_LINES) as usize,
            context_after: args.context_after.unwrap_or(0).min(MAX_CONTEXT_LINES) as usize,
            // The caller may ask for fewer matches, never more than the operator allowed.
            max_matches: args.max_matches.unwrap_or(self.max_matches).clamp(1, self.max_matches) as usize,
            max_file_size: self.max_file_size,
        };
        let shown = shown_prefix(&target);
        let job_options = options.clone();
        let outcome = tokio::task::spawn_blocking(move || search_start(start, &shown, &job_options))
            .await
            .map_err(|e| ToolError::Fatal(format!("grep worker failed: {e}")))??;
        let mut out = json!({
            "ok": true,
            "pattern": options.pattern,
            "path": target.display(),
            "path_absolute": target.absolute.display().to_string(),
            "fixed_string": options.fixed_string,
            "ignore_case": options.ignore_case,
            "max_matches": options.max_matches,
            "count": outcome.matches.len(),
            "files_scanned": outcome.files_scanned,
            "files_skipped": outcome.files_skipped,
            "truncated": outcome.truncated,
            "matches": outcome.matches,
        });
        if let (Some(notice), Some(fields)) = (outcome.notice, out.as_object_mut()) {
            fields.insert("notice".into(), json!(notice));
        }
        Ok(out)
    }
}

/// What a search starts from, opened before it runs: the file or folder the handle reached.
enum Start {
    File(std::fs::File),
    Folder(Dir),
}

/// Opens the target through the root's handle: a folder as a handle the walk stays below, a file as an open
/// file, so nothing after this looks at a path string again.
fn open_target(root: &ManagedRoot, target: &ManagedPath) -> Result<Start, ToolError> {
    let meta = root.metadata(target).map_err(|e| io_error("search", target, &e))?;
    if meta.is_dir() {
        root.open_dir(target).map(Start::Folder).map_err(|e| io_error("search", target, &e))
    } else {
        root.open_read(target).map(Start::File).map_err(|e| io_error("search", target, &e))
    }
}

/// How matches below the target are shown: relative to the root inside it (`""` for the root itself), the
/// absolute path outside it.
fn shown_prefix(target: &ManagedPath) -> PathBuf {
    match target.relative.as_deref() {
        Some(".") => PathBuf::new(),
        Some(relative) => PathBuf::from(relative),
        None => target.absolute.clone(),
    }
}

/// Searches `target` (a file or folder) by its path, for callers outside the tool (the benchmark); paths in
/// matches are shown relative to `display_root` when inside it. The walk stays below `target`.
pub fn search(target: &Path, display_root: &Path, options: &GrepOptions) -> Result<GrepOutcome, ToolError> {
    let unavailable = |e: std::io::Error| ToolError::respond("file_io_error", format!("cannot search: {e}"));
    let start = if target.is_dir() {
        Start::Folder(Dir::open_ambient_dir(target, cap_std::ambient_authority()).map_err(unavailable)?)
    } else {
        Start::File(std::fs::File::open(target).map_err(unavailable)?)
    };
    let shown = match target.strip_prefix(display_root) {
        Ok(inside) => inside.to_path_buf(),
        Err(_) => target.to_path_buf(),
    };
    search_start(start, &shown, options)
}

fn search_start(start: Start, shown: &Path, options: &GrepOptions) -> Result<GrepOutcome, ToolError> {
    let mut search = Search::new(options)?;
    match start {
        Start::File(file) => {
            if let Ok(meta) = file.metadata()
                && meta.is_file()
            {
                search.file(&file, meta.len(), shown.to_string_lossy().into_owned());
            }
        }
        Start::Folder(dir) => {
            let walk = WalkOptions {
                include_hidden: options.include_hidden,
                max_depth: if options.recursive { None } else { Some(1) },
            };
            let walked = walk_files(&dir, walk, &mut |found: Found<'_>| {
                if search.outcome.truncated {
                    return ControlFlow::Break(());
                }
                // Opened by name from the folder handle the walk holds, never following a link.
                if let Ok((file, meta)) = open_regular(found.folder, found.name) {
                    search.file(&file, meta.len(), shown.join(found.relative).to_string_lossy().into_owned());
                }
                ControlFlow::Continue(())
            });
            search.outcome.notice = walked.notice();
        }
    }
    Ok(search.outcome)
}

/// One search's matcher, searcher and results so far.
struct Search<'a> {
    options: &'a GrepOptions,
    matcher: RegexMatcher,
    searcher: Searcher,
    outcome: GrepOutcome,
}

impl<'a> Search<'a> {
    fn new(options: &'a GrepOptions) -> Result<Self, ToolError> {
        let matcher = RegexMatcherBuilder::new()
            .case_insensitive(options.ignore_case)
            .fixed_strings(options.fixed_string)
            .size_limit(REGEX_SIZE_LIMIT)
            .dfa_size_limit(REGEX_SIZE_LIMIT)
            .line_terminator(Some(b'\n'))
            .build(&options.pattern)
            .map_err(|e| ToolError::respond("invalid_pattern", format!("invalid pattern: {e}")))?;
        let searcher = SearcherBuilder::new()
            .line_number(true)
            .before_context(options.context_before)
            .after_context(options.context_after)
            // A NUL byte marks a binary file: skip it rather than print garbage.
            .binary_detection(BinaryDetection::quit(b'\x00'))
            .build();
        Ok(Self { options, matcher, searcher, outcome: GrepOutcome::default() })
    }

    /// Searches one open file (of `size` bytes), its matches shown under `shown`.
    fn file(&mut self, file: &std::fs::File, size: u64, shown: String) {
        if size > self.options.max_file_size {
            self.outcome.files_skipped += 1;
            return;
        }
        let first_in_file = self.outcome.matches.len();
        let mut sink = Collector {
            path: shown,
            outcome: &mut self.outcome,
            max: self.options.max_matches,
            before_lines: self.options.context_before as u64,
            after_lines: self.options.context_after as u64,
            recent: std::collections::VecDeque::new(),
            first_in_file,
            binary: false,
        };
        match self.searcher.search_file(&self.matcher, file, &mut sink) {
            Ok(()) if !sink.binary => self.outcome.files_scanned += 1,
            _ => self.outcome.files_skipped += 1,
        }
    }
}

/// Collects matches with their context. The searcher reports each line once, so a line between two close
/// matches arrives as the first one's after-context only; both context lists are therefore rebuilt from the
/// line numbers, and a line can appear after one match and before the next, as a reader expects.
struct Collector<'a> {
    path: String,
    outcome: &'a mut GrepOutcome,
    max: usize,
    before_lines: u64,
    after_lines: u64,
    /// The last `before_lines` lines seen in this file, with their numbers.
    recent: std::collections::VecDeque<(u64, String)>,
    /// Index of this file's first match in `outcome.matches`.
    first_in_file: usize,
    binary: bool,
}

impl Collector<'_> {
    /// Adds a line to the after-context of the earlier matches it follows closely enough, and remembers it as
    /// possible before-context.
    fn saw(&mut self, number: u64, text: &str) {
        for m in self.outcome.matches[self.first_in_file..].iter_mut().rev() {
            if number <= m.line {
                continue;
            }
            if number - m.line > self.after_lines {
                break;
            }
            m.context_after.push(text.to_string());
        }
        if self.before_lines > 0 {
            if self.recent.len() as u64 >= self.before_lines {
                self.recent.pop_front();
            }
            self.recent.push_back((number, text.to_string()));
        }
    }
}

fn line_text(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim_end_matches(['\n', '\r']);
    if text.chars().count() > MAX_LINE_CHARS {
        let cut: String = text.chars().take(MAX_LINE_CHARS).collect();
        format!("{cut}…")
    } else {
        text.to_string()
    }
}

impl Sink for Collector<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _searcher: &Searcher, found: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        if self.outcome.matches.len() >= self.max {
            self.outcome.truncated = true;
            return Ok(false);
        }
        let line = found.line_number().unwrap_or(0);
        let text = line_text(found.bytes());
        let context_before = self
            .recent
            .iter()
            .filter(|(n, _)| *n < line && line - n <= self.before_lines)
            .map(|(_, t)| t.clone())
            .collect();
        self.saw(line, &text);
        self.outcome.matches.push(GrepMatch {
            path: self.path.clone(),
            line,
            text,
            context_before,
            context_after: Vec::new(),
        });
        Ok(true)
    }

    fn context(&mut self, _searcher: &Searcher, context: &SinkContext<'_>) -> Result<bool, Self::Error> {
        if let Some(number) = context.line_number() {
            let text = line_text(context.bytes());
            self.saw(number, &text);
        }
        Ok(true)
    }

    fn binary_data(&mut self, _searcher: &Searcher, _offset: u64) -> Result<bool, Self::Error> {
        self.binary = true;
        Ok(false)
    }
}
