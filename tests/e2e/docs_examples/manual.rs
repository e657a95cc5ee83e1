//! The user manual as the tests read it: the code blocks of `README.md` and `docs/*.md`, and the shell commands
//! among them.

use std::path::{Path, PathBuf};

/// A fenced (```) or indented (four spaces) code block.
#[derive(Debug, Clone)]
pub struct Block {
    /// Relative to the repository root, e.g. `docs/console.md`.
    pub file: String,
    /// The line of the opening fence, or of the first indented line (1-based).
    pub line: usize,
    /// The fence's info string (`toml`, `markdown`…); empty for an unlabelled fence or an indented block.
    pub lang: String,
    /// The lines inside, without the fence's (or the indented block's) indentation.
    pub lines: Vec<String>,
}

impl Block {
    pub fn text(&self) -> String {
        self.lines.iter().map(|l| format!("{l}\n")).collect()
    }

    pub fn place(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

/// A shell command found in a block, with the lines a `$ ` transcript shows after it.
#[derive(Debug, Clone)]
pub struct Example {
    /// The command without its `$ ` prompt, its trailing `# comment` and surrounding space; continued lines joined.
    pub command: String,
    pub place: String,
    /// The output shown after a `$ ` command, up to the next one (empty when the block is not a transcript).
    pub output: Vec<String>,
}

/// The first words that make a line of an unlabelled block a command rather than output or file contents.
const PROGRAMS: &[&str] = &[
    "minibot",
    "minibot-worker",
    "minibot-sandbox",
    "cargo",
    "scripts/test",
    "scripts/setup-mcp-peers.sh",
    "docker",
    "podman",
    "sudo",
    "systemctl",
    "journalctl",
    "rabbitmqctl",
    "rabbitmqadmin",
    "printf",
    "echo",
    "git",
    "cp",
    "chmod",
    "mkdir",
    "cd",
    "install",
    "export",
    "openssl",
    "curl",
    "cat",
    "python3",
    "pip",
    "npm",
    "npx",
    "apt-get",
    "kill",
    "env",
];

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// `README.md` and every `docs/*.md`, as (relative path, text), in name order.
pub fn pages() -> Vec<(String, String)> {
    let root = repo_root();
    let mut names: Vec<String> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    names.sort();
    names.push("README.md".into());
    names.into_iter().map(|n| (n.clone(), std::fs::read_to_string(root.join(&n)).unwrap())).collect()
}

pub fn blocks() -> Vec<Block> {
    pages().iter().flat_map(|(file, text)| blocks_of(file, text)).collect()
}

fn blocks_of(file: &str, text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let indent = line.len() - line.trim_start().len();
        if let Some(info) = line.trim_start().strip_prefix("```") {
            let start = i;
            i += 1;
            let mut body = Vec::new();
            while i < lines.len() && lines[i].trim() != "```" {
                body.push(strip_indent(lines[i], indent));
                i += 1;
            }
            out.push(Block { file: file.into(), line: start + 1, lang: info.trim().into(), lines: body });
            i += 1;
            continue;
        }
        let after_blank = i == 0 || lines[i - 1].trim().is_empty();
        if after_blank && line.starts_with("    ") && !line.trim().is_empty() {
            let start = i;
            let mut body = Vec::new();
            while i < lines.len() && (lines[i].starts_with("    ") || lines[i].trim().is_empty()) {
                body.push(strip_indent(lines[i], 4));
                i += 1;
            }
            while body.last().is_some_and(|l| l.trim().is_empty()) {
                body.pop();
            }
            out.push(Block { file: file.into(), line: start + 1, lang: String::new(), lines: body });
            continue;
        }
        i += 1;
    }
    out
}

fn strip_indent(line: &str, indent: usize) -> String {
    let spaces = line.len() - line.trim_start_matches(' ').len();
    line[spaces.min(indent)..].to_string()
}

/// Every shell command of the manual's unlabelled and shell blocks.
pub fn examples() -> Vec<Example> {
    blocks()
        .iter()
        .filter(|b| matches!(b.lang.as_str(), "" | "sh" | "bash" | "shell" | "console"))
        .flat_map(commands_of)
        .collect()
}

fn commands_of(block: &Block) -> Vec<Example> {
    let mut joined: Vec<String> = Vec::new();
    let mut continued = false;
    for line in &block.lines {
        let piece = line.trim_end();
        let (piece, continues) = match piece.strip_suffix('\\') {
            Some(head) => (head.trim_end(), true),
            None => (piece, false),
        };
        match joined.last_mut() {
            Some(last) if continued => {
                last.push(' ');
                last.push_str(piece.trim_start());
            }
            _ => joined.push(piece.to_string()),
        }
        continued = continues;
    }
    let place = block.place();
    if joined.iter().any(|l| l.starts_with("$ ")) {
        let mut out: Vec<Example> = Vec::new();
        for line in joined {
            match line.strip_prefix("$ ") {
                Some(command) => {
                    out.push(Example { command: without_comment(command), place: place.clone(), output: Vec::new() })
                }
                None => {
                    if let Some(last) = out.last_mut() {
                        last.output.push(line);
                    }
                }
            }
        }
        return out;
    }
    joined
        .iter()
        .map(|l| without_comment(l))
        .filter(|l| is_command(l))
        .map(|command| Example { command, place: place.clone(), output: Vec::new() })
        .collect()
}

fn is_command(line: &str) -> bool {
    let program = line.split_whitespace().find(|word| !is_assignment(word));
    program.is_some_and(|p| PROGRAMS.contains(&p))
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=')
        .is_some_and(|(name, _)| !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
}

/// Drops a trailing `# comment` (a `#` after white space, outside quotes).
fn without_comment(line: &str) -> String {
    let mut quote: Option<char> = None;
    let mut previous = ' ';
    for (at, c) in line.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if c == '#' && previous.is_whitespace() => return line[..at].trim().to_string(),
            None => {}
        }
        previous = c;
    }
    line.trim().to_string()
}

