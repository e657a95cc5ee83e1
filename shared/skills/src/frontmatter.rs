//! The `SKILL.md` reader: MiniBot's minimal frontmatter parser, not YAML (reference §9).
//!
//! Only three top-level keys are read, `name`, `description` and `compatibility`, each a scalar (quotes
//! stripped) or a `|` / `>` block scalar whose indented lines follow (`|` keeps the line breaks, `>` joins the
//! lines with spaces). Indented lines, list items, comments and every other key are skipped, so a skill written
//! for another agent with `license:` or `metadata:` still loads. A file is refused when it has no frontmatter,
//! no closing `---`, no `name`, or an empty body: the body is the whole point of a skill.

/// What one `SKILL.md` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillDoc {
    pub name: String,
    pub description: String,
    /// What the skill needs to run; `None` when not written or empty.
    pub compatibility: Option<String>,
    /// The instructions after the frontmatter, trimmed.
    pub body: String,
}

/// Descriptions past this many characters are logged: the catalog repeats them in every prompt.
pub const DESCRIPTION_NOTICE_CHARS: usize = 300;

/// Parses a `SKILL.md`; the error says why it is not a usable skill.
pub fn parse_skill_md(text: &str) -> Result<SkillDoc, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if !text.starts_with("---") {
        return Err("skill file has no frontmatter (it must start with a `---` line)".into());
    }
    let lines: Vec<&str> = text.lines().collect();
    let closing = lines
        .iter()
        .skip(1)
        .position(|line| line.trim() == "---")
        .map(|index| index + 1)
        .ok_or_else(|| "invalid frontmatter: missing closing ---".to_string())?;
    let fields = parse_fields(&lines[1..closing])?;
    let body = lines[closing + 1..].join("\n").trim().to_string();
    let name = fields.name.filter(|name| !name.trim().is_empty()).ok_or("skill frontmatter has no `name`")?;
    if body.is_empty() {
        return Err("skill body is empty".into());
    }
    if !name_looks_portable(&name) {
        tracing::warn!(skill = %name, "skill name should be 2-60 characters without line breaks or slashes");
    }
    let description = fields.description.unwrap_or_default();
    if description.chars().count() > DESCRIPTION_NOTICE_CHARS {
        tracing::info!(skill = %name, chars = description.chars().count(), "skill description is long");
    }
    let compatibility = fields.compatibility.filter(|c| !c.trim().is_empty());
    Ok(SkillDoc { name, description, compatibility, body })
}

#[derive(Default)]
struct Fields {
    name: Option<String>,
    description: Option<String>,
    compatibility: Option<String>,
}

impl Fields {
    fn slot(&mut self, key: &str) -> Option<&mut Option<String>> {
        match key {
            "name" => Some(&mut self.name),
            "description" => Some(&mut self.description),
            "compatibility" => Some(&mut self.compatibility),
            _ => None,
        }
    }
}

fn parse_fields(lines: &[&str]) -> Result<Fields, String> {
    let mut fields = Fields::default();
    let mut index = 0;
    while index < lines.len() {
        let raw = lines[index];
        index += 1;
        let stripped = raw.trim();
        if stripped.is_empty() || stripped.starts_with('#') || raw.starts_with(' ') || stripped.starts_with("- ") {
            continue;
        }
        let Some((key, value)) = stripped.split_once(':') else {
            return Err(format!("invalid frontmatter line: {raw}"));
        };
        let (key, value) = (key.trim(), value.trim());
        if let Some(folded) = block_style(value) {
            let mut block = Vec::new();
            while index < lines.len() && (lines[index].trim().is_empty() || lines[index].starts_with(' ')) {
                block.push(lines[index].trim());
                index += 1;
            }
            let joined = if folded {
                block.iter().filter(|part| !part.is_empty()).copied().collect::<Vec<_>>().join(" ")
            } else {
                block.join("\n").trim().to_string()
            };
            if let Some(slot) = fields.slot(key) {
                *slot = Some(joined);
            }
            continue;
        }
        if let Some(slot) = fields.slot(key) {
            *slot = Some(scalar(value));
        }
    }
    Ok(fields)
}

/// `Some(folded)` for a block scalar indicator: `|` (literal) or `>` (folded), with an optional `+`/`-`.
fn block_style(value: &str) -> Option<bool> {
    let mut chars = value.chars();
    let folded = match chars.next()? {
        '|' => false,
        '>' => true,
        _ => return None,
    };
    match chars.as_str() {
        "" | "+" | "-" => Some(folded),
        _ => None,
    }
}

fn scalar(value: &str) -> String {
    let quoted = value.len() >= 2
        && ((value.starts_with('"') && value.ends_with('"')) || (value.starts_with('\'') && value.ends_with('\'')));
    if quoted { value[1..value.len() - 1].to_string() } else { value.to_string() }
}

/// MiniBot's advice for names (`^[^\r\n/\\]{2,60}$`); only logged, never enforced.
fn name_looks_portable(name: &str) -> bool {
    let count = name.chars().count();
    (2..=60).contains(&count) && !name.contains(['\r', '\n', '/', '\\'])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_keys_and_quotes() {
        let doc = parse_skill_md(
            "---\nname: \"pdf-tools\"\ndescription: Work with PDFs: split, merge.\nlicense: MIT\n---\n\n# PDF\nDo it.\n",
        )
        .unwrap();
        assert_eq!(doc.name, "pdf-tools");
        assert_eq!(doc.description, "Work with PDFs: split, merge.");
        assert_eq!(doc.compatibility, None);
        assert_eq!(doc.body, "# PDF\nDo it.");
    }

    #[test]
    fn block_scalars_keep_or_fold_lines() {
        let doc = parse_skill_md(
            "---\nname: x-skill\ndescription: >\n  Use when the user\n  asks for x.\ncompatibility: |-\n  Requires bash.\n  \
             Requires git.\nmetadata:\n  author: someone\nallowed-tools:\n  - bash\n---\nBody\n",
        )
        .unwrap();
        assert_eq!(doc.description, "Use when the user asks for x.");
        assert_eq!(doc.compatibility.as_deref(), Some("Requires bash.\nRequires git."));
        assert_eq!(doc.body, "Body");
    }

    #[test]
    fn refusals_say_why() {
        assert!(parse_skill_md("# no frontmatter\n").unwrap_err().contains("no frontmatter"));
        assert!(parse_skill_md("---\nname: x\nbody\n").unwrap_err().contains("missing closing"));
        assert!(parse_skill_md("---\ndescription: d\n---\nbody\n").unwrap_err().contains("no `name`"));
        assert!(parse_skill_md("---\nname: xy\n---\n\n  \n").unwrap_err().contains("body is empty"));
        assert!(parse_skill_md("---\nname: xy\nnot a pair\n---\nb\n").unwrap_err().contains("invalid frontmatter"));
    }

    #[test]
    fn bundled_skills_parse() {
        for skill in crate::bundled::BUNDLED {
            let doc = parse_skill_md(skill.text).unwrap();
            assert_eq!(doc.name, skill.name);
            assert!(!doc.description.is_empty());
        }
    }
}
