//! A Dockerfile read into its stages and instructions, and the `.dockerignore` rules of its build context: enough
//! to check what a build copies, runs and ships without a Docker engine.

/// One instruction with continuation lines joined, e.g. `COPY --from=build /a /b /usr/local/bin/`.
#[derive(Debug, Clone)]
pub struct Instruction {
    pub keyword: String,
    pub args: String,
}

#[derive(Debug)]
pub struct Stage {
    pub image: String,
    pub name: Option<String>,
    pub instructions: Vec<Instruction>,
}

#[derive(Debug)]
pub struct Dockerfile {
    pub stages: Vec<Stage>,
}

/// A `COPY`/`ADD`: where from (a stage, or the build context), the sources, the destination.
#[derive(Debug)]
pub struct Copy {
    pub from: Option<String>,
    pub sources: Vec<String>,
    pub destination: String,
}

impl Dockerfile {
    pub fn parse(text: &str) -> Self {
        let mut stages: Vec<Stage> = Vec::new();
        for line in logical_lines(text) {
            let (keyword, args) = line.split_once(char::is_whitespace).unwrap_or((line.as_str(), ""));
            let keyword = keyword.to_ascii_uppercase();
            let args = args.trim().to_string();
            if keyword == "FROM" {
                let words: Vec<&str> = args.split_whitespace().filter(|w| !w.starts_with("--")).collect();
                let name = match words.as_slice() {
                    [_, r#as, name] if r#as.eq_ignore_ascii_case("as") => Some((*name).to_string()),
                    _ => None,
                };
                stages.push(Stage {
                    image: words.first().map(|w| w.to_string()).unwrap_or_default(),
                    name,
                    instructions: vec![],
                });
            } else if let Some(stage) = stages.last_mut() {
                stage.instructions.push(Instruction { keyword, args });
            }
        }
        Self { stages }
    }

    /// The stage the image is made of: the last one.
    pub fn runtime(&self) -> &Stage {
        self.stages.last().expect("the Dockerfile has a FROM")
    }
}

impl Stage {
    pub fn all<'a>(&'a self, keyword: &'a str) -> impl Iterator<Item = &'a Instruction> {
        self.instructions.iter().filter(move |i| i.keyword == keyword)
    }

    /// The last value of an exec-form (`["a", "b"]`) or shell-form instruction such as `ENTRYPOINT` or `CMD`.
    pub fn exec_form(&self, keyword: &str) -> Option<Vec<String>> {
        self.all(keyword).last().map(|i| words(&i.args))
    }

    pub fn copies(&self) -> Vec<Copy> {
        self.instructions
            .iter()
            .filter(|i| i.keyword == "COPY" || i.keyword == "ADD")
            .map(|i| {
                let mut from = None;
                let mut rest = Vec::new();
                for word in words(&i.args) {
                    match word.strip_prefix("--") {
                        Some(flag) => {
                            if let Some(stage) = flag.strip_prefix("from=") {
                                from = Some(stage.to_string());
                            }
                        }
                        None => rest.push(word),
                    }
                }
                let destination = rest.pop().unwrap_or_default();
                Copy { from, sources: rest, destination }
            })
            .collect()
    }

    /// `ENV` names and values, in both forms (`ENV A=1 B=2`, `ENV A 1`).
    pub fn env(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for instruction in self.all("ENV") {
            if instruction.args.contains('=') {
                for pair in instruction.args.split_whitespace() {
                    if let Some((name, value)) = pair.split_once('=') {
                        out.push((name.to_string(), value.trim_matches('"').to_string()));
                    }
                }
            } else if let Some((name, value)) = instruction.args.split_once(char::is_whitespace) {
                out.push((name.to_string(), value.trim().to_string()));
            }
        }
        out
    }
}

/// Lines with comments dropped and `\` continuations joined.
fn logical_lines(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut current = String::new();
    for raw in text.lines() {
        let trimmed = raw.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && current.is_empty()) {
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(head) => {
                current.push_str(head);
                current.push(' ');
            }
            None => {
                current.push_str(trimmed);
                lines.push(std::mem::take(&mut current));
            }
        }
    }
    if !current.trim().is_empty() {
        lines.push(current);
    }
    lines
}

/// The words of an instruction: the JSON array of the exec form, or the shell form split on white space.
fn words(args: &str) -> Vec<String> {
    if args.trim_start().starts_with('[')
        && let Ok(list) = serde_json::from_str::<Vec<String>>(args)
    {
        return list;
    }
    args.split_whitespace().map(str::to_string).collect()
}

/// The rules of a `.dockerignore`: the last matching pattern decides, `!` re-includes.
pub struct DockerIgnore {
    patterns: Vec<(bool, String)>,
}

impl DockerIgnore {
    pub fn parse(text: &str) -> Self {
        let patterns = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| match l.strip_prefix('!') {
                Some(p) => (false, clean(p)),
                None => (true, clean(l)),
            })
            .collect();
        Self { patterns }
    }

    /// Whether `path` (relative to the context root) stays out of the build context.
    pub fn excludes(&self, path: &str) -> bool {
        let path = clean(path);
        let mut excluded = false;
        for (exclude, pattern) in &self.patterns {
            // A pattern that names a folder excludes everything in it.
            let hit = glob(pattern, &path)
                || path.char_indices().filter(|(_, c)| *c == '/').any(|(i, _)| glob(pattern, &path[..i]));
            if hit {
                excluded = *exclude;
            }
        }
        excluded
    }
}

fn clean(pattern: &str) -> String {
    pattern.trim().trim_start_matches("./").trim_start_matches('/').trim_end_matches('/').to_string()
}

/// Docker's matching: `*` and `?` stay within one path element, `**` spans any number of them.
fn glob(pattern: &str, path: &str) -> bool {
    fn go(p: &[u8], s: &[u8]) -> bool {
        match p {
            [] => s.is_empty(),
            [b'*', b'*', b'/', rest @ ..] => (0..=s.len()).any(|i| (i == 0 || s[i - 1] == b'/') && go(rest, &s[i..])),
            [b'*', b'*', rest @ ..] => (0..=s.len()).any(|i| go(rest, &s[i..])),
            [b'*', rest @ ..] => (0..=s.len()).take_while(|&i| i == 0 || s[i - 1] != b'/').any(|i| go(rest, &s[i..])),
            [b'?', rest @ ..] => s.first().is_some_and(|c| *c != b'/') && go(rest, &s[1..]),
            [c, rest @ ..] => s.first() == Some(c) && go(rest, &s[1..]),
        }
    }
    go(pattern.as_bytes(), path.as_bytes())
}

#[test]
fn dockerignore_matching_follows_docker() {
    let ignore = DockerIgnore::parse("target\n**/*.db\ndeploy/*.env\n!deploy/keep.env\n");
    assert!(ignore.excludes("target/release/minibot"));
    assert!(ignore.excludes("data/minibot.db") && ignore.excludes("minibot.db"));
    assert!(ignore.excludes("deploy/minibot.env"));
    assert!(!ignore.excludes("deploy/keep.env"), "! re-includes");
    assert!(!ignore.excludes("deploy/minibot.env.example"));
    assert!(!ignore.excludes("deploy/sub/x.env"), "* stays within one folder");
    assert!(!ignore.excludes("targets/x"));
}