/// The examples whose command is exactly `command`; fails when the manual has none.
pub fn documented(command: &str) -> Vec<Example> {
    let found: Vec<Example> = examples().into_iter().filter(|e| e.command == command).collect();
    assert!(!found.is_empty(), "the manual no longer shows `{command}`; update tests/e2e/docs_examples.rs");
    found
}

/// The block that follows the first line of `file` containing `marker`.
pub fn block_after(file: &str, marker: &str) -> Block {
    let (_, text) = pages().into_iter().find(|(name, _)| name == file).unwrap();
    let at =
        text.lines().position(|l| l.contains(marker)).unwrap_or_else(|| panic!("{file} no longer says {marker:?}"));
    blocks_of(file, &text).into_iter().find(|b| b.line > at + 1).unwrap()
}

#[test]
fn commands_are_found_with_their_transcripts() {
    let block = Block {
        file: "x.md".into(),
        line: 1,
        lang: String::new(),
        lines: vec!["$ minibot a   # note".into(), "out 1".into(), "$ b".into(), "out 2".into()],
    };
    let found = commands_of(&block);
    assert_eq!(found.iter().map(|e| e.command.as_str()).collect::<Vec<_>>(), ["minibot a", "b"]);
    assert_eq!(found[0].output, ["out 1"]);
    let block = Block {
        file: "x.md".into(),
        line: 1,
        lang: String::new(),
        lines: vec![
            "KEY=value".into(),
            "A=1 minibot x '#not a comment' \\".into(),
            "  --flag".into(),
            "error: minibot said".into(),
        ],
    };
    let found = commands_of(&block);
    assert_eq!(found.iter().map(|e| e.command.as_str()).collect::<Vec<_>>(), ["A=1 minibot x '#not a comment' --flag"]);
}
