//! A systemd unit file as its `Key=value` settings, by section, in order (keys such as `Environment=` repeat).

pub struct Unit {
    pub file: String,
    settings: Vec<(String, String, String)>,
}

impl Unit {
    pub fn parse(file: &str, text: &str) -> Self {
        let mut section = String::new();
        let mut settings = Vec::new();
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                section = name.to_string();
            } else if let Some((key, value)) = line.split_once('=') {
                settings.push((section.clone(), key.trim().to_string(), value.trim().to_string()));
            }
        }
        Self { file: file.to_string(), settings }
    }

    pub fn all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> {
        self.settings.iter().filter(move |(_, k, _)| k == key).map(|(_, _, v)| v.as_str())
    }

    /// The last value of a key (later settings override earlier ones).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.settings.iter().rev().find(|(_, k, _)| k == key).map(|(_, _, v)| v.as_str())
    }

    /// `Environment=` assignments: `A=1 "B=two words"` in one line, or one per line.
    pub fn environment(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for line in self.all("Environment") {
            let mut rest = line;
            while !rest.is_empty() {
                rest = rest.trim_start();
                let (word, tail) = match rest.strip_prefix('"') {
                    Some(quoted) => quoted.split_once('"').unwrap_or((quoted, "")),
                    None => rest.split_once(char::is_whitespace).unwrap_or((rest, "")),
                };
                if let Some((name, value)) = word.split_once('=') {
                    out.push((name.to_string(), value.to_string()));
                }
                rest = tail;
            }
        }
        out
    }

    /// The program `ExecStart=` runs, without systemd's prefixes (`-`, `@`, `+`, `!`, `:`).
    pub fn exec_program(&self) -> Option<String> {
        let line = self.get("ExecStart")?;
        let program = line.trim_start_matches(['-', '@', '+', '!', ':']).split_whitespace().next()?;
        Some(program.to_string())
    }

    pub fn exec_args(&self) -> Vec<String> {
        self.get("ExecStart").map(|l| l.split_whitespace().skip(1).map(str::to_string).collect()).unwrap_or_default()
    }
}
