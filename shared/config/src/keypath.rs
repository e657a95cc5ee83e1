//! Dotted key paths (`a.b[2].c`) into a parsed TOML table, as expansion and serde errors write them.

use toml::Value;

/// Splits `a.b[2].c` into segments.
pub(crate) fn segments(key: &str) -> Vec<Segment<'_>> {
    let mut out = Vec::new();
    for part in key.split('.') {
        let (name, indices) = part.split_once('[').map_or((part, ""), |(n, rest)| (n, rest));
        if !name.is_empty() {
            out.push(Segment::Key(name));
        }
        for index in indices.split('[') {
            if let Some(number) = index.trim_end_matches(']').parse::<usize>().ok().filter(|_| !index.is_empty()) {
                out.push(Segment::Index(number));
            }
        }
    }
    out
}

pub(crate) enum Segment<'a> {
    Key(&'a str),
    Index(usize),
}

pub(crate) fn lookup_mut<'t>(table: &'t mut toml::Table, key: &str) -> Option<&'t mut Value> {
    let segs = segments(key);
    let (first, rest) = segs.split_first()?;
    let Segment::Key(name) = first else {
        return None;
    };
    let mut current = table.get_mut(*name)?;
    for seg in rest {
        current = match (seg, current) {
            (Segment::Key(name), Value::Table(t)) => t.get_mut(*name)?,
            (Segment::Index(i), Value::Array(a)) => a.get_mut(*i)?,
            _ => return None,
        };
    }
    Some(current)
}

pub(crate) fn lookup_ref<'t>(table: &'t toml::Table, key: &str) -> Option<&'t Value> {
    let segs = segments(key);
    let (first, rest) = segs.split_first()?;
    let Segment::Key(name) = first else {
        return None;
    };
    let mut current = table.get(*name)?;
    for seg in rest {
        current = match (seg, current) {
            (Segment::Key(name), Value::Table(t)) => t.get(*name)?,
            (Segment::Index(i), Value::Array(a)) => a.get(*i)?,
            _ => return None,
        };
    }
    Some(current)
}
