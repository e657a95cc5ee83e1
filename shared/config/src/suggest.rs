//! Help for a key or section the schema does not know: the line it is on, the known name it is closest to
//! (edit distance), or the section it belongs in when it exists elsewhere (`[telegram]` is
//! `[channels.telegram]`, `bot_token` under `[llm]` belongs in `[channels.telegram]`).

use crate::keypath::{Segment, segments};
use crate::schema::{ConfigFile, SECTIONS};
use toml::de::{DeTable, DeValue};

/// The 1-based line where `key` (a path such as `llm.modle` or `tools.mcp.servers[0].comand`) is written in
/// `text`; `None` when the text does not write it (an override set it) or does not parse.
pub(crate) fn line_of(text: &str, key: &str) -> Option<usize> {
    let root = DeTable::parse(text).ok()?;
    let mut table = root.get_ref();
    let mut offset = None;
    let mut parts = segments(key).into_iter().peekable();
    while let Some(segment) = parts.next() {
        let Segment::Key(name) = segment else { return None };
        let (found_key, value) = table.iter().find(|(k, _)| k.get_ref().as_ref() == name)?;
        offset = Some(found_key.span().start);
        let mut value = value.get_ref();
        while let Some(Segment::Index(index)) = parts.peek() {
            let DeValue::Array(items) = value else { return None };
            value = items.get(*index)?.get_ref();
            parts.next();
        }
        match value {
            DeValue::Table(inner) => table = inner,
            _ if parts.peek().is_none() => break,
            _ => return None,
        }
    }
    offset.map(|at| text[..at.min(text.len())].matches('\n').count() + 1)
}

/// What to tell the user about the unknown `name` where `known` are the names allowed there: the closest of
/// them, else the section that does have `name`. Starts with `; ` so it can follow the message.
pub(crate) fn for_key(name: &str, known: &[String]) -> String {
    if let Some(close) = closest(name, known.iter().map(String::as_str)) {
        return format!("; did you mean `{close}`?");
    }
    match homes_of(name).as_slice() {
        [home] => format!("; `{name}` belongs in [{home}]"),
        _ if known.is_empty() => String::new(),
        _ => format!("; the keys here are {}", known.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")),
    }
}

/// The same for an unknown top-level table `[name]`: a section of that name further down (`[telegram]` →
/// `[channels.telegram]`), else the closest top-level section.
pub(crate) fn for_section(name: &str) -> String {
    let nested: Vec<String> = tables_named(name);
    if let [path] = nested.as_slice() {
        return format!("; did you mean [{path}]?");
    }
    match closest(name, SECTIONS.iter().copied()) {
        Some(close) => format!("; did you mean [{close}]?"),
        None => {
            format!("; the sections are {}", SECTIONS.iter().map(|s| format!("[{s}]")).collect::<Vec<_>>().join(", "))
        }
    }
}

/// A top-level key that is not a table (`model = "x"` above every header) is a key that lost its section.
pub(crate) fn for_top_level_key(name: &str) -> String {
    let homes = homes_of(name);
    // `model` is in [llm] and in deeper sections; a key that lost its header most likely lost a top-level one.
    let top: Vec<String> = homes.iter().filter(|home| !home.contains('.')).cloned().collect();
    match (top.as_slice(), homes.as_slice()) {
        ([home], _) | (_, [home]) => format!("; it belongs in [{home}]: move it below the [{home}] header"),
        ([], []) => for_section(name),
        (top, _) => {
            let shown = if top.is_empty() { &homes } else { top };
            format!("; keys go below a section header, such as [{}]", shown.join("] or ["))
        }
    }
}

/// The names serde lists after "expected" in "unknown field `x`, expected one of `a`, `b`".
pub(crate) fn expected_names(message: &str) -> Vec<String> {
    let Some((_, list)) = message.split_once("expected") else { return Vec::new() };
    list.split('`').skip(1).step_by(2).map(str::to_string).collect()
}

/// The candidate within a third of the name's length (at least one edit): `modle` → `model`,
/// `temprature` → `temperature`, `lmm` → `llm`.
fn closest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .map(|candidate| (strsim::damerau_levenshtein(name, candidate), candidate))
        .filter(|(distance, candidate)| *distance <= (name.len().max(candidate.len()) / 3).max(1))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// The tables of the default config: every section and subsection with every key it has by default.
fn defaults() -> toml::Table {
    toml::Table::try_from(ConfigFile::default()).unwrap_or_default()
}

/// The sections (dotted) that have a key `name` that is not itself a table.
fn homes_of(name: &str) -> Vec<String> {
    let mut found = Vec::new();
    walk(&defaults(), "", &mut |path, key, value| {
        if key == name && !value.is_table() && !path.is_empty() {
            found.push(path.to_string());
        }
    });
    found
}

/// The dotted paths of subsections named `name` (below the top level).
fn tables_named(name: &str) -> Vec<String> {
    let mut found = Vec::new();
    walk(&defaults(), "", &mut |path, key, value| {
        if key == name && value.is_table() && !path.is_empty() {
            found.push(format!("{path}.{key}"));
        }
    });
    found
}

fn walk(table: &toml::Table, path: &str, visit: &mut dyn FnMut(&str, &str, &toml::Value)) {
    for (key, value) in table {
        visit(path, key, value);
        if let toml::Value::Table(inner) = value {
            let inner_path = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
            walk(inner, &inner_path, visit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_found_for_nested_and_array_keys() {
        let text = "[llm]\nmodel = \"x\"\n\n[[tools.mcp.servers]]\nname = \"a\"\n\n[[tools.mcp.servers]]\nname = \"b\"\ncomand = \"c\"\n";
        assert_eq!(line_of(text, "llm.model"), Some(2));
        assert_eq!(line_of(text, "tools.mcp.servers[1].comand"), Some(9));
        assert_eq!(line_of(text, "llm.nope"), None);
        assert_eq!(line_of("llm.model = 1\n", "llm.model"), Some(1));
    }

    #[test]
    fn close_names_and_misplaced_keys_are_suggested() {
        let known = expected_names("unknown field `modle`, expected one of `provider`, `model`, `api_key`");
        assert_eq!(known, ["provider", "model", "api_key"]);
        assert_eq!(for_key("modle", &known), "; did you mean `model`?");
        assert_eq!(for_key("bot_token", &known), "; `bot_token` belongs in [channels.telegram]");
        assert!(
            for_key("zzzzzz", &known).starts_with("; the keys here are `provider`"),
            "{}",
            for_key("zzzzzz", &known)
        );
        assert_eq!(for_section("telegram"), "; did you mean [channels.telegram]?");
        assert_eq!(for_section("mcp"), "; did you mean [tools.mcp]?");
        assert_eq!(for_section("lmm"), "; did you mean [llm]?");
        assert_eq!(
            for_top_level_key("bot_token"),
            "; it belongs in [channels.telegram]: move it below the [channels.telegram] header"
        );
        assert_eq!(for_top_level_key("model"), "; keys go below a section header, such as [decision] or [llm]");
    }
}
